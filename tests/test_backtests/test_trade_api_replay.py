"""The trade API through a replay: a trailing stop and pending orders on the sample, and the report files."""

import pandas as pd
import pytest

from backtests import Backtest, write_report
from datafeeds import read_sample
from strategies import ExpertAdvisor


class TrailingBreakout(ExpertAdvisor):
    """The README's trailing-stop example: a buy stop above the last high (good for the day), then the stop
    trailed 200 points behind the bid."""

    trail = 200

    def on_bar(self):
        for pos in self.positions():
            sl = self.bid - self.trail * self.point
            if pos.side > 0 and (pos.sl is None or sl > pos.sl):
                self.modify(pos.ticket, sl=sl)
        if not self.positions() and not self.orders():
            self.buy_stop(0.1, max(self.bars.high[-1], self.ask) + 50 * self.point, expiration="today")


@pytest.fixture(scope="module")
def result():
    return Backtest(read_sample(spread=10).iloc[:1500], TrailingBreakout, forward=None).run()


def test_trailing_stop_and_pending_orders_in_a_replay(result):
    trades = result.trades
    assert len(trades) > 20 and set(trades.exit_reason) <= {"sl", "end of test"}
    assert {"filled", "expired"} <= set(result.orders.state)
    # Every trade exits at its final, trailed stop (or the end of the test), never below its entry by more
    # than the first trail distance plus the gap of an open.
    stopped = trades[trades.exit_reason == "sl"]
    assert (stopped.exit_price == stopped.sl).mean() > 0.9
    assert not result.rejected  # the EA only makes valid requests


def test_deals_agree_with_the_trades_and_the_balance(result):
    deals = result.deals
    assert len(deals) == 2 * len(result.trades)
    assert deals.balance.iloc[-1] == pytest.approx(result.balance[-1])
    assert deals.profit.sum() == pytest.approx(result.trades.profit.sum())
    opened = result.orders[result.orders.type == "buy_stop"]
    assert set(deals[deals.entry == "in"].order) <= set(opened.ticket)


def test_the_report_folder_has_orders_deals_and_rejections(result, tmp_path):
    write_report(result, tmp_path)
    orders = pd.read_csv(tmp_path / "orders.csv")
    deals = pd.read_csv(tmp_path / "deals.csv")
    assert len(orders) == len(result.orders) and len(deals) == len(result.deals)
    assert (tmp_path / "rejected.csv").exists()
