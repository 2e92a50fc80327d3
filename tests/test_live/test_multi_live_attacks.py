"""Attacks on a multi-symbol live account through the simulated terminal (a real RPyC server): the daily
loss limit, once the whole account has reached it, holds for every symbol until the server day ends."""

from __future__ import annotations

from test_live.multi_eas import EachOnce
from test_live.test_multi_live import _held, live_runner

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits

LIMITS = Limits(max_lots=1.0, max_positions=2, max_daily_loss=100.0, symbols=EachOnce.symbols)


def test_a_daily_loss_halt_reached_on_one_symbol_holds_for_the_others_when_the_loss_shrinks(
    port, sim, tmp_path
):
    """Three longs lose about 120 USD together: a EURUSD order is refused and the account halted. The
    prices then come back within the same bar (the loss shrinks to nothing): a GBPUSD order of the same
    server day must still be refused, as a restart on that day would refuse it; the journaled halt
    carries the account's P&L, not the one symbol's that happened to ask."""
    live_runner(port, sim, tmp_path / "first.jsonl", bars=1).run()
    assert len(_held(sim)) == 3
    for symbol in EachOnce.symbols:
        sim.state.book.move(symbol, -400)  # every 0.1-lot long loses about 40 USD
    answers = {}

    class LoseThenRecover(EachOnce):
        def on_bar(self):
            answers["EURUSD"] = self.buy(0.1, symbol="EURUSD")
            for symbol in self.symbols:
                sim.state.book.move(symbol, +400)  # the loss shrinks back within the server day
            answers["GBPUSD"] = self.buy(0.1, symbol="GBPUSD")

    LoseThenRecover.__name__ = "EachOnce"
    journal = tmp_path / "second.jsonl"
    live_runner(port, sim, journal, ea=LoseThenRecover, bars=1, per_symbol=LIMITS).run()
    notes = [r["terminal"] for r in read_journal(journal) if r.get("source") == "terminal"]
    halts = [n for n in notes if n["event"] == "halted"]
    assert len(halts) == 1 and halts[0]["day_pnl"] <= -100.0  # the account's P&L, not EURUSD's alone
    assert not answers["EURUSD"]
    assert not answers["GBPUSD"], "a new GBPUSD order was sent after the account's daily loss halt"
    assert sim.state.book.executed == 3  # nothing sent after the halt


def test_a_missing_quote_of_the_main_symbol_does_not_refuse_another_symbols_order(port, sim, tmp_path):
    """The terminal answers no EURUSD quote while a GBPUSD order is checked: GBPUSD's own quote is good,
    so the order is sent (each request checks its own quote); the account's limits count the server day
    of that quote, not of the main symbol's."""
    answers = {}
    no_eurusd = (
        "import MetaTrader5 as _m\n_market = _m.symbol_info_tick\n"
        "_m.symbol_info_tick = lambda s: None if s == 'EURUSD' else _market(s)"
    )

    class MainQuoteGone(EachOnce):
        def on_bar(self):
            sim.conn.execute(no_eurusd)
            try:
                answers["EURUSD"] = self.buy(0.1, symbol="EURUSD")
                answers["GBPUSD"] = self.buy(0.1, symbol="GBPUSD")
            finally:
                sim.conn.execute("_m.symbol_info_tick = _market")

    MainQuoteGone.__name__ = "EachOnce"
    live_runner(port, sim, tmp_path / "j.jsonl", ea=MainQuoteGone, bars=1, per_symbol=LIMITS).run()
    assert not answers["EURUSD"]  # no quote of its own: 10021
    assert answers["GBPUSD"], "GBPUSD's order was refused for EURUSD's missing quote"
    assert _held(sim) == {"GBPUSD": 0.1}
