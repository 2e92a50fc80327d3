"""The SMA crossover written for backtesting.py, the peer of the replay and optimisation benchmarks.

At module level because backtesting.py's ``optimize`` process pool pickles the strategy class.
"""

from __future__ import annotations

from backtesting import Strategy
from backtesting.lib import crossover
from backtesting.test import SMA


class PeerSmaCross(Strategy):
    """Reverse on each crossing of the fast and slow SMA of the close, 100,000 units (one lot)."""

    fast = 10
    slow = 20

    def init(self):
        self.f = self.I(SMA, self.data.Close, self.fast)
        self.s = self.I(SMA, self.data.Close, self.slow)

    def next(self):
        if crossover(self.f, self.s):
            self.position.close()
            self.buy(size=100_000)
        elif crossover(self.s, self.f):
            self.position.close()
            self.sell(size=100_000)
