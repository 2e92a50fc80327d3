"""Pending orders and a trailing stop against backtesting.py on the EURUSD sample (spread 0).

Both fill a stop at ``max(open, stop)`` (buy) and a limit at ``min(open, limit)``, both take SL/TP from the
next bar after a market entry, and both apply an SL moved at one bar's decision from the next bar's prices.
The EA here never gives a pending order SL/TP: the two treat SL/TP in the fill bar of a pending order
differently (backtesting.py defers them to the next bar; this broker counts the SL in that bar).

A trade server refuses a pending price or stop on the wrong side of the market at the moment the request
arrives (here: the next bar's open, after a weekend gap too); backtesting.py has no such check. So the
peer is given the next open as a column, only to skip the requests this broker would refuse, and the EA
here skips them by the same rule (and no request is refused). Where this broker lets the EA act at the
open that closed a position (MetaTrader's order of events) and backtesting.py cannot, the EA waits a bar.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from backtesting import Backtest as PeerBacktest
from backtesting import Strategy

from backtests import AccountConfig, Backtest
from datafeeds.sample import read_sample
from strategies import ExpertAdvisor

DIST = 0.0010  # pending price distance from the last close
HOLD = 6  # bars a position is held before a market close
TRAIL = 0.0020


class PeerPending(Strategy):
    """Each bar: an order for the next bar only (cancelled at the next decision if not filled)."""

    kind = "buy_stop"

    def init(self):
        pass

    def next(self):
        for order in list(self.orders):
            order.cancel()
        c, market = self.data.Close[-1], self.data.NextOpen[-1]
        for trade in list(self.trades):
            if len(self.data) - trade.entry_bar >= HOLD:  # closes at the next open, HOLD bars after entry
                trade.close()
        if self.trades:
            return
        above = self.kind in ("buy_stop", "sell_limit")
        price = c + DIST if above else c - DIST
        if not (price > market if above else price < market):
            return
        arg = {"stop": price} if "stop" in self.kind else {"limit": price}
        (self.buy if self.kind.startswith("buy") else self.sell)(size=100_000, **arg)


class OurPending(ExpertAdvisor):
    """The same with an order that expires at the next bar's open (H1 bars), before that open can fill it:
    backtesting.py's cancel at the next decision comes before the next open."""

    kind = "buy_stop"

    def on_bar(self):
        now = len(self.bars)
        for pos in self.positions():
            if now - pos.bar_open >= HOLD:
                self.close(pos.ticket)
                return  # as in backtesting.py, where the closed trade is still listed at this decision
        if self.positions() or now < 2:  # backtesting.py's first decision sees two bars
            return
        c = self.bars.close[-1]
        above = self.kind in ("buy_stop", "sell_limit")
        price = c + DIST if above else c - DIST
        if price > self.bid if above else price < self.bid:  # spread 0: bid = ask
            expiry = self.time_current + pd.Timedelta(hours=1)
            getattr(self, self.kind)(1.0, price, expiration=expiry)


class PeerTrail(Strategy):
    def init(self):
        pass

    def next(self):
        c, market = self.data.Close[-1], self.data.NextOpen[-1]
        for trade in self.trades:
            sl = max(trade.sl, c - TRAIL) if trade.is_long else min(trade.sl, c + TRAIL)
            if sl < market if trade.is_long else sl > market:
                trade.sl = sl
        if not self.trades:
            up = c > self.data.Open[-1]
            if (c - TRAIL < market) if up else (c + TRAIL > market):
                (self.buy if up else self.sell)(size=100_000, sl=c - TRAIL if up else c + TRAIL)


class OurTrail(ExpertAdvisor):
    def on_init(self):
        self.last = None  # (side, sl) of the position open at the previous decision

    def on_bar(self):
        if len(self.bars) < 2:
            return
        c, gone, self.last = self.bars.close[-1], self.last, None
        for pos in self.positions():
            sl = max(pos.sl, c - TRAIL) if pos.side > 0 else min(pos.sl, c + TRAIL)
            if sl != pos.sl and (sl < self.bid if pos.side > 0 else sl > self.bid):
                self.modify(pos.ticket, sl=sl)
            self.last = (pos.side, self.positions()[0].sl)
        if self.positions():
            return
        last = self.bars.low[-1] > gone[1] if gone and gone[0] > 0 else gone and self.bars.high[-1] < gone[1]
        if last:  # not stopped in the last bar, so by this open's gap: backtesting.py decided before it
            return
        up = c > self.bars.open[-1]
        if (c - TRAIL < self.bid) if up else (c + TRAIL > self.bid):
            (self.buy if up else self.sell)(1.0, sl=c - TRAIL if up else c + TRAIL)


def _compare(peer_cls, our_cls, **params):
    df = read_sample()
    peer_data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    peer_data.index = peer_data.index.tz_localize(None)
    peer_data["NextOpen"] = peer_data.Open.shift(-1).fillna(peer_data.Close.iloc[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = PeerBacktest(peer_data, peer_cls, cash=1e7).run(**params)
    theirs = peer._trades.reset_index(drop=True)
    ours = Backtest(df, our_cls, forward=None, account=AccountConfig(deposit=1e7, spread=0)).run(**params)
    assert not ours.rejected, ours.rejected[:3]
    mine = ours.trades[ours.trades.exit_reason != "end of test"].reset_index(drop=True)
    n = min(len(mine), len(theirs))
    assert n > 100 and abs(len(mine) - len(theirs)) <= 1  # the last trade may still be open in one of them
    np.testing.assert_array_equal(mine.entry_bar[:n], theirs.EntryBar[:n])
    np.testing.assert_array_equal(mine.exit_bar[:n], theirs.ExitBar[:n])
    np.testing.assert_allclose(mine.entry_price[:n], theirs.EntryPrice[:n], rtol=0, atol=1e-12)
    np.testing.assert_allclose(mine.exit_price[:n], theirs.ExitPrice[:n], rtol=0, atol=1e-12)
    np.testing.assert_allclose(mine.net_profit[:n], theirs.PnL[:n], rtol=0, atol=1e-6)
    return mine


@pytest.mark.parametrize("kind", ["buy_stop", "sell_stop", "buy_limit", "sell_limit"])
def test_pending_orders_fill_as_in_backtesting_py(kind):
    mine = _compare(PeerPending, OurPending, kind=kind)
    assert (mine.entry_bar > 0).all()


def test_a_trailing_stop_exits_as_in_backtesting_py():
    mine = _compare(PeerTrail, OurTrail)
    assert set(mine.exit_reason) == {"sl"}
