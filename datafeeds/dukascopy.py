"""Candles from Dukascopy's free historical archive, for users without a terminal.

    src = DukascopySource()                       # cache in <neuronet cache>/dukascopy
    df = src.load("EURUSD", "H1", start="2023-01-01", end="2023-07-01")

The archive (``https://datafeed.dukascopy.com/datafeed``) holds, per instrument, ``.bi5`` files (see
``datafeeds.bi5``) at paths whose MONTH IS ZERO-BASED (January = ``00``) while day and hour are not:

    {SYM}/{YYYY}/{MM-1}/{DD}/{HH}h_ticks.bi5             ticks, one file per hour
    {SYM}/{YYYY}/{MM-1}/{DD}/BID_candles_min_1.bi5       minute candles, one file per day
    {SYM}/{YYYY}/{MM-1}/BID_candles_hour_1.bi5           hourly candles, one file per month

(``ASK_`` instead of ``BID_`` for the ask side.) Archive times are UTC.

Which files (``data=``): ``"auto"`` takes hourly candles for H1 and above (12 files a year) and minute
candles below; ``"minute"``, ``"hour"`` and ``"ticks"`` force one kind. Ticks are the only kind that
carries the spread and a tick count: built from ticks, ``tick_volume`` is the number of ticks and
``spread`` the lowest ask - bid of the bar in points; built from candles both are 0. ``real_volume`` is
the archive's volume of the price side (millions of units) times ``volume_scale`` (default 1e6),
rounded. Candles with zero volume are the archive's filler for minutes or hours without a trade
("flats") and are dropped unless ``keep_flats=True``.

Timeframes: the base bars (M1, or H1 from hourly files) are aggregated with ``datafeeds.resample`` in
the declared ``clock`` (default UTC), so ``clock="UTC+2/us"`` gives D1 bars that open at a "New York
close" broker's midnight, like that broker's terminal. Bars open in ``[start, end)`` (UTC); a bar whose
period is not over yet is left out, and without ``start`` the last 30 days (minute data), 365 days
(hourly data) or 1 day (ticks) are loaded.

Prices: the archive counts prices in points of 10**-digits: 5 digits for most currency pairs, 3 for pairs
quoted in yen and for gold and silver (``DIGITS``); pass ``digits=`` for any other instrument.

Downloads are cached, resumable, rate-limited and retried (``datafeeds.dukascopy_fetch``).

Ticks themselves (``load_ticks``, a tick frame of ``datafeeds.ticks``: bid and ask of every tick, in UTC)
come from the same hourly tick files and the same cache, for the backtest's tick model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from datafeeds.bi5 import TICK_RECORD, read_candles, read_ticks
from datafeeds.candles import CandleMeta, make_frame
from datafeeds.clock import BrokerClock, utc_seconds
from datafeeds.dukascopy_fetch import Fetcher, NotFoundError
from datafeeds.errors import DataError
from datafeeds.resample import bucket_start, resample
from datafeeds.store import cache_root
from datafeeds.ticks import TickMeta, make_ticks
from datafeeds.timeframes import Timeframe
from neuronet.errors import NeuronetError

log = logging.getLogger(__name__)

BASE_URL = "https://datafeed.dukascopy.com/datafeed"
DIGITS = {"XAUUSD": 3, "XAGUSD": 3}
DATA_KINDS = ("auto", "minute", "hour", "ticks")
DEFAULT_SPAN_S = {"minute": 30 * 86400, "hour": 365 * 86400, "ticks": 86400}
SETTLE_S = 2 * 3600  # a file is final (cacheable) this long after its period ends


class NoDataError(NeuronetError, LookupError):
    """The archive has no bars for the request (every file in the range was empty)."""


def default_digits(symbol: str) -> int:
    """Price digits of the archive's integer prices: a table, then 3 for yen-quoted pairs, else 5."""
    symbol = symbol.upper()
    if symbol in DIGITS:
        return DIGITS[symbol]
    return 3 if symbol[3:6] == "JPY" else 5


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file: its path below the base URL and the UTC period ``[start, end)`` it covers."""

    path: str
    start: int
    end: int


def _month_start(t: datetime) -> datetime:
    return t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def plan_files(symbol: str, kind: str, side: str, start: int, end: int) -> list[ArchiveFile]:
    """The files covering UTC seconds ``[start, end)``, oldest first. Month in the path is zero-based."""
    t = datetime.fromtimestamp(start, UTC)
    if kind == "hour":
        t, step = _month_start(t), None
    elif kind == "minute":
        t, step = t.replace(hour=0, minute=0, second=0, microsecond=0), timedelta(days=1)
    else:
        t, step = t.replace(minute=0, second=0, microsecond=0), timedelta(hours=1)
    files = []
    while t.timestamp() < end:
        nxt = _month_start(t + timedelta(days=32)) if step is None else t + step
        folder = f"{symbol}/{t.year:04d}/{t.month - 1:02d}"
        if kind == "hour":
            path = f"{folder}/{side}_candles_hour_1.bi5"
        elif kind == "minute":
            path = f"{folder}/{t.day:02d}/{side}_candles_min_1.bi5"
        else:
            path = f"{folder}/{t.day:02d}/{t.hour:02d}h_ticks.bi5"
        files.append(ArchiveFile(path, int(t.timestamp()), int(nxt.timestamp())))
        t = nxt
    return files


def _longest_bar(tf: Timeframe) -> int:
    return 31 * 86400 if tf is Timeframe.MN1 else tf.seconds


class DukascopySource:
    """Load candles from Dukascopy's archive (``load(symbol, timeframe, start=None, end=None)``).

    ``cache_dir``: where raw files are kept (default ``<neuronet cache>/dukascopy``). ``rate_limit``:
    requests per second. ``retries``: attempts after the first on 5xx/429/time-outs/dropped
    connections, waiting ``backoff`` s, then twice that, and so on. ``price_side``: ``"BID"`` or
    ``"ASK"``. Other options are described in the module docstring.
    """

    name = "dukascopy"

    def __init__(
        self,
        cache_dir: str | Path | None = None,
        base_url: str = BASE_URL,
        price_side: str = "BID",
        rate_limit: float = 5.0,
        retries: int = 4,
        *,
        data: str = "auto",
        digits: int | None = None,
        clock: BrokerClock | str = "UTC",
        backoff: float = 1.0,
        timeout: float = 30.0,
        keep_flats: bool = False,
        volume_scale: float = 1e6,
    ) -> None:
        side = str(price_side).upper()
        if side not in ("BID", "ASK"):
            raise DataError(f"price_side must be 'BID' or 'ASK', not {price_side!r}")
        if data not in DATA_KINDS:
            raise DataError(f"data must be one of {', '.join(DATA_KINDS)}, not {data!r}")
        if digits is not None and not 0 <= digits <= 8:
            raise DataError(f"digits must be 0..8, not {digits}")
        self.side, self.data, self.digits = side, data, digits
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        self.keep_flats, self.volume_scale = bool(keep_flats), float(volume_scale)
        cache = Path(cache_dir) if cache_dir is not None else cache_root() / "dukascopy"
        self.fetcher = Fetcher(
            base_url, cache, rate_limit=rate_limit, retries=retries, backoff=backoff, timeout=timeout
        )

    def _kind(self, tf: Timeframe) -> str:
        whole_hours = float(self.clock.utc_offset_hours).is_integer()
        hourly_ok = tf.seconds >= 3600 and whole_hours
        if self.data == "auto":
            return "hour" if hourly_ok else "minute"
        if self.data == "hour" and not hourly_ok:
            raise DataError(
                f"hourly archive files cannot give {tf.name} bars in a {self.clock} clock; use data='minute'"
            )
        return self.data

    def load(
        self, symbol: str, timeframe: Timeframe | str | int, start: Any = None, end: Any = None
    ) -> pd.DataFrame:
        """Bars of ``symbol`` opening in ``[start, end)`` (UTC; naive times are UTC)."""
        symbol = str(symbol).strip().upper()
        if not symbol.isalnum():
            raise DataError(f"{symbol!r} is not a Dukascopy instrument name (letters and digits: EURUSD)")
        tf = Timeframe.parse(timeframe)
        kind = self._kind(tf)
        now = int(time.time())
        end_s = utc_seconds(end, "end")
        end_s = now if end_s is None else end_s
        start_s = utc_seconds(start, "start")
        start_s = end_s - DEFAULT_SPAN_S[kind] if start_s is None else start_s
        if start_s >= end_s:
            raise DataError(f"start {start} must come before end {end}")
        digits = self.digits if self.digits is not None else default_digits(symbol)
        # Fetch up to the close of the last bar that opens before ``end``, so that bar is complete.
        last_open = bucket_start(self.clock.to_broker_seconds(np.array([end_s - 1])), tf)
        fetch_end = min(max(end_s, int(self._closes(last_open, tf)[0])), now)
        files = [f for f in plan_files(symbol, kind, self.side, start_s, fetch_end) if f.start < now]
        base_tf = Timeframe.H1 if kind == "hour" else Timeframe.M1
        meta = CandleMeta(symbol, base_tf, digits, self.clock, source=f"dukascopy:{self.side}:{kind}")
        build = self._ticks_frame if kind == "ticks" else self._candle_frame
        asked = self.fetcher.requests
        df = build(files, now, meta)
        log.info(
            "dukascopy %s: %d files, %d HTTP requests (cache: %s)",
            symbol,
            len(files),
            self.fetcher.requests - asked,
            self.fetcher.cache_dir,
        )
        if len(df):
            df = resample(df, tf) if tf != base_tf else df
            df = self._trim(df, tf, start_s, end_s, now)
        if not len(df):
            raise NoDataError(
                f"Dukascopy has no {symbol} bars between {pd.Timestamp(start_s, unit='s')} and "
                f"{pd.Timestamp(end_s, unit='s')} UTC (market closed, or before the instrument's history)"
            )
        return df

    def load_ticks(self, symbol: str = "EURUSD", start: Any = None, end: Any = None) -> pd.DataFrame:
        """Every tick of ``symbol`` in ``[start, end)`` (UTC; without ``start``, the day before ``end``)."""
        symbol = str(symbol).strip().upper()
        if not symbol.isalnum():
            raise DataError(f"{symbol!r} is not a Dukascopy instrument name (letters and digits: EURUSD)")
        now = int(time.time())
        end_s = utc_seconds(end, "end")
        end_s = now if end_s is None else end_s
        start_s = utc_seconds(start, "start")
        start_s = end_s - DEFAULT_SPAN_S["ticks"] if start_s is None else start_s
        if start_s >= end_s:
            raise DataError(f"start {start} must come before end {end}")
        digits = self.digits if self.digits is not None else default_digits(symbol)
        files = [f for f in plan_files(symbol, "ticks", self.side, start_s, end_s) if f.start < now]
        parts = [(f.start * 1000, self._fetch(f, now, read_ticks)) for f in files]
        ms = (
            np.concatenate([t0 + r["ms"].astype(np.int64) for t0, r in parts])
            if parts
            else np.zeros(0, np.int64)
        )
        rec = np.concatenate([r for _, r in parts]) if parts else np.empty(0, dtype=TICK_RECORD)
        keep = (ms >= start_s * 1000) & (ms < end_s * 1000)
        ms, rec = ms[keep], rec[keep]
        if not len(ms):
            raise NoDataError(
                f"Dukascopy has no {symbol} ticks between {pd.Timestamp(start_s, unit='s')} and "
                f"{pd.Timestamp(end_s, unit='s')} UTC (market closed, or before the instrument's history)"
            )
        scale = float(10**digits)
        meta = TickMeta(symbol, digits, "dukascopy:ticks")
        volume = (
            rec["bid_volume"].astype(np.float64) + rec["ask_volume"].astype(np.float64)
        ) * self.volume_scale
        bid, ask = rec["bid"].astype(np.float64) / scale, rec["ask"].astype(np.float64) / scale
        return make_ticks(ms * 1_000_000, bid, ask, meta, volume=volume)

    def _fetch(self, f: ArchiveFile, now: int, read):
        """One file's records. A file of a period not yet settled is not cached, and a 404 for it means
        "not published yet" (no data), not an unknown symbol."""
        settled = f.end + SETTLE_S <= now
        try:
            return self.fetcher.get(f.path, cacheable=settled, read=read)
        except NotFoundError:
            if settled:
                raise
            log.info("%s is not published yet; no data from it", f.path)
            return read(b"", f.path)

    def _candle_frame(self, files: list[ArchiveFile], now: int, meta: CandleMeta) -> pd.DataFrame:
        parts = []
        for f in files:
            rec = self._fetch(f, now, lambda raw, origin, f=f: read_candles(raw, origin, f.end - f.start))
            if not self.keep_flats:
                rec = rec[rec["volume"] > 0]
            parts.append((f.start + rec["seconds"].astype(np.int64), rec))
        times = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
        scale = float(10**meta.digits)

        def column(name: str) -> np.ndarray:
            return np.concatenate([p[1][name] for p in parts]) if parts else np.empty(0)

        volume = column("volume").astype(np.float64)
        data = {name: column(name).astype(np.float64) / scale for name in ("open", "high", "low", "close")}
        data["real_volume"] = np.rint(volume * self.volume_scale).astype(np.uint64)
        return make_frame(data, pd.to_datetime(times, unit="s", utc=True), meta)

    def _ticks_frame(self, files: list[ArchiveFile], now: int, meta: CandleMeta) -> pd.DataFrame:
        """M1 bars of the chosen side from ticks: OHLC, tick count, lowest spread, summed volume."""
        parts = [(f.start * 1000, self._fetch(f, now, read_ticks)) for f in files]
        if parts:
            ms = np.concatenate([t0 + rec["ms"].astype(np.int64) for t0, rec in parts])
            rec = np.concatenate([r for _, r in parts])
        else:
            ms, rec = np.empty(0, np.int64), np.empty(0, dtype=TICK_RECORD)
        order = np.argsort(ms, kind="stable")
        ms, rec = ms[order], rec[order]
        side = "bid" if self.side == "BID" else "ask"
        price = rec[side].astype(np.int64)
        minute = ms // 60_000 * 60
        starts = np.flatnonzero(np.r_[True, minute[1:] != minute[:-1]]) if len(ms) else np.empty(0, np.int64)
        ends = np.r_[starts[1:], len(ms)] - 1 if len(ms) else starts
        scale = float(10**meta.digits)

        def reduce(ufunc, values):
            return ufunc.reduceat(values, starts) if len(starts) else values[:0]

        data = {
            "open": price[starts] / scale,
            "high": reduce(np.maximum, price) / scale,
            "low": reduce(np.minimum, price) / scale,
            "close": price[ends] / scale,
            "tick_volume": np.diff(np.r_[starts, len(ms)]).astype(np.uint64),
            "spread": reduce(np.minimum, rec["ask"].astype(np.int64) - rec["bid"].astype(np.int64)),
            "real_volume": np.rint(
                reduce(np.add, rec[f"{side}_volume"].astype(np.float64)) * self.volume_scale
            ).astype(np.uint64),
        }
        return make_frame(data, pd.to_datetime(minute[starts], unit="s", utc=True), meta)

    def _trim(self, df: pd.DataFrame, tf: Timeframe, start: int, end: int, now: int) -> pd.DataFrame:
        """Bars opening in ``[start, end)`` whose period is over by ``now``."""
        meta = df.attrs["candles"]
        opens = df.index.as_unit("s").asi8
        closes = self._closes(self.clock.to_broker_seconds(opens), tf)
        out = df[(opens >= start) & (opens < end) & (closes <= now)]
        out.attrs["candles"] = meta
        return out

    def _closes(self, broker_opens: np.ndarray, tf: Timeframe) -> np.ndarray:
        """UTC close times of bars opening at ``broker_opens`` (the next bar's open; months vary)."""
        if tf in (Timeframe.W1, Timeframe.MN1):
            return self.clock.to_utc_seconds(bucket_start(broker_opens + _longest_bar(tf), tf))
        return self.clock.to_utc_seconds(broker_opens + tf.seconds)
