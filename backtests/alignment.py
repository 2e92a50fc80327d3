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


def align(frames: Mapping[str, pd.DataFrame]) -> Aligned:
    """``frames`` (symbol -> candle frame of one timeframe) on the union of their bar times."""
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
