"""``neuronet live report`` of a live account counts the run's position closed by hand during the run: the
closing deal carries magic 0 (MetaTrader's number of the trades placed by hand), yet the money is the run's.

The report kept the terminal's deals by magic number alone: the position opened by the run and closed by
a person at a loss of about 400 USD had no closing deal in the report, so its loss was nowhere (a final
balance about 400 USD above the terminal's).
"""

from __future__ import annotations

import pytest
from test_live.test_account_report import live_run, source
from test_live.test_day_pnl_closed_by_hand import _close_by_hand

from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

SIM: dict = {}


class _BuyThenClosedByHand(ExpertAdvisor):
    """Buys 1 lot at its first bar; at its second the price falls 400 points and a person closes it."""

    def on_bar(self) -> None:
        self.bars_seen = getattr(self, "bars_seen", 0) + 1
        if self.bars_seen == 1:
            self.buy(1.0)
        elif self.bars_seen == 2:
            sim = SIM["sim"]
            sim.state.book.move("EURUSD", -400)
            _close_by_hand(sim, 0)


def test_the_report_counts_the_runs_position_closed_by_hand(port, sim, tmp_path):
    SIM["sim"] = sim
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyThenClosedByHand, params={}, bars=4)
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    paid = round(sum(float(d.profit) + float(d.commission) + float(d.swap) + float(d.fee) for d in deals), 2)
    assert paid < -300.0 and [int(d.magic) for d in deals if int(d.entry) == 1] == [0]
    got = journal_result(journal, source(port))
    assert len(got.trades) == 1 and got.trades["profit"].sum() == pytest.approx(paid, abs=0.01)
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + paid, abs=0.01)
    assert len(got.deals) == 2 and len(got.orders) == 2  # the person's closing deal and its order
