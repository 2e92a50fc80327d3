"""A multi-timeframe trend filter across symbols: a D1 moving average sets each symbol's direction, H1
crossings of price over its own average time the entries.

For each declared symbol: long only while the last closed D1 close is above the D1 SMA of ``daily`` bars,
short only while below; an entry when the H1 close crosses its SMA of ``hourly`` bars in that direction, and
an exit when it crosses back or the daily trend turns. The D1 bars come from ``self.data(symbol, "D1")``,
which shows a day only once it has closed, so the filter never reads the day being traded.
"""

from __future__ import annotations

import math

import numpy as np

from strategies.base import EAError, ExpertAdvisor


class TrendFilterEA(ExpertAdvisor):
    """D1 trend filter, H1 entries, on every declared symbol independently (one account)."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    timeframes = ("H1", "D1")
    daily: int = 20
    hourly: int = 24
    lots: float = 0.1

    def on_init(self) -> None:
        if not (self.daily >= 2 and self.hourly >= 2 and 0 < self.lots < math.inf):
            raise EAError(
                f"TrendFilterEA needs daily >= 2, hourly >= 2 and lots > 0, got {self.daily}, {self.hourly} "
                f"and {self.lots}"
            )

    def on_bar(self) -> None:
        for symbol in self.symbols:
            self._trade(symbol)

    def _trade(self, symbol: str) -> None:
        days, hours = self.data(symbol, "D1"), self.data(symbol, "H1")
        if len(days) < self.daily or len(hours) < self.hourly + 1:
            return
        trend = np.sign(days.close[-1] - days.close[-self.daily :].mean())
        close = hours.close[-self.hourly - 1 :]
        now, before = close[-1] - close[1:].mean(), close[-2] - close[:-1].mean()
        held = self.position_of(symbol)
        if held and (np.sign(held) != trend or np.sign(now) == -np.sign(held)):
            self.close(symbol=symbol)
            held = 0.0
        if not held and trend and np.sign(now) == trend and np.sign(before) != trend:
            (self.buy if trend > 0 else self.sell)(self.lots, symbol=symbol)
