"""Ticks: the one shape every tick source returns, its checks, and bars built from ticks.

A tick frame has a UTC ``DatetimeIndex`` named ``time`` (nanoseconds; equal times are legal, MetaTrader
has them) and float64 columns ``bid`` and ``ask``, optionally ``last`` and ``volume``; its
``attrs["ticks"]`` is a ``TickMeta`` (symbol, digits, source). ``make_ticks`` builds one from arrays
without copying them (a year of EURUSD is some 30 M ticks: 720 MB as time + bid + ask) and checks it:
times in order, prices finite and positive, ask not below bid. A bad tick raises ``TickDataError``
naming where the ticks came from and the first offending rows.

Sources (``datafeeds.sources.load_ticks``) are the candle sources that have ticks (``mt5``:
``copy_ticks_range``; ``dukascopy``: the hourly tick files; ``synthetic``: ticks that make up the
synthetic M1 bars exactly) and ``csv``, a file of the terminal's "Export ticks" (``datafeeds.tick_csv``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, make_frame
from datafeeds.clock import UTC
from datafeeds.errors import CandleDataError, DataError, DataTypeError
from datafeeds.timeframes import Timeframe

TICK_COLUMNS = ("bid", "ask", "last", "volume")


class TickDataError(CandleDataError):
    """Ticks that break a rule (order in time, prices), naming their origin and the first bad rows."""


@dataclass(frozen=True)
class TickMeta:
    """What a tick frame is of: the symbol, its price digits, and the source it came from."""

    symbol: str
    digits: int
    source: str

    @property
    def point(self) -> float:
        return 10.0**-self.digits


def tick_meta(ticks: pd.DataFrame) -> TickMeta:
    meta = ticks.attrs.get("ticks")
    if not isinstance(meta, TickMeta):
        raise DataTypeError("not a tick frame: build it with datafeeds.make_ticks or load it with load_ticks")
    return meta


def make_ticks(
    time_ns: np.ndarray,
    bid: np.ndarray,
    ask: np.ndarray,
    meta: TickMeta,
    *,
    last: np.ndarray | None = None,
    volume: np.ndarray | None = None,
    lines: np.ndarray | None = None,
    origin: str | None = None,
) -> pd.DataFrame:
    """A checked tick frame from UTC nanoseconds and prices; errors name ``origin`` (default: the source)
    and, given ``lines`` (each row's line in a file), the lines."""
    # A view of the nanoseconds localised to UTC: one copy (pd.to_datetime on integers makes several).
    stamps = np.ascontiguousarray(time_ns, dtype=np.int64).view("M8[ns]")
    index = pd.DatetimeIndex(stamps, copy=False, name="time").tz_localize("UTC")
    data = {"bid": np.asarray(bid, dtype=np.float64), "ask": np.asarray(ask, dtype=np.float64)}
    if last is not None:
        data["last"] = np.asarray(last, dtype=np.float64)
    if volume is not None:
        data["volume"] = np.asarray(volume, dtype=np.float64)
    df = pd.DataFrame(data, index=index, copy=False)
    df.attrs["ticks"] = meta
    check_ticks(df, origin or meta.source, lines)
    return df


def check_ticks(df: pd.DataFrame, origin: str, lines: np.ndarray | None = None) -> None:
    """Refuse ticks a fill could read garbage from; equal times are legal, a step back in time is not."""
    ns = df.index.as_unit("ns").asi8
    back = np.flatnonzero(ns[1:] < ns[:-1]) + 1
    if len(back):
        _fail(df, origin, back, lines, "ticks out of time order (a tick earlier than the one before it)")
    bid, ask = df["bid"].to_numpy(), df["ask"].to_numpy()
    bad = ~(np.isfinite(bid) & np.isfinite(ask) & (bid > 0) & (ask > 0))
    if bad.any():
        _fail(df, origin, np.flatnonzero(bad), lines, "bid and ask must be finite positive prices")
    crossed = ask < bid
    if crossed.any():
        _fail(df, origin, np.flatnonzero(crossed), lines, "ask below bid")


def _fail(df: pd.DataFrame, origin: str, rows: np.ndarray, lines: np.ndarray | None, problem: str):
    shown = rows[:50]
    frame = df.iloc[shown][["bid", "ask"]]
    where = None if lines is None else np.asarray(lines)[shown]
    raise TickDataError(origin, problem, frame, where)


def bars_from_ticks(ticks: pd.DataFrame, timeframe: Timeframe | str | int = "M1") -> pd.DataFrame:
    """Bid candles of ``timeframe`` (UTC buckets) from ticks: OHLC of the bid, the tick count, and the
    spread of the bar's first tick in points (MetaTrader's bars carry one spread per bar)."""
    meta = tick_meta(ticks)
    tf = Timeframe.parse(timeframe)
    if tf.seconds >= 7 * 86400:
        raise DataError(f"bars_from_ticks builds intraday and daily bars, not {tf.name}")
    ns = ticks.index.as_unit("ns").asi8
    step = tf.seconds * 1_000_000_000
    bucket = ns // step * step
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(ns) else np.zeros(0, np.int64)
    bid = ticks["bid"].to_numpy()
    ends = np.r_[starts[1:], len(ns)] - 1
    spread = (ticks["ask"].to_numpy()[starts] - bid[starts]) * 10.0**meta.digits
    data = {
        "open": bid[starts],
        "high": np.maximum.reduceat(bid, starts) if len(ns) else bid[:0],
        "low": np.minimum.reduceat(bid, starts) if len(ns) else bid[:0],
        "close": bid[ends],
        "tick_volume": np.diff(np.r_[starts, len(ns)]).astype(np.uint64),
        "spread": np.rint(spread).astype(np.int32),
    }
    candle_meta = CandleMeta(meta.symbol, tf, meta.digits, UTC, meta.source)
    return make_frame(data, pd.to_datetime(bucket[starts], utc=True), candle_meta)
