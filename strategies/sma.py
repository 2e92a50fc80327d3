"""A moving-average crossover EA: the accounting cross-check against backtesting.py and the speed benchmark.

Always in the market after the first cross: long while the fast SMA of closes is above the slow one, short
while below. Both SMAs are declared as indicators, so the harness computes them once and proves them causal.
"""

from __future__ import annotations

import math

from strategies.base import EAError, ExpertAdvisor
from strategies.indicators import sma


class SmaCrossEA(ExpertAdvisor):
    """Reverse on each crossover of two simple moving averages of the close."""

    fast: int = 10
    slow: int = 20
    lots: float = 1.0
    sl_points: float = 0.0  # 0 = no stop-loss
    tp_points: float = 0.0  # 0 = no take-profit

    def on_init(self) -> None:
        if not 0 < self.fast < self.slow:
            raise EAError(f"SmaCrossEA needs 0 < fast < slow, got fast={self.fast} slow={self.slow}")
        stops = (self.sl_points, self.tp_points)
        if not (0 < self.lots < math.inf and all(0 <= p < math.inf for p in stops)):
            raise EAError(
                f"SmaCrossEA needs lots > 0 and sl_points, tp_points >= 0 (finite), got {self.lots}, "
                f"{self.sl_points} and {self.tp_points}"
            )
        fast, slow = self.fast, self.slow
        self.fast_line = self.indicator(lambda b: sma(b.close, fast), f"sma{fast}")
        self.slow_line = self.indicator(lambda b: sma(b.close, slow), f"sma{slow}")

    def on_bar(self) -> None:
        if len(self.bars) < 2:
            return
        f, s = self.fast_line, self.slow_line
        f1, s1, f2, s2 = f[-1], s[-1], f[-2], s[-2]
        if f1 > s1 and f2 <= s2:
            self.close()
            self.buy(self.lots, sl_points=self.sl_points or None, tp_points=self.tp_points or None)
        elif f1 < s1 and f2 >= s2:
            self.close()
            self.sell(self.lots, sl_points=self.sl_points or None, tp_points=self.tp_points or None)
