"""A spread mean-reversion basket across three symbols: the first symbol against a hedge of the other two,
with the hedge ratios from a rolling least-squares regression of closed bars only.

The spread is the residual of ``log(first) = a + b1 * log(second) + b2 * log(third)`` fitted on the last
``window`` closed bars of the main timeframe (Engle and Granger's cointegrating regression, "Co-integration
and error correction", Econometrica 55, 1987; Gatev, Goetzmann and Rouwenhorst, "Pairs trading", Review of
Financial Studies 19, 2006, for the entry and exit bands). Its z-score is the newest residual over the
residuals' standard deviation in the window. When the z-score crosses above ``entry`` the spread is sold
(the first symbol sold, each hedge leg bought by its ratio; a negative ratio sells that leg); when it
crosses below ``-entry`` it is bought. The basket is closed when the z-score crosses back through ``exit``
towards zero, or when it moves beyond ``stop`` (the relation the regression assumed has broken). A z-score
already beyond ``stop`` opens nothing.

The hedge legs are sized to the first leg's value: ``|b| * lots * close_first / close_leg`` lots, rounded
to ``lot_step``, which is value-neutral for symbols quoted in one currency with one contract size (the
default EURUSD, GBPUSD, AUDUSD). Each fill is at the next bar's open, as every order of the harness.

Every number comes from ``self.data(symbol)``, the closed bars at the decision time; a bar where the three
symbols' newest closed bars are not of the same time (a symbol lacks bars there) trades nothing, and a
window in which their times differ is not fitted.
"""

from __future__ import annotations

import math

import numpy as np

from strategies.base import EAError, ExpertAdvisor


class BasketSpreadEA(ExpertAdvisor):
    """Mean reversion of the first symbol's log price against a regression on the other two."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")
    window: int = 120  # closed bars of the regression
    entry: float = 2.0  # z-score that opens the basket
    exit: float = 0.0  # z-score, towards zero, that closes it
    stop: float = 3.5  # z-score beyond which it is closed (and nothing opens)
    lots: float = 0.1  # of the first symbol
    lot_step: float = 0.01  # the hedge legs' lots are rounded to it

    def on_init(self) -> None:
        if len(self.symbols) != 3:
            raise EAError(f"BasketSpreadEA trades three symbols, got {len(self.symbols)}: {self.symbols}")
        if not 12 <= self.window < math.inf:
            raise EAError(f"BasketSpreadEA needs window >= 12 closed bars, got {self.window}")
        if not (0 <= self.exit < self.entry < self.stop < math.inf):
            raise EAError(
                f"BasketSpreadEA needs 0 <= exit < entry < stop, got exit={self.exit}, entry={self.entry}, "
                f"stop={self.stop}"
            )
        if not (0 < self.lots < math.inf and 0 < self.lot_step <= self.lots):
            raise EAError(
                f"BasketSpreadEA needs 0 < lot_step <= lots, got lots={self.lots}, lot_step={self.lot_step}"
            )
        self.z_before = math.nan  # the z-score at the previous decision (NaN: none)
        self.beta = np.zeros(3)  # the newest fit: intercept, then the second and third symbols' ratios

    def on_bar(self) -> None:
        z, closes = self.zscore()
        before, self.z_before = self.z_before, z
        if math.isnan(z):
            return
        side = int(np.sign(self.position_of(self.symbols[0])))
        legs_open = any(self.position_of(s) for s in self.symbols[1:])
        if side == 0 and legs_open:  # the first leg was stopped out: the hedge alone is no spread
            self._close_all()
            return
        if side:
            # sold above +entry: back once z falls to +exit; bought below -entry: once it rises to -exit
            back = z <= self.exit if side < 0 else z >= -self.exit
            if back or abs(z) >= self.stop:
                self._close_all()
            return
        if math.isnan(before) or abs(z) >= self.stop:
            return
        if before <= self.entry < z:
            self._open(-1, closes)
        elif before >= -self.entry > z:
            self._open(+1, closes)

    def zscore(self) -> tuple[float, list[np.ndarray]]:
        """The newest closed bar's spread z-score and the windows' closes (NaN where it cannot be fitted:
        too few bars, the symbols' bars not of the same times, or a degenerate regression)."""
        n = self.window
        views = [self.data(s) for s in self.symbols]
        if any(len(v) < n for v in views):
            return math.nan, []
        times = [v.time[-n:].asi8 for v in views]
        if not all(np.array_equal(times[0], t) for t in times[1:]):
            return math.nan, []
        closes = [v.close[-n:] for v in views]
        if any(not np.all(c > 0) for c in closes):
            return math.nan, []
        y = np.log(closes[0])  # (n,)
        x = np.column_stack([np.ones(n), np.log(closes[1]), np.log(closes[2])])  # (n, 3)
        beta, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
        if rank < 3:
            return math.nan, []
        resid = y - x @ beta  # (n,), mean zero with the intercept
        sd = float(np.std(resid, ddof=3))
        if not sd > 0:
            return math.nan, []
        self.beta = beta
        return float(resid[-1] / sd), closes

    def _open(self, side: int, closes: list[np.ndarray]) -> None:
        """Buy (``side`` +1) or sell the spread: the first symbol by ``side``, each leg against it."""
        first = self.symbols[0]
        if self._trade(side, self.lots, first) is None:
            return
        for k, symbol in enumerate(self.symbols[1:], start=1):
            ratio = float(self.beta[k])
            size = abs(ratio) * self.lots * closes[0][-1] / closes[k][-1]
            lots = round(round(size / self.lot_step) * self.lot_step, 8)
            if lots > 0 and self._trade(-side * int(np.sign(ratio)), lots, symbol) is None:
                self._close_all()  # a basket without a leg is not the trade the signal asked for
                return

    def _trade(self, side: int, lots: float, symbol: str) -> int | None:
        return (self.buy if side > 0 else self.sell)(lots, symbol=symbol, comment="spread")

    def _close_all(self) -> None:
        for symbol in self.symbols:
            if self.position_of(symbol):
                self.close(symbol=symbol)
