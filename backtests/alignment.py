"""Several symbols' bars on one timeline, as MetaTrader's tester aligns a multi-currency test.

The account's timeline is the union of the symbols' bar open times on the main timeframe. A symbol with no
bar at a time of the timeline (another session, a holiday, a gap in its history) gets none: its last closed
bar stays its newest (MQL5 Reference, "Organizing Data Access": a symbol's series grows only by its own
bars), and its broker sees a flat bar at its last close through which nothing trades
(``Market.close_gaps``: requests there are refused as "market closed", retcode 10018). Before its first
bar the symbol is closed at its first open. ``Aligned.lacked`` counts, per symbol, the bars of the timeline
it had none of, for the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from backtests.errors import SymbolsError


class Track(NamedTuple):
    """One symbol on the timeline: its prices (flat where it has no bar), spreads and where it has none."""

    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    spread: np.ndarray
    closed: np.ndarray  # bool: the symbol has no bar of its own at this time


class Aligned(NamedTuple):
    time: pd.DatetimeIndex
    tracks: dict[str, Track]

    @property
    def lacked(self) -> dict[str, int]:
        """Per symbol, how many bars of the timeline it had none of."""
        return {name: int(track.closed.sum()) for name, track in self.tracks.items()}


def align(frames: Mapping[str, pd.DataFrame], period: pd.Timedelta | None = None) -> Aligned:
    """``frames`` (symbol -> candle frame of one timeframe) on the union of their bar times.

    ``period``: the timeframe's length where it is fixed (intraday): a symbol with no bar at a time of the
    timeline whose newest bar is still open then (bars stamped off the others' grid, 22:30 beside 23:00)
    is refused (``AlignmentError``), as its close would be a price of later than that time; MetaTrader's
    bars of one timeframe open at the same whole periods of the server clock for every symbol."""
    time = frames[next(iter(frames))].index
    for df in list(frames.values())[1:]:
        time = time.union(df.index)
    tracks = {}
    for name, df in frames.items():
        where = time.get_indexer(df.index)
        n = len(time)
        own = np.zeros(n, dtype=bool)
        own[where] = True
        # Each timeline bar reads the symbol's newest bar at or before it (its first before its first bar).
        last = np.maximum.accumulate(np.where(own, np.arange(n), -1))
        if period is not None:
            _check_closed(name, time, own, last, period, frames)
        src = np.searchsorted(where, np.maximum(last, 0))  # the symbol's row of that bar
        cols = {c: df[c].to_numpy(dtype=np.float64) for c in ("open", "high", "low", "close", "spread")}
        close = cols["close"][src]
        flat = np.where(last >= 0, close, cols["open"][src])  # before the first bar: its first open
        tracks[name] = Track(
            np.where(own, cols["open"][src], flat),
            np.where(own, cols["high"][src], flat),
            np.where(own, cols["low"][src], flat),
            np.where(own, close, flat),
            cols["spread"][src],
            ~own,
        )
    return Aligned(time, tracks)


class AlignmentError(SymbolsError):
    """A symbol's bar still open at a time of the timeline where another symbol's bar begins."""


def _check_closed(
    name: str, time: pd.DatetimeIndex, own: np.ndarray, last: np.ndarray, period, frames
) -> None:
    """Refuse ``name`` where it has no bar at a time of the timeline and its newest bar has not closed."""
    gap = ~own & (last >= 0)
    if not gap.any():
        return
    ends = time[np.maximum(last, 0)] + period
    open_now = gap & (ends > time)
    if open_now.any():
        i = int(np.argmax(open_now))
        other = next(k for k, df in frames.items() if k != name and time[i] in df.index)
        raise AlignmentError(
            f"the candles of {name}: its bar {time[last[i]]} is still open at {time[i]}, where {other}'s "
            "bar begins; every symbol's bars of one timeframe must open on the same grid of the server "
            "clock (MetaTrader's bars start at whole periods), not between the others'"
        )
