"""Candles whose bars are exchangeable (i.i.d. returns) or carry a planted edge, and small EAs: one that
trades at random, one that learns the sign of the returns' autocorrelation on its study window."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, make_frame
from datafeeds.timeframes import Timeframe
from strategies import ExpertAdvisor


def candles(n: int, seed: int, phi: float = 0.0, vol: float = 0.002) -> pd.DataFrame:
    """H1 bars from an AR(1) of log returns (``phi = 0``: i.i.d.), each bar opening at the previous close,
    its high and low a random excursion beyond the body; prices on the 5-digit grid."""
    rng = np.random.default_rng(seed)
    shocks = rng.normal(0.0, vol, n)
    r = np.empty(n)
    r[0] = shocks[0]
    for i in range(1, n):
        r[i] = phi * r[i - 1] + shocks[i]
    close = 1.1 * np.exp(np.cumsum(r))
    opens = np.concatenate(([1.1], close[:-1]))
    high = np.maximum(opens, close) * np.exp(np.abs(rng.normal(0, vol / 3, n)))
    low = np.minimum(opens, close) * np.exp(-np.abs(rng.normal(0, vol / 3, n)))
    grid = {k: np.round(v * 1e5) / 1e5 for k, v in dict(open=opens, high=high, low=low, close=close).items()}
    index = pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC")
    meta = CandleMeta("EURUSD", Timeframe.parse("H1"), 5, source="test")
    return make_frame({**grid, "spread": np.full(n, 5)}, index, meta)


class RandomEA(ExpertAdvisor):
    """Long or short at random on every bar (seeded), whatever the prices: no edge by construction."""

    seed: int = 0
    lots: float = 0.1

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        want = 1 if self.rng.random() < 0.5 else -1
        if want * self.position > 0:
            return
        self.close()
        (self.buy if want > 0 else self.sell)(self.lots)


class LearnerEA(ExpertAdvisor):
    """Learns on its study window whether returns follow through (positive lag-1 autocorrelation) or
    revert, then trades that way on every bar. ``learned`` records each training's estimate."""

    lots: float = 0.1
    learned: list = []  # noqa: RUF012 - a class-level record of every training (inline engine)

    def on_study(self, bars) -> None:
        r = np.diff(np.log(bars.close))
        self.sign = 1.0 if np.corrcoef(r[1:], r[:-1])[0, 1] > 0 else -1.0
        type(self).learned.append(float(np.corrcoef(r[1:], r[:-1])[0, 1]))

    def on_bar(self) -> None:
        c = self.bars.close
        if len(c) < 2:
            return
        want = self.sign * np.sign(c[-1] - c[-2])
        if want == 0 or want * self.position > 0:
            return
        self.close()
        (self.buy if want > 0 else self.sell)(self.lots)
