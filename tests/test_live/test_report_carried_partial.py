"""Attack: ``neuronet live report`` of a position carried into the run and partly closed by hand twice
during it, with the terminal's history of it before the run gone (known from the journal's "owned" note):
each partial close is a trade of the volume it closed, with its own money; the rest, still open at the
end, is left out (carried in, never valued)."""

from __future__ import annotations

import pytest
from test_live.test_account_report import live_run, source
from test_live.test_report_carried_in import _BuysOnce

from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

SIM: dict = {}


def _close_part_by_hand(sim, volume: float) -> None:
    sim.conn.execute(
        "import MetaTrader5 as _m\n"
        "_p = _m.positions_get()[0]\n"
        "_q = _m.symbol_info_tick(_p.symbol)\n"
        f"_r = _m.order_send({{'action': 1, 'symbol': _p.symbol, 'volume': {volume}, 'type': 1, "
        "'position': _p.ticket, 'price': _q.bid, 'magic': 0, 'type_filling': 0, 'comment': 'hand'})\n"
        "assert _r.retcode == 10009, _r"
    )


class _WatchesPartialCloses(ExpertAdvisor):
    """Trades nothing; at its second bar the terminal's history is cut there and a person closes 0.3 lot
    after a 200-point fall, at its third 0.3 lot more after a further 100-point fall."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        sim = SIM["sim"]
        if self.n == 2:
            sim.state.book.configure(history_from=sim.market.now_broker())
            sim.state.book.move("EURUSD", -200)
            _close_part_by_hand(sim, 0.3)
        elif self.n == 3:
            sim.state.book.move("EURUSD", -100)
            _close_part_by_hand(sim, 0.3)


def test_a_carried_position_partly_closed_by_hand_twice_makes_two_trades_of_their_volumes(
    port, sim, tmp_path
):
    SIM["sim"] = sim
    live_run(port, sim, tmp_path / "earlier.jsonl", ea=_BuysOnce, params={}, bars=1)
    (entry,) = [d for d in sim.state.book.deals if int(d.entry) == 0]
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_WatchesPartialCloses, params={}, bars=4)
    closes = [d for d in sim.state.book.deals if int(d.entry) == 1]
    assert len(closes) == 2 and all(float(d.volume) == pytest.approx(0.3) for d in closes)
    for d in closes:  # 0.3 lot x 100,000 x (exit bid - entry ask): the terminal's own figure
        assert float(d.profit) == pytest.approx((float(d.price) - float(entry.price)) * 30_000, abs=0.01)
    got = journal_result(journal, source(port))
    assert list(got.trades["lots"]) == pytest.approx([0.3, 0.3])
    assert list(got.trades["profit"]) == pytest.approx([float(d.profit) for d in closes], abs=0.01)
    total = sum(float(d.profit) for d in closes)
    assert got.stats["total_net_profit"] == pytest.approx(total, abs=0.01)
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + total, abs=0.01)
