"""A read-through cache in front of remote candle sources: history pulled once is served from disk, and only
the part not pulled yet is asked for.

Key: (source, feed, symbol, timeframe, broker clock) names one file of the local store (``datafeeds.store``):
``<cache>/candles/mt5/<feed>/EURUSD/H1@UTC+2-us.npz``. The feed says where the bars come from without asking
the source: for the terminal, its ``server`` option (the broker's trade server) or else the address of the
terminal. Bars are kept in UTC with the clock recorded, and a different declared clock is another entry,
since it changes which UTC times the terminal's bars get. The trade server the terminal reports on each
fetch is recorded too; when a later fetch reports another one (the terminal was logged into another
broker), the entry is started over, so two brokers' bars are never mixed in one series.

Coverage: the file's header lists the UTC intervals ``[lo, hi)`` that were fetched in full, so a window
inside them (weekends and holidays included) is served with no call to the source at all. For another
window only ``window - coverage`` is fetched — usually the bars after the last fetch, and those before the
first when the window starts earlier — then the stored and new bars are merged, the whole series is
validated and the file replaced atomically. An interval ends at the open of the bar still forming at fetch
time, so a bar whose period is not over is never stored; the next load asks for it again. Without ``end``
the window reaches the present, so such a load always asks the source for the bars since its last fetch.

Modes (``load_candles(..., cache=...)``): ``True`` reads through; ``False`` bypasses the store (neither read
nor written); ``"refresh"`` fetches the whole window again and replaces the stored bars in it, keeping the
rest of the entry. Refresh after a terminal has downloaded deeper history, or to repair an entry by hand.

A stored file that cannot be read (truncated, edited, torn by something other than our atomic writer), or
that reads but whose bars fail validation (only valid series are written), is reported as a warning naming
the file and the problem, deleted and fetched again: the source is the truth and the store only a copy.
Fetched bars that fail validation are returned (so the caller's validation or repair policy decides) but
not stored. An answer without bars is never recorded as coverage, nor is the part of an answer after a
page the terminal answered "not found" (it says so while it still downloads history): the next load asks
again. Two processes filling one entry at the same time each replace the
file with a whole, valid one; the last wins, and bars only the other had fetched are fetched again later.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from datafeeds.candles import meta_of
from datafeeds.clock import BrokerClock, utc_seconds
from datafeeds.errors import CandleDataError, DataError
from datafeeds.store import CandleStore, read_npz_entry, write_npz
from datafeeds.terminal import Fetched
from datafeeds.terminal_errors import NoBarsError
from datafeeds.timeframes import Timeframe
from datafeeds.validate import validate

log = logging.getLogger(__name__)

_FAR = 2**62  # "no bound" in UTC seconds; a start of None is written as null in the header
Interval = tuple[int, int]


@runtime_checkable
class CachedFeed(Protocol):
    """A source the cache can sit in front of (``datafeeds.terminal.TerminalSource``)."""

    name: str
    clock: BrokerClock
    trade_server: str | None  # where the last fetch's bars came from, as the source reported it

    def cache_feed(self) -> str:
        """Where the bars come from, known without asking the source (a part of the cache key)."""
        ...

    def fetch(self, symbol: str, timeframe, start=None, end=None) -> Fetched:
        """Final bars opening in ``[start, end)`` (maybe none), the UTC time before which all are final and
        the UTC time up to which the answer is known complete."""
        ...


def parse_mode(cache: bool | str) -> bool | str:
    """``True``, ``False`` or ``"refresh"``; anything else is a clear error."""
    if isinstance(cache, bool):
        return cache
    if isinstance(cache, str) and cache.strip().lower() == "refresh":
        return "refresh"
    raise DataError(f"cache must be True, False or 'refresh', not {cache!r}")


def load_through(
    src: CachedFeed,
    symbol: str,
    timeframe: Timeframe | str | int,
    start: pd.Timestamp | None = None,
    end: pd.Timestamp | None = None,
    *,
    refresh: bool = False,
    store: CandleStore | None = None,
) -> pd.DataFrame:
    """Bars of ``symbol`` opening in ``[start, end)`` (UTC Timestamps or None): stored ones from disk, the
    rest from ``src``; the store is updated with what was fetched. See the module docstring."""
    store = store or CandleStore()
    tf = Timeframe.parse(timeframe)
    feed = src.cache_feed()
    path = store.path(src.name, symbol, tf, feed=feed, clock=src.clock)
    window = (-_FAR if start is None else utc_seconds(start), _FAR if end is None else utc_seconds(end))
    stored, header = _read(path)
    covered = _coverage(header) if stored is not None else []
    missing = [window] if refresh else _subtract(window, covered)
    if not missing:
        log.info("%s: %s %s served from the cache (%s)", src.name, symbol, tf.name, path)
        return _nonempty(_window(stored, window), src, feed, symbol, tf, start, end)

    fetched = _fetch(src, symbol, tf, missing)
    recorded = header.get("server") if stored is not None else None
    if recorded and src.trade_server and recorded != src.trade_server:
        log.warning(
            "%s: the terminal now reports trade server %r, the stored bars came from %r; starting it over",
            path,
            src.trade_server,
            recorded,
        )
        stored, covered, missing = None, [], [window]
        fetched = _fetch(src, symbol, tf, missing)

    new_coverage = [iv for df, iv in fetched if iv[0] < iv[1] and len(df)]  # never an empty answer
    parts = [df for df, _ in fetched if len(df)]
    meta = meta_of(fetched[-1][0])
    if stored is not None:
        parts.insert(0, stored[~_inside(stored, missing)])
    merged = pd.concat(parts).sort_index() if parts else fetched[-1][0]
    merged.attrs["candles"] = meta
    coverage = _union(covered + new_coverage)
    n_new = sum(len(df) for df, _ in fetched)
    log.info("%s: %s %s, %d bars fetched in %d part(s)", src.name, symbol, tf.name, n_new, len(missing))
    if n_new or coverage != covered or refresh:
        _write(path, merged, coverage, src, feed)
    return _nonempty(_window(merged, window), src, feed, symbol, tf, start, end)


def _nonempty(df: pd.DataFrame, src: CachedFeed, feed: str, symbol: str, tf: Timeframe, start, end):
    """``df``, or the error the source itself gives for a window without bars."""
    if not len(df):
        raise NoBarsError(
            f"{src.name} ({feed}) has no {symbol} {tf.name} bars between "
            f"{start or 'the start of its history'} and {end or 'now'} (UTC)"
        )
    return df


def _fetch(src: CachedFeed, symbol: str, tf: Timeframe, missing: list[Interval]):
    """Each missing interval's bars and the part of it now known in full (it ends where bars stop being
    final, or earlier where the source's answer is not known complete)."""
    out = []
    for lo, hi in missing:
        df, final_until, complete_until = src.fetch(symbol, tf, _stamp(lo), _stamp(hi))
        meta, final = meta_of(df), utc_seconds(final_until)
        df = df[df.index.as_unit("s").asi8 < final]  # never keep a bar still forming, whatever the source did
        df.attrs["candles"] = meta
        out.append((df, (lo, min(hi, final, utc_seconds(complete_until)))))
    return out


def _write(path: Path, df: pd.DataFrame, coverage: list[Interval], src: CachedFeed, feed: str) -> None:
    try:
        validate(df, str(path))
    except CandleDataError as exc:
        log.warning("not caching %s: %s", path, exc)
        return
    extra = {
        "source": src.name,
        "feed": feed,
        "server": src.trade_server,
        "coverage": [[None if lo <= -_FAR else lo, hi] for lo, hi in coverage],
    }
    write_npz(path, df, extra)


def _read(path: Path) -> tuple[pd.DataFrame | None, dict]:
    """The stored entry; a file that cannot be read, or whose bars fail validation (only valid series are
    written, so it was damaged since), is reported, deleted and treated as absent."""
    if not path.is_file():
        return None, {}
    try:
        df, header = read_npz_entry(path)
        _coverage(header)
        validate(df, str(path))
    except (CandleDataError, ValueError, TypeError) as exc:
        log.warning("%s; deleting it and fetching the bars again", exc)
        path.unlink(missing_ok=True)
        return None, {}
    return df, header


def _coverage(header: dict) -> list[Interval]:
    raw = header.get("coverage")
    if not isinstance(raw, list):
        raise DataError("its header has no coverage list")
    try:
        return [(-_FAR if lo is None else int(lo), int(hi)) for lo, hi in raw]
    except (TypeError, ValueError):
        raise DataError(f"its coverage {raw!r} is not a list of [start, end] seconds") from None


def _subtract(window: Interval, covered: list[Interval]) -> list[Interval]:
    """Parts of ``window`` outside the sorted, disjoint ``covered`` intervals."""
    out, lo = [], window[0]
    for a, b in covered:
        if b <= lo or a >= window[1]:
            continue
        if a > lo:
            out.append((lo, a))
        lo = max(lo, b)
    if lo < window[1]:
        out.append((lo, window[1]))
    return out


def _union(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(iv for iv in intervals if iv[0] < iv[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _inside(df: pd.DataFrame, intervals: list[Interval]) -> np.ndarray:
    t = df.index.as_unit("s").asi8
    mask = np.zeros(len(t), dtype=bool)
    for lo, hi in intervals:
        mask |= (t >= lo) & (t < hi)
    return mask


def _window(df: pd.DataFrame, window: Interval) -> pd.DataFrame:
    t = df.index.as_unit("s").asi8
    out = df[(t >= window[0]) & (t < window[1])]
    out.attrs["candles"] = meta_of(df)
    return out


def _stamp(seconds: int) -> pd.Timestamp | None:
    return None if abs(seconds) >= _FAR else pd.Timestamp(seconds, unit="s", tz="UTC")
