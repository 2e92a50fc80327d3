"""Accounting cross-check: the same SMA-crossover rules here and in backtesting.py give the same trades.

backtesting.py fills market orders at the next bar's open and resolves a bar touching both SL and TP
pessimistically, as this harness does. With zero spread and the same per-lot commission, every trade
(entry/exit bar, prices, net P&L) must agree. The only convention that differs is the end of the test
(backtesting.py closes leftovers at the last open, MetaTrader at the last close), so the final forced
close is left out of the comparison.
"""

import warnings

import numpy as np
import pytest
from backtesting import Backtest as PeerBacktest
from backtesting import Strategy
from backtesting.lib import crossover
from backtesting.test import SMA

from backtests import AccountConfig, Backtest
from datafeeds.sample import read_sample
from strategies import ExpertAdvisor
from strategies.indicators import sma

DIST = 0.0030  # SL/TP distance from the last close, price units
COMMISSION = 3.5  # per lot per deal


class PeerCross(Strategy):
    stops = False

    def init(self):
        self.fast = self.I(SMA, self.data.Close, 10)
        self.slow = self.I(SMA, self.data.Close, 20)

    def next(self):
        c = self.data.Close[-1]
        if crossover(self.fast, self.slow):
            self.position.close()
            self.buy(size=100_000, **({"sl": c - DIST, "tp": c + 2 * DIST} if self.stops else {}))
        elif crossover(self.slow, self.fast):
            self.position.close()
            self.sell(size=100_000, **({"sl": c + DIST, "tp": c - 2 * DIST} if self.stops else {}))


class OurCross(ExpertAdvisor):
    stops = False

    def on_init(self):
        self.fast = self.indicator(lambda b: sma(b.close, 10), "fast")
        self.slow = self.indicator(lambda b: sma(b.close, 20), "slow")

    def on_bar(self):
        if len(self.bars) < 2:
            return
        c = self.bars.close[-1]
        f, s = self.fast, self.slow
        if f[-1] > s[-1] and f[-2] <= s[-2]:
            self.close()
            self.buy(1.0, **({"sl": c - DIST, "tp": c + 2 * DIST} if self.stops else {}))
        elif f[-1] < s[-1] and f[-2] >= s[-2]:
            self.close()
            self.sell(1.0, **({"sl": c + DIST, "tp": c - 2 * DIST} if self.stops else {}))


@pytest.mark.parametrize("stops", [False, True], ids=["signals", "with-sl-tp"])
def test_same_trades_and_pnl_as_backtesting_py(stops):
    df = read_sample()
    peer_data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    peer_data.index = peer_data.index.tz_localize(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = PeerBacktest(
            peer_data, PeerCross, cash=1e6, commission=lambda size, price: abs(size) / 100_000 * COMMISSION
        ).run(stops=stops)
    theirs = peer._trades.reset_index(drop=True)

    ours = Backtest(
        df, OurCross, forward=None, account=AccountConfig(deposit=1e6, commission=COMMISSION, spread=0)
    ).run(stops=stops)
    mine = ours.trades[ours.trades.exit_reason != "end of test"].reset_index(drop=True)
    if stops:
        assert {"sl", "tp", "signal"} <= set(mine.exit_reason)

    assert len(mine) == len(theirs) > 100
    np.testing.assert_array_equal(mine.entry_bar, theirs.EntryBar)
    np.testing.assert_array_equal(mine.exit_bar, theirs.ExitBar)
    np.testing.assert_array_equal(np.where(mine.type == "buy", 100_000, -100_000), theirs.Size)
    np.testing.assert_allclose(mine.entry_price, theirs.EntryPrice, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mine.exit_price, theirs.ExitPrice, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mine.net_profit, theirs.PnL, rtol=0, atol=1e-6)
    assert mine.net_profit.sum() == pytest.approx(theirs.PnL.sum(), abs=1e-6)
