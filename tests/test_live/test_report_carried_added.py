"""Attack: ``neuronet live report`` of a netting account where the run adds to a position carried into it.

The position (1 lot bought by an earlier run of the same magic) gets 1 more lot from the run (an "in"
deal on the same ticket, as a netting position keeps its identifier), then the run closes both (one
"out" deal of 2 lots, its profit from the netting average of the two entries). The report took the
position for one the run opened (its "in" deal is in the span): its trades table showed the added lot
only, with the whole deal's profit, and the carried lot was no trade. Now the carried lot is a trade from
its own entry before the run and the added lot the run's own trade, the exit split between them.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.test_account_report import live_run, source
from test_live.test_multi_account_report import run_live
from test_live.test_report_carried_in import _BuysOnce, _PairCarried
from test_live.test_terminal_ledger import BUY, IN, OUT, SELL, T0, bars, deal

from backtests import AccountConfig
from datafeeds.clock import UTC
from neuronet.live.carried import Carried, carried_positions
from neuronet.live.errors import JournalError
from neuronet.live.limits import Limits
from neuronet.live.owned import Owned
from neuronet.live.report import journal_result
from neuronet.live.terminal_ledger import TerminalLedger
from strategies.base import ExpertAdvisor

SIM: dict = {}
LO = int(T0.value // 10**9) + 3600  # the run's span opens at bar 1 (UTC broker clock)
LIMITS = Limits(max_lots=2.0, max_positions=2, max_daily_loss=10_000.0, symbols=("EURUSD",))


class _AddsThenCloses(ExpertAdvisor):
    """At its second bar, after a 200-point rise, buys 1 lot more (``SIM["cut"]``: the terminal then holds
    deals from that moment on only, the carried buy's gone); at its third, after a further 300-point rise,
    sells the 2 lots (``SIM["close"]`` lots: 1 closes half)."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        sim = SIM["sim"]
        if self.n == 2:
            if SIM.get("cut"):
                sim.state.book.configure(history_from=sim.market.now_broker())
            sim.state.book.move("EURUSD", 200)
            self.buy(1.0)
        elif self.n == 3:
            sim.state.book.move("EURUSD", 300)
            self.sell(SIM.get("close", 2.0))


def _carry_add_close(port, sim, tmp_path, *, cut: bool, close: float = 2.0):
    SIM.update(sim=sim, cut=cut, close=close)
    sim.state.configure(trade={"hedging": False})
    live_run(port, sim, tmp_path / "earlier.jsonl", ea=_BuysOnce, params={}, bars=1, limits=LIMITS)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_AddsThenCloses, params={}, bars=4, limits=LIMITS)
    entry, added, out = sorted(sim.state.book.deals, key=lambda d: int(d.ticket))
    assert (int(entry.entry), int(added.entry), int(out.entry)) == (0, 0, 1)
    assert int(added.position_id) == int(out.position_id) == int(entry.position_id)
    return journal, entry, added, out


@pytest.mark.parametrize("cut", [False, True], ids=["history held", "history cut"])
def test_a_carried_netting_position_added_to_and_closed_by_the_run_shows_both_lots_as_trades(
    port, sim, tmp_path, cut
):
    """Carried 1 lot bought at ask A before the run; the run buys 1 lot at ask A2 (about 200 points
    higher) and sells 2 lots at bid B (about 300 points higher still). The terminal's profit is
    (B - (A + A2) / 2) x 2 x 100,000; the report's trades: the carried lot, entered at A before the run,
    (B - A) x 100,000 (+367 here), then the run's lot, entered at A2 at its bar, (B - A2) x 100,000
    (smaller by the rise between the entries): together the deal's profit, which is the net profit."""
    journal, entry, added, out = _carry_add_close(port, sim, tmp_path, cut=cut)
    a, a2, b = float(entry.price), float(added.price), float(out.price)
    assert float(out.volume) == pytest.approx(2.0)
    assert float(out.profit) == pytest.approx((b - (a + a2) / 2) * 200_000, abs=0.01)
    got = journal_result(journal, source(port))
    assert len(got.trades) == 2, got.trades
    carried, run = got.trades.iloc[0], got.trades.iloc[1]
    assert list(got.trades["lots"]) == pytest.approx([1.0, 1.0])
    assert carried["entry_price"] == pytest.approx(a) and run["entry_price"] == pytest.approx(a2)
    assert carried["exit_price"] == pytest.approx(b) and run["exit_price"] == pytest.approx(b)
    assert pd.Timestamp(carried["entry_time"]) < got.time[0]  # before the run, as a carried-in trade
    assert got.time[0] <= pd.Timestamp(run["entry_time"])
    assert carried["profit"] == pytest.approx((b - a) * 100_000, abs=0.01)
    assert run["profit"] == pytest.approx((b - a2) * 100_000, abs=0.01)
    assert carried["profit"] > 300.0 and 100.0 < run["profit"] < carried["profit"]
    assert carried["profit"] + run["profit"] == pytest.approx(float(out.profit), abs=1e-6)
    assert got.stats["total_net_profit"] == pytest.approx(float(out.profit), abs=0.01)
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + float(out.profit), abs=0.01)
    assert list(got.deals["entry"]) == ["in", "out"]  # the carried lot's entry deal is not the run's


def test_a_partial_close_of_it_takes_from_both_lots_as_the_netting_average_does(port, sim, tmp_path):
    """The run sells 1 of the 2 lots at bid B: the terminal charges it from the average,
    (B - (A + A2) / 2) x 100,000; the report closes half a lot of each entry, (B - A) x 50,000 and
    (B - A2) x 50,000, whose sum is that; the other lot (half carried, half the run's) stays open: the
    run's half is valued at the last close, the carried half left out."""
    journal, entry, added, out = _carry_add_close(port, sim, tmp_path, cut=False, close=1.0)
    a, a2, b = float(entry.price), float(added.price), float(out.price)
    assert float(out.profit) == pytest.approx((b - (a + a2) / 2) * 100_000, abs=0.01)
    got = journal_result(journal, source(port))
    closed = got.trades[got.trades["exit_time"] == got.trades["exit_time"].iloc[0]]
    assert list(closed["lots"]) == pytest.approx([0.5, 0.5])
    assert list(closed["entry_price"]) == pytest.approx([a, a2])
    assert list(closed["profit"]) == pytest.approx([(b - a) * 50_000, (b - a2) * 50_000], abs=0.01)
    assert closed["profit"].sum() == pytest.approx(float(out.profit), abs=1e-6)
    (end,) = [t for _, t in got.trades.iterrows() if t["exit_time"] != closed["exit_time"].iloc[0]]
    assert float(end["lots"]) == pytest.approx(0.5) and end["entry_price"] == pytest.approx(a2)
    assert got.stats["total_net_profit"] == pytest.approx(float(out.profit) + end["profit"], abs=0.01)


def test_the_split_carries_the_terminals_commission_and_swap_by_volume():
    """On the ledger alone, by hand: carried 1 lot bought at 1.1000 before the run; the run buys 1 lot at
    1.1020 (commission -3) and sells 2 at 1.1050 (commission -6, swap -2, profit (1.1050 - 1.1010) x 2 x
    100,000 = 800). The carried trade: profit 500, commission -3 (its exit's half; its entry's was paid
    before the run), swap -1, net 496; the run's: profit 300, commission -6 (its entry's -3 and half the
    exit's), swap -1, net 293; the balance 10,000 - 3 + 800 - 6 - 2 = 10,789."""
    led = ledger_of_carried()
    trades = led.ledger.trades
    got = [x for t in trades for x in (t.lots, t.entry_price, t.profit, t.commission, t.swap)]
    assert got == pytest.approx([1.0, 1.1000, 500.0, -3.0, -1.0, 1.0, 1.1020, 300.0, -6.0, -1.0])
    assert [t.net_profit for t in trades] == pytest.approx([496.0, 293.0])
    assert trades[0].entry_bar == 1 and trades[1].entry_bar == 2  # the carried one's: the run's first bar
    assert led.broker.balance == pytest.approx(10_789.0)


def test_an_added_to_position_that_nothing_places_before_the_run_is_refused_by_name():
    """The run's "in" deal (order #520) adds to position #9, whose opening order is not in the span: it
    opened before the run. With neither its deals before the run nor an "owned" note, whose it is and
    the lots it held cannot be told: refused, never taken for a position the run opened."""
    rows = [deal(20, 2, BUY, IN, 9, 1.0, 1.1020), deal(21, 4, SELL, OUT, 9, 2.0, 1.1050)]
    with pytest.raises(JournalError, match=r"position #9 .*opened before the run"):
        carried_positions(lambda pid: (), {7}, rows, {}, LO, "j.jsonl", lambda pid: 0.0)


def test_an_added_to_position_whose_lots_at_the_start_cannot_be_told_is_refused_by_name():
    """Known from the journal's note, but its lots at the start unknown (its volume on the terminal now
    cannot be read): the close cannot be split between the carried lots and the run's."""
    rows = [deal(20, 2, BUY, IN, 9, 1.0, 1.1020), deal(21, 4, SELL, OUT, 9, 2.0, 1.1050)]
    owned = {9: Owned(9, 7, +1, LO - 3600, 1.1000, "EURUSD")}
    with pytest.raises(JournalError, match="position #9 opened before the run and was added to"):
        carried_positions(lambda pid: rows, {7}, rows, owned, LO, "j.jsonl", lambda pid: None)
    got = carried_positions(lambda pid: rows, {7}, rows, owned, LO, "j.jsonl", lambda pid: 0.0)
    assert got[9].volume == pytest.approx(1.0)  # 0 now, less the +1 and -2 since: 1 lot at the start


def test_a_position_opened_in_the_span_by_its_own_order_is_not_carried():
    """An "in" deal whose order is the position's identifier opened it (MetaTrader numbers a position
    with its opening order's ticket): it is the run's own, not carried."""
    opening = deal(20, 2, BUY, IN, 9, 1.0, 1.1020)._replace(order=9)
    assert carried_positions(lambda pid: (), {7}, [opening], {}, LO, "j.jsonl") == {}


def ledger_of_carried() -> TerminalLedger:
    """The ledger of the hand-worked case above (magic 7, position #9, the run's first bar 1)."""
    led = TerminalLedger.over(bars(), 1e-5, AccountConfig(), UTC)
    led.carry({9: Carried(+1, 1.1000, LO - 5 * 3600, None, 7, "", 1.0)})
    added = deal(20, 2, BUY, IN, 9, 1.0, 1.1020, commission=-3.0)
    out = deal(21, 4, SELL, OUT, 9, 2.0, 1.1050, commission=-6.0, swap=-2.0, profit=800.0)
    led.book([added, out], [], 1)
    return led


class _PairAddsThenCloses(_PairCarried):
    """At its second bar EURUSD rises 200 points, USDJPY 150, and it buys 0.1 lots more of each; at its
    third EURUSD rises 300 more, USDJPY 200, and it sells 0.2 lots of each."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        book = SIM["sim"].state.book
        if self.n in (2, 3):
            book.move("EURUSD", 200 if self.n == 2 else 300)
            book.move("USDJPY", 150 if self.n == 2 else 200)
            for symbol in self.symbols:
                (self.buy if self.n == 2 else self.sell)(0.1 if self.n == 2 else 0.2, symbol=symbol)


def test_the_several_symbol_report_splits_each_symbols_carried_and_added_lots(port, sim, tmp_path):
    """Per symbol, carried 0.1 lot at ask A, added 0.1 at A2, closed 0.2 at bid B: the carried trade's
    profit is (B - A) x 10,000 in the profit currency and the run's (B - A2) x 10,000, each at the
    terminal's conversion of the deal (USDJPY's yen into dollars: the deal's dollars over its yen,
    (B - (A + A2) / 2) x 20,000); the two sum to the deal's money, and the final balance is the start's
    plus both deals'."""
    SIM["sim"] = sim
    sim.state.configure(trade={"hedging": False})
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=10_000.0, symbols=_PairCarried.symbols)
    run_live(port, sim, tmp_path / "earlier.jsonl", ea=_PairCarried, bars=1, per_symbol=limits)
    journal = tmp_path / "live.jsonl"
    run_live(port, sim, journal, ea=_PairAddsThenCloses, bars=4, per_symbol=limits)
    got = journal_result(journal, source(port))
    total = 0.0
    for symbol in _PairCarried.symbols:
        entry, added, out = sorted(
            (d for d in sim.state.book.deals if d.symbol == symbol), key=lambda d: int(d.ticket)
        )
        assert (int(entry.entry), int(added.entry), int(out.entry), float(out.volume)) == (0, 0, 1, 0.2)
        a, a2, b = float(entry.price), float(added.price), float(out.price)
        rate = float(out.profit) / ((b - (a + a2) / 2) * 20_000)  # 1 on EURUSD
        trades = got.trades[got.trades["symbol"] == symbol]
        assert list(trades["lots"]) == pytest.approx([0.1, 0.1])
        assert list(trades["entry_price"]) == pytest.approx([a, a2])
        assert pd.Timestamp(trades["entry_time"].iloc[0]) < got.time[0]
        assert trades["profit"].iloc[0] == pytest.approx(round((b - a) * 10_000 * rate, 2), abs=1e-9)
        assert trades["profit"].iloc[1] == pytest.approx((b - a2) * 10_000 * rate, abs=0.01)
        assert trades["profit"].sum() == pytest.approx(float(out.profit), abs=1e-6)
        assert trades["profit"].iloc[0] > trades["profit"].iloc[1] > 0
        total += float(out.profit)
    assert got.stats["final_balance"] == pytest.approx(10_000.0 + total, abs=0.01)


class _AddedByHandThenCloses(ExpertAdvisor):
    """At its second bar a person buys 1 lot (magic 0) after a 200-point rise, adding to the carried
    position; at its third, after a further 300-point rise, the EA sells the 2 lots."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        sim = SIM["sim"]
        if self.n == 2:
            sim.state.book.move("EURUSD", 200)
            sim.conn.execute(
                "import MetaTrader5 as _m\n"
                "_q = _m.symbol_info_tick('EURUSD')\n"
                "_r = _m.order_send({'action': 1, 'symbol': 'EURUSD', 'volume': 1.0, 'type': 0, "
                "'price': _q.ask, 'magic': 0, 'type_filling': 0, 'comment': 'hand'})\n"
                "assert _r.retcode == 10009, _r"
            )
        elif self.n == 3:
            sim.state.book.move("EURUSD", 300)
            self.sell(2.0)


def test_lots_added_by_hand_to_a_carried_position_are_the_runs_under_its_number(port, sim, tmp_path):
    """The add carries magic 0, but the netting position keeps the run's number (its opening order's):
    the added lot is the run's trade under that number, its money the run's, as a close by hand is."""
    SIM["sim"] = sim
    sim.state.configure(trade={"hedging": False})
    live_run(port, sim, tmp_path / "earlier.jsonl", ea=_BuysOnce, params={}, bars=1, limits=LIMITS)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_AddedByHandThenCloses, params={}, bars=4, limits=LIMITS)
    entry, added, out = sorted(sim.state.book.deals, key=lambda d: int(d.ticket))
    assert int(added.magic) == 0 and int(added.entry) == 0 and float(out.volume) == pytest.approx(2.0)
    got = journal_result(journal, source(port))
    assert list(got.trades["entry_price"]) == pytest.approx([float(entry.price), float(added.price)])
    assert set(got.trades["magic"]) == {int(entry.magic)}
    assert got.trades["profit"].sum() == pytest.approx(float(out.profit), abs=1e-6)
    assert got.stats["total_net_profit"] == pytest.approx(float(out.profit), abs=0.01)
