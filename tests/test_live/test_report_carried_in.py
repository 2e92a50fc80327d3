"""``neuronet live report`` of a live account counts a position of the run's magic number opened before the
run and closed during it (by hand here: its closing deal carries magic 0).

The report kept the deals of positions whose entry was in the run's span: a position the EA's magic held
when the run started (left by an earlier run, found on the terminal) and closed by hand during the run
had no deal in the report, so its loss of about 400 USD was nowhere (a final balance about 400 USD above
the terminal's). Now its closing deal is the run's, as MetaTrader's history report over a period shows a
closing deal's profit in it: a trade with its own entry (time and price, before the run) and its exit's
money, booked to the balance at the bar of its close; no floating profit of it over the run's bars (the
deposit, the balance at the start, does not hold it either).
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.test_account_report import live_run, source
from test_live.test_day_pnl_closed_by_hand import _close_by_hand

from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.owned import owned_in
from neuronet.live.report import journal_result
from strategies.base import ExpertAdvisor

SIM: dict = {}


class _BuysOnce(ExpertAdvisor):
    """Buys 1 lot at its first bar (the earlier run, whose position is carried into the next)."""

    def on_bar(self) -> None:
        if not getattr(self, "bought", False):
            self.bought = True
            self.buy(1.0)


class _WatchesThenClosedByHand(ExpertAdvisor):
    """Trades nothing; at its second bar the price falls 400 points and a person closes the position the
    earlier run left open (``SIM["cut"]``: the terminal then holds deals from that moment on only)."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        if self.n == 2:
            sim = SIM["sim"]
            if SIM.get("cut"):
                sim.state.book.configure(history_from=sim.market.now_broker())
            sim.state.book.move("EURUSD", -400)
            _close_by_hand(sim, 0)


def _carry_in_and_close(port, sim, tmp_path, *, cut: bool):
    SIM.update(sim=sim, cut=cut)
    live_run(port, sim, tmp_path / "earlier.jsonl", ea=_BuysOnce, params={}, bars=1)
    (entry,) = [d for d in sim.state.book.deals if int(d.entry) == 0]
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_WatchesThenClosedByHand, params={}, bars=4)
    (closing,) = [d for d in sim.state.book.deals if int(d.entry) == 1]
    assert int(closing.magic) == 0 and int(closing.position_id) == int(entry.position_id)
    return journal, entry, closing


def test_a_position_carried_into_the_run_and_closed_by_hand_is_in_the_report(port, sim, tmp_path):
    """Bought 1 lot at ask A by the earlier run; closed by hand at bid B during this one: the closing
    deal's profit (B - A) x 100,000, about -400 USD, is the report's net profit, its final balance
    10,000 + that, and its one trade shows the entry at A before the run, the exit at B."""
    journal, entry, closing = _carry_in_and_close(port, sim, tmp_path, cut=False)
    profit = round(float(closing.profit), 2)
    assert profit == pytest.approx((float(closing.price) - float(entry.price)) * 100_000, abs=0.01)
    assert profit < -300.0
    got = journal_result(journal, source(port))
    assert len(got.trades) == 1
    trade = got.trades.iloc[0]
    assert trade["profit"] == pytest.approx(profit, abs=0.01)
    assert trade["entry_price"] == pytest.approx(float(entry.price))
    assert trade["exit_price"] == pytest.approx(float(closing.price))
    assert pd.Timestamp(trade["entry_time"]) < got.time[0]  # its entry lies before the run
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + profit, abs=0.01)
    assert got.stats["total_net_profit"] == pytest.approx(profit, abs=0.01)
    assert list(got.deals["entry"]) == ["out"] and int(got.deals["magic"].iloc[0]) == 0


def test_its_entry_is_known_from_the_journal_when_the_terminal_lost_it(port, sim, tmp_path):
    """The terminal's history starts at the close by hand (the entry deal gone): the journal's "owned"
    note (the run saw the position open at its start) gives whose it was and its entry price."""
    journal, entry, closing = _carry_in_and_close(port, sim, tmp_path, cut=True)
    assert int(entry.position_id) in owned_in(read_journal(journal), journal)
    got = journal_result(journal, source(port))
    assert len(got.trades) == 1
    assert got.trades["profit"].iloc[0] == pytest.approx(float(closing.profit), abs=0.01)
    assert got.trades["entry_price"].iloc[0] == pytest.approx(float(entry.price))


def test_a_carried_close_neither_the_terminal_nor_the_journal_can_place_is_refused(port, sim, tmp_path):
    """The same, with the journal's note removed (a journal of an older neuronet): whose the position
    was cannot be told, and the report refuses by name rather than leave a loss out or take another's."""
    journal, entry, _ = _carry_in_and_close(port, sim, tmp_path, cut=True)
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(x for x in lines if '"event":"owned"' not in x))
    with pytest.raises(JournalError, match=f"position #{int(entry.position_id)}"):
        journal_result(journal, source(port))


class _PairCarried(ExpertAdvisor):
    """Buys 0.1 lots of EURUSD and of USDJPY (magic 4242) in the earlier run of several symbols."""

    symbols = ("EURUSD", "USDJPY")
    timeframes = ("H1",)
    magic: int = 4242

    def on_bar(self) -> None:
        for symbol in self.symbols:
            if not self.positions(symbol):
                self.buy(0.1, symbol=symbol)


class _PairClosedByHand(_PairCarried):
    """Trades nothing; at its second bar EURUSD falls 400 points, USDJPY 300, and a person closes both."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        if self.n == 2:
            sim = SIM["sim"]
            sim.state.book.move("EURUSD", -400)
            sim.state.book.move("USDJPY", -300)
            for _ in self.symbols:
                _close_by_hand(sim, 0)


def test_positions_of_several_symbols_carried_in_and_closed_by_hand_are_in_the_account_report(
    port, sim, tmp_path
):
    """Each symbol's carried position closed by hand is a trade of the account's report with the
    terminal's own profit in dollars (USDJPY's yen converted by the terminal, never again by the report),
    and the final balance is the start's plus both closing deals' money."""
    from test_live.test_multi_account_report import run_live

    SIM["sim"] = sim
    run_live(port, sim, tmp_path / "earlier.jsonl", ea=_PairCarried, bars=1)
    assert len(sim.state.book.positions) == 2
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, ea=_PairClosedByHand, bars=3)
    closes = [d for d in sim.state.book.deals if int(d.entry) == 1]
    assert len(closes) == 2 and {int(d.magic) for d in closes} == {0}
    money = {d.symbol: float(d.profit) + float(d.commission) + float(d.swap) + float(d.fee) for d in closes}
    got = journal_result(journal, source(port))
    by_symbol = got.trades.groupby("symbol")["net_profit"].sum().to_dict()
    assert by_symbol == pytest.approx(money, abs=0.01) and money["EURUSD"] < -30.0
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + sum(money.values()), abs=0.01)
