"""Today's P&L of a position of the run closed by hand, when the terminal no longer holds its opening deal.

The owner of a position closed by hand (its closing deal carries magic 0) was read from its opening deal
only. A terminal whose History tab starts after that deal (or that lost it) answered without it: the day's
P&L was unknown and every new order was refused (10027) for the rest of the server day. Now the run
journals each of its positions the first time it sees it open ("owned" notes: ticket, magic, side, opening
time): its owner and opening are known without the terminal's history, on a resumed run too, and the day
counts what its closed volume made since the day's start. Unknown only where neither knows; an unknown
loss is still never counted as 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_live.live_support import MAGIC
from test_live.test_account_report import live_run, source
from test_live.test_day_pnl_closed_by_hand import _close_by_hand

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.owned import owned_in
from neuronet.live.terminal_trade import TerminalTrade
from strategies.base import ExpertAdvisor

LOSS_100 = Limits(max_lots=1.0, max_positions=1, max_daily_loss=100.0, symbols=("EURUSD",))
EVENING = "2024-03-07 22:00"  # broker time: the run buys at 22:00, the server day ends at 00:00
MIDNIGHT = 19_790 * 86400  # 2024-03-08 00:00 broker time, in broker seconds
SIM: dict = {}


def _cut_history_and_close(sim, points: float) -> None:
    """The terminal now holds deals from midnight on only; the price moves ``points``; a person closes the
    run's position."""
    sim.state.book.configure(history_from=MIDNIGHT)
    sim.state.book.move("EURUSD", points)
    _close_by_hand(sim, 0)


class _CarriedThenClosedByHand(ExpertAdvisor):
    """Buys 1 lot at 22:00; at the 00:00 bar's decision (the next server day) the terminal's history is
    cut at midnight, the price falls 40 points and a person closes the position; at 01:00 it buys again."""

    def on_bar(self) -> None:
        self.n = getattr(self, "n", 0) + 1
        if self.n == 1:
            self.buy(1.0)
        elif self.n == 3:
            _cut_history_and_close(SIM["sim"], -40)
        elif self.n == 4:
            self.buy(1.0)


def _day_open_bid(sim) -> float:
    """The bid at the start of 2024-03-08: the close of the last M1 bar before 00:00 (broker time)."""
    rates = sim.conn.modules.MetaTrader5.copy_rates_from("EURUSD", 1, MIDNIGHT - 1, 1)
    assert int(rates["time"][-1]) < MIDNIGHT
    return float(np.asarray(rates["close"])[-1])


def _closing_deal(sim):
    (deal,) = [d for d in sim.state.book.deals if int(d.entry) == 1]
    return deal


def test_a_carried_position_closed_by_hand_with_its_history_gone_counts_and_trading_goes_on(
    port, sim, tmp_path
):
    """Bought 1 lot at 22:00 on the 7th, carried over midnight, closed by hand on the 8th after a fall of
    40 points, with the terminal's history cut at midnight. Today's P&L: 1 lot x 100,000 x (closing bid -
    the bid at 00:00), about -40 USD (EURUSD on a USD account: 1 USD a point a lot), within the 100 USD
    limit, so the 01:00 order goes out (before: unknown, refused with 10027 for the rest of the day)."""
    SIM["sim"] = sim
    sim.market.set_now(EVENING)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_CarriedThenClosedByHand, params={}, limits=LOSS_100, bars=4)
    records = read_journal(journal)
    orders = [r for r in records if r["type"] == "result" and r.get("call") == "order"]
    assert [r["retcode"] for r in orders] == [10009, 10009], "the second order was refused"
    assert not any((r.get("terminal") or {}).get("event") == "unknown day pnl" for r in records)
    closing = _closing_deal(sim)
    expected = 100_000 * (float(closing.price) - _day_open_bid(sim))  # 1 lot, 1 USD a point
    assert -60.0 < expected < -20.0  # the 40-point fall and the market's own drift since 00:00
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    trade.restore_owned(owned_in(records, journal).values())  # as a resumed run has them, from the journal
    now = trade.day_pnl(19_790)
    mt5 = sim.conn.modules.MetaTrader5
    # The rest of the day: every deal's costs (the 01:00 entry's and the close's) and the new position's
    # whole floating profit and swap (opened today).
    costs = sum(float(d.commission) + float(d.swap) + float(d.fee) for d in sim.state.book.deals)
    held = mt5.positions_get(symbol="EURUSD")
    assert len(held) == 1
    floating = float(held[0].profit) + float(held[0].swap)
    assert now.unknown == () and now.value == pytest.approx(expected + costs + floating, abs=0.01)


def test_without_the_journal_the_same_close_is_unknown_and_its_loss_counted(port, sim, tmp_path):
    """A context that never saw the position (no journal notes) cannot tell it from another's: the day's
    P&L is unknown and the closing deal's loss stands in it, never 0."""
    SIM["sim"] = sim
    sim.market.set_now(EVENING)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_CarriedThenClosedByHand, params={}, limits=LOSS_100, bars=3)
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    got = trade.day_pnl(19_790)
    closing = _closing_deal(sim)
    assert got.unknown and "cannot be read" in got.unknown[0]
    assert got.value == pytest.approx(min(float(closing.profit), 0.0), abs=0.01)
    assert owned_in(read_journal(journal), journal), "the run journaled the position it saw"


class _BuyWhenFlat(ExpertAdvisor):
    """Buys 1 lot of EURUSD whenever it holds none."""

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(1.0)


def test_a_resumed_run_knows_its_position_from_the_journal(port, sim, tmp_path):
    """The run buys at 22:00 and stops; at 00:30 on the next server day, with the terminal's history cut
    at midnight, a person closes the position 40 points lower; the same command resumes. Its trade context
    is a new one: it knows the position from the journal's "owned" note, so the day's P&L (about -40 USD)
    is known and its order at the 00:00 bar goes out; before, unknown: 10027 until the day's end."""
    journal = tmp_path / "live.jsonl"
    sim.market.set_now(EVENING)
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)
    assert owned_in(read_journal(journal), journal), "the run journaled the position it saw"
    sim.market.set_now("2024-03-08 00:30")
    _cut_history_and_close(sim, -40)
    start = len(read_journal(journal))
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=2)
    later = read_journal(journal)[start:]
    asked = [r["retcode"] for r in later if r["type"] == "result" and r.get("call") == "order"]
    assert 10027 not in asked and asked[-1] == 10009, asked
    assert not any((r.get("terminal") or {}).get("event") == "unknown day pnl" for r in later)
