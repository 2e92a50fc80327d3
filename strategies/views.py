"""The closed bars of every symbol and timeframe an expert advisor declares, at the EA's current time.

Each (symbol, timeframe) has its own ``BarFeed`` over that symbol's own bars (no bar is made up where it
had none). At a decision time ``now`` a bar is closed when its end, the next bar's open on the broker's
clock (MetaTrader's bar period; a month to the broker's next 1st), is at or before ``now``: a D1 bar becomes
visible at the next day's first decision, an M15 bar of an H1 run at the hour it ends. The feeds' visible
ends only move forward (``BarFeed.advance``), so every route through ``strategies.bars`` stays at the newest
closed bar, exactly as for the main chart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from datafeeds.clock import BrokerClock
from datafeeds.timeframes import Timeframe
from strategies.bars import BarFeed, Bars
from strategies.errors import EAError


def bar_ends(time: pd.DatetimeIndex, timeframe, clock: BrokerClock) -> np.ndarray:
    """UTC ns at which each bar of ``time`` (open times) on ``timeframe`` closes: the next bar's open in the
    broker's calendar (MetaTrader's bars open on the server clock), so a month or a day of a UTC+2 or DST
    clock ends at the broker's next 1st or midnight, not a UTC month or 24 hours after its UTC label."""
    opens = clock.to_broker_seconds(time.as_unit("s").asi8)
    if timeframe is Timeframe.MN1:
        month = opens.astype("datetime64[s]").astype("datetime64[M]")
        ends = (month + np.timedelta64(1, "M")).astype("datetime64[s]").astype(np.int64)
    else:
        ends = opens + timeframe.seconds
    return np.asarray(clock.to_utc_seconds(ends), dtype=np.int64) * 1_000_000_000


class DataViews:
    """The harness's feeds per (symbol, timeframe name) and where each closes (``bar_ends``)."""

    def __init__(self, feeds: Mapping[tuple[str, str], BarFeed], main: tuple[str, str]):
        self.feeds = dict(feeds)
        self.main = main
        self._ends = {
            key: bar_ends(feed.time, feed.meta.timeframe, feed.meta.clock) for key, feed in self.feeds.items()
        }
        # ``bars``'s answers by the arguments as the EA gives them (an EA asks per symbol on every bar); a
        # feed's ``bars`` is the one live view of it, so an answer never goes stale
        self._asked: dict[tuple[object, object], Bars] = {}

    def advance(self, now_ns: int) -> None:
        """Reveal every bar that has closed by ``now_ns`` (UTC ns)."""
        for key, feed in self.feeds.items():
            visible = int(np.searchsorted(self._ends[key], now_ns, side="right"))
            if visible > feed.visible:
                feed.advance(visible)

    def schedule(self, stamps: np.ndarray) -> list[list[tuple[Callable[[int], None], int]]]:
        """For each decision time of ``stamps`` (UTC ns, ascending), the feeds whose visible end moves then
        and to where (each feed's ``advance`` and its new end): computed once for a run, so a bar's step
        over every symbol and timeframe is one pass of calls. An end is the count of bars
        closed by then, as ``advance`` counts it, so a feed already moved there (a retraining's ``advance``
        at that bar) is moved to where it is, never back."""
        out: list[list[tuple[Callable[[int], None], int]]] = [[] for _ in range(len(stamps))]
        for key, feed in self.feeds.items():
            counts = np.searchsorted(self._ends[key], stamps, side="right")
            moved = np.flatnonzero(np.diff(counts, prepend=0) > 0)
            reveal = feed.advance
            for t, visible in zip(moved.tolist(), counts[moved].tolist(), strict=True):
                out[t].append((reveal, visible))
        return out

    def visible_at(self, key: tuple[str, str], now_ns: int) -> int:
        return int(np.searchsorted(self._ends[key], now_ns, side="right"))

    def bars(self, symbol: str | None, timeframe: str | None) -> Bars:
        """The EA's view of ``symbol`` on ``timeframe`` (None: the main chart's)."""
        try:
            return self._asked[symbol, timeframe]
        except (KeyError, TypeError):  # not asked yet, or arguments no name can equal
            pass
        name = self.main[0] if symbol is None else symbol
        tf = self.main[1] if timeframe is None else str(timeframe).strip().upper()
        feed = self.feeds.get((name, tf)) if isinstance(name, str) else None  # a list names nothing
        if feed is None:
            symbols = sorted({s for s, _ in self.feeds})
            frames = sorted({t for _, t in self.feeds})
            raise EAError(
                f"data({symbol!r}, {timeframe!r}): not declared; this EA reads symbols {', '.join(symbols)} "
                f"on "
                f"timeframes {', '.join(frames)} (its class attributes symbols and timeframes)"
            )
        self._asked[symbol, timeframe] = feed.bars
        return feed.bars
