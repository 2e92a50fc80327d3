"""The closed bars of every symbol and timeframe a live EA declares, growing as the terminal closes bars.

``strategies.views.DataViews`` as the backtest uses it (a bar visible only once it closed on the broker's
clock, the visible ends only moving forward), over feeds that ``append`` extends: each feed's bar ends are
recomputed from its bars, so a bar appended early (a D1 bar the terminal already gave) still shows only
after its close.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from datafeeds.candles import meta_of
from strategies.bars import BarFeed, Bars
from strategies.views import DataViews, bar_ends


class LiveViews(DataViews):
    """Feeds per (symbol, timeframe) from the terminal's history; ``main_feed`` is the main chart's own."""

    def __init__(
        self, frames: Mapping[tuple[str, str], pd.DataFrame], main: tuple[str, str], main_feed: BarFeed
    ):
        feeds = {
            key: main_feed if key == main else BarFeed.from_frame(df, meta_of(df))
            for key, df in frames.items()
        }
        super().__init__(feeds, main)

    def append(self, key: tuple[str, str], bars: pd.DataFrame) -> None:
        """Closed bars of ``key`` after its last one (hidden until the next ``advance`` reaches them)."""
        feed = self.feeds[key]
        index = bars.index.as_unit(feed.time.unit)
        feed.extend({c: bars[c].to_numpy(dtype=np.float64) for c in Bars.COLUMNS}, index)
        self._ends[key] = bar_ends(feed.time, feed.meta.timeframe, feed.meta.clock)
