"""The one in-memory candle form: a pandas DataFrame shaped like MetaTrader's rates.

Index: bar open time, a tz-aware UTC ``DatetimeIndex`` named ``time``. Columns, in order:
``open, high, low, close`` (float64), ``tick_volume`` (uint64), ``spread`` (int32, in points),
``real_volume`` (uint64) — the names users know from ``copy_rates_*``.

Metadata lives in ``DataFrame.attrs`` (see ``CandleMeta``): symbol, timeframe, price digits and the
time-zone convention. Time policy: frames are always UTC. Terminal data is in broker server time; the
source that reads it converts with a ``BrokerClock`` and records the clock, so ``to_rates`` can give the
terminal's own seconds back, loss-free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from datafeeds.clock import UTC, BrokerClock, utc_bound
from datafeeds.errors import DataError
from datafeeds.timeframes import Timeframe

PRICE_COLUMNS = ("open", "high", "low", "close")
COLUMNS = (*PRICE_COLUMNS, "tick_volume", "spread", "real_volume")
COLUMN_DTYPES = {
    "open": np.float64,
    "high": np.float64,
    "low": np.float64,
    "close": np.float64,
    "tick_volume": np.uint64,
    "spread": np.int32,
    "real_volume": np.uint64,
}
RATES_DTYPE = np.dtype(
    [
        ("time", "<i8"),
        ("open", "<f8"),
        ("high", "<f8"),
        ("low", "<f8"),
        ("close", "<f8"),
        ("tick_volume", "<u8"),
        ("spread", "<i4"),
        ("real_volume", "<u8"),
    ]
)


@dataclass(frozen=True)
class CandleMeta:
    """What a candle frame is: kept in ``df.attrs`` and written into every export and report."""

    symbol: str
    timeframe: Timeframe
    digits: int = 5
    clock: BrokerClock = UTC
    source: str = ""

    @property
    def point(self) -> float:
        """Smallest price step (MetaTrader's ``point``): spreads are counted in these."""
        return 10.0 ** (-self.digits)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["timeframe"] = self.timeframe.name
        d["clock"] = self.clock.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> CandleMeta:
        return cls(
            symbol=d["symbol"],
            timeframe=Timeframe.parse(d["timeframe"]),
            digits=int(d.get("digits", 5)),
            clock=BrokerClock.from_dict(d.get("clock") or {}),
            source=d.get("source", ""),
        )


def meta_of(df: pd.DataFrame) -> CandleMeta:
    """The ``CandleMeta`` of a frame; a clear error when the frame was not made by ``make_frame``."""
    meta = df.attrs.get("candles")
    if not isinstance(meta, CandleMeta):
        raise DataError(
            "this DataFrame carries no candle metadata; build it with datafeeds.make_frame() "
            "or load it through a datafeeds source"
        )
    return meta


def make_frame(data: pd.DataFrame | dict, index: pd.DatetimeIndex, meta: CandleMeta) -> pd.DataFrame:
    """Build a canonical frame: column order and dtypes fixed, UTC index named ``time``, metadata set.

    Missing ``tick_volume``/``spread``/``real_volume`` columns are filled with 0 (sources without them).
    """
    index = pd.DatetimeIndex(index)
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    index = index.as_unit("ns").rename("time")
    cols = {}
    for name in COLUMNS:
        if name in data:
            values = np.asarray(data[name])
        elif name in PRICE_COLUMNS:
            raise DataError(f"candle data from {meta.source or meta.symbol!r} has no {name!r} column")
        else:
            values = np.zeros(len(index))
        if name not in PRICE_COLUMNS:
            _check_integers(values, name, COLUMN_DTYPES[name], meta)
        cols[name] = values.astype(COLUMN_DTYPES[name], copy=False)
    df = pd.DataFrame(cols, index=index)
    df.attrs["candles"] = meta
    return df


def _check_integers(values: np.ndarray, name: str, dtype: type, meta: CandleMeta) -> None:
    """Refuse values a cast to ``dtype`` would wrap or truncate (a negative volume, NaN, 2.5 points)."""
    if values.dtype == dtype or not len(values):
        return
    info = np.iinfo(dtype)
    if values.dtype.kind in "iu":
        bad = (values < info.min) | (values > info.max)
    else:
        with np.errstate(invalid="ignore"):
            as_float = values.astype(np.float64)
            bad = ~np.isfinite(as_float) | (as_float != np.round(as_float))
            bad |= (as_float < info.min) | (as_float > info.max)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"candle data from {meta.source or meta.symbol!r}: {name} {values[first]} at row {first + 1} "
            f"is not a whole number within {info.min}..{info.max}"
        )


def from_rates(rates: np.ndarray, meta: CandleMeta) -> pd.DataFrame:
    """Convert a terminal rates array (``RATES_DTYPE``; broker seconds) into a canonical UTC frame."""
    rates = np.asarray(rates)
    missing = [n for n in RATES_DTYPE.names if rates.dtype.names is None or n not in rates.dtype.names]
    if missing:
        raise DataError(f"rates array from {meta.source or meta.symbol!r} lacks fields {missing}")
    utc_seconds = meta.clock.to_utc_seconds(rates["time"].astype(np.int64))
    index = pd.to_datetime(utc_seconds, unit="s", utc=True)
    return make_frame({n: rates[n] for n in COLUMNS}, index, meta)


def to_rates(df: pd.DataFrame) -> np.ndarray:
    """The inverse of ``from_rates``: a ``RATES_DTYPE`` array with the terminal's broker seconds."""
    meta = meta_of(df)
    out = np.empty(len(df), dtype=RATES_DTYPE)
    utc_seconds = df.index.as_unit("s").asi8
    out["time"] = meta.clock.to_broker_seconds(utc_seconds)
    for name in COLUMNS:
        out[name] = df[name].to_numpy()
    return out


def in_window(df: pd.DataFrame, start=None, end=None) -> pd.DataFrame:
    """The bars of a candle frame that open in ``[start, end)`` (UTC), metadata kept."""
    lo, hi = utc_bound(start, "start"), utc_bound(end, "end")
    if lo is None and hi is None:
        return df
    keep = np.ones(len(df), dtype=bool)
    if lo is not None:
        keep &= df.index >= lo
    if hi is not None:
        keep &= df.index < hi
    out = df.loc[keep]
    out.attrs = dict(df.attrs)
    return out
