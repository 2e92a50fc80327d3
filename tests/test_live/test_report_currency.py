"""``neuronet live report`` of a one-symbol live account whose symbol's profit currency is not the
account's (USDJPY on a dollar account, EURUSD on a euro account): a position the terminal still holds is
closed in the report at the last close, its profit converted into the account currency as the multi-symbol
report converts it (at the dealer's side: a gain divided at the ask, a loss at the bid) — never yen or
dollars booked as the account's money."""

from __future__ import annotations

import dataclasses

import pytest
from test_live.test_hostile_world import one_symbol_live
from test_live.test_multi_account_report import source

from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.rebuild import read_state
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

ACCOUNT_IN = (
    "import MetaTrader5 as _m\n_acc = _m.account_info\n"
    "_m.account_info = lambda: _acc()._replace(currency={!r})"
)


class HoldOne(ExpertAdvisor):
    """Buys one lot once and holds it: the report closes it at the last close."""

    magic: int = 4444

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(1.0)


def _held_to_the_end(port, sim, tmp_path, symbol: str, currency: str):
    sim.conn.execute(ACCOUNT_IN.format(currency))
    try:
        journal = tmp_path / "live.jsonl"
        one_symbol_live(port, sim, journal, ea=HoldOne, bars=3, symbol=symbol).run()
        got = journal_result(journal, source(port))
    finally:
        sim.conn.execute("_m.account_info = _acc")
    bars = read_state(str(journal), read_journal(journal)).bars
    return got, bars.iloc[-1]


def test_a_usdjpy_position_held_at_the_end_is_valued_in_dollars_not_yen(port, sim, tmp_path):
    got, last = _held_to_the_end(port, sim, tmp_path, "USDJPY", "USD")
    (trade,) = got.trades.itertuples()
    assert got.data["open_positions"] == 1 and trade.exit_price == last["close"]
    yen = (trade.exit_price - trade.entry_price) * 100_000 * 1.0
    assert yen > 0  # a gain: divided by USDJPY's ask at the last close
    ask = last["close"] + last["spread"] * 0.001
    assert trade.profit == pytest.approx(yen / ask, abs=0.005)
    assert got.stats["total_net_profit"] == pytest.approx(yen / ask, abs=0.005)


def test_a_eurusd_position_on_a_euro_account_is_valued_in_euros(port, sim, tmp_path):
    got, last = _held_to_the_end(port, sim, tmp_path, "EURUSD", "EUR")
    (trade,) = got.trades.itertuples()
    dollars = (trade.exit_price - trade.entry_price) * 100_000 * 1.0
    assert dollars < 0  # a loss: divided by EURUSD's bid at the last close
    assert trade.profit == pytest.approx(dollars / last["close"], abs=0.005)


def test_a_symbol_whose_profit_the_report_cannot_convert_is_one_line(port, sim, tmp_path):
    """GBPUSD on a euro account: its margin in pounds needs EURGBP, which a one-symbol journal lacks."""
    with pytest.raises(ValueError, match=r"GBPUSD.*EUR"):
        _held_to_the_end(port, sim, tmp_path, "GBPUSD", "EUR")


CUT_HISTORY = (
    "import MetaTrader5 as _m\n_deals = _m.history_deals_get\n"
    "_m.history_deals_get = lambda *a, **k: tuple(d for d in (_deals(*a, **k) or ()) if d.entry != 0)"
)


def test_a_terminal_whose_history_lost_the_runs_entry_deals_is_refused_not_reported_without_them(
    port, sim, tmp_path
):
    """The run bought and closed at its stop; the terminal's deal history no longer holds the entry deal
    (a history cut short). The report must not leave the trade's money out as if its position had been
    opened before the run: it is refused, naming the deal the journal says the run made."""
    journal = tmp_path / "live.jsonl"
    run = one_symbol_live(port, sim, journal, ea=HoldOne, bars=3)
    run.s = dataclasses.replace(run.s, close_on_exit=True)
    run.run()
    entry = next(d for d in sim.state.book.deals if d.entry == 0)
    sim.conn.execute(CUT_HISTORY)
    try:
        with pytest.raises(JournalError, match=f"#{entry.ticket}"):
            journal_result(journal, source(port))
    finally:
        sim.conn.execute("_m.history_deals_get = _deals")
