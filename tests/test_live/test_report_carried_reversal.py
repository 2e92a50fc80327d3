"""Attack: ``neuronet live report`` of a netting account where the run reverses a position carried into it.

The position (1 lot bought by an earlier run of the same magic) is reversed by the run with a sell of 2
lots: one "in/out" deal that closes the carried lot and opens 1 lot short on the same ticket. The report
took the carried position's volume from the exit deal (2 lots), so the "in/out" closed all of it and left
no short: the short's floating profit at the end was missing from the net profit, and the trade showed
2 lots closed where 1 was. Now the carried volume is read from its deals before the run (1 lot): the
"in/out" closes it and opens the 1-lot short, closed at the last bar's close in the report only.
"""

from __future__ import annotations

import pytest
from test_live.test_account_report import live_run, source
from test_live.test_report_carried_in import _BuysOnce

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

SIM: dict = {}


class _ReversesThenWaits(ExpertAdvisor):
    """At its second bar sells 2 lots (a reversal of the carried 1-lot buy); then the price falls 400
    points and it holds the short to the end."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        if self.n == 2:
            sim = SIM["sim"]
            if SIM.get("cut"):  # the terminal holds deals from now on only: the carried buy's is gone
                sim.state.book.configure(history_from=sim.market.now_broker())
            self.sell(2.0)
            SIM["sim"].state.book.move("EURUSD", -400)


@pytest.mark.parametrize("cut", [False, True], ids=["history held", "history cut"])
def test_a_carried_netting_position_reversed_by_the_run_keeps_its_short_in_the_report(
    port, sim, tmp_path, cut
):
    """Reversal at bid P of 1 carried lot: the "in/out" deal's profit is the carried lot's; the 1-lot
    short opened at P is still open at the end, closed in the report at the last bar's close: 2 trades,
    the first of 1 lot, and the net profit is the in/out's profit plus the short's."""
    SIM.update(sim=sim, cut=cut)
    sim.state.configure(trade={"hedging": False})
    limits = Limits(max_lots=2.0, max_positions=2, max_daily_loss=10_000.0, symbols=("EURUSD",))
    live_run(port, sim, tmp_path / "earlier.jsonl", ea=_BuysOnce, params={}, bars=1, limits=limits)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_ReversesThenWaits, params={}, bars=4, limits=limits)
    (inout,) = [d for d in sim.state.book.deals if int(d.entry) == 2]
    (short,) = sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    assert int(short.type) == 1 and float(short.volume) == pytest.approx(1.0)
    got = journal_result(journal, source(port))
    assert len(got.trades) == 2, got.trades
    assert float(got.trades.iloc[0]["lots"]) == pytest.approx(1.0)
    assert got.trades.iloc[0]["profit"] == pytest.approx(float(inout.profit), abs=0.01)
    end = got.trades.iloc[1]
    assert end["entry_price"] == pytest.approx(float(inout.price))
    assert end["type"] == "sell" and float(end["lots"]) == pytest.approx(1.0)
    # The short, 1 lot x 100,000, from the reversal's price to the ask it is closed at in the report.
    short_profit = (float(inout.price) - float(end["exit_price"])) * 100_000
    assert float(end["profit"]) == pytest.approx(short_profit, abs=0.01)
    assert short_profit > 200.0  # it gained most of the 400-point fall
    expected = float(inout.profit) + short_profit
    assert got.stats["total_net_profit"] == pytest.approx(expected, abs=0.01)
    bar = [r for r in read_journal(journal) if r["type"] == "bar"][-1]
    assert float(end["exit_price"]) == pytest.approx(bar["close"] + bar["spread"] * 1e-5)  # the last ask
