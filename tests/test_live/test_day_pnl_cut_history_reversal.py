"""Attack: today's P&L of a carried position whose history the terminal cut at midnight, then reversed or
added to today on a netting account.

A netting position keeps its ticket through additions and reversals, so its deals of today (an "in" or an
"in/out") are served while its opening deal of yesterday, before the terminal's History tab's range, is
not. The deal of today then passes for the position's opening, and a close of volume held since yesterday
would count all its profit since yesterday's fill as today's: a gain made yesterday hiding today's loss.
The run's "owned" note (it saw the position open yesterday) says otherwise. With the whole history held,
the same close of a netting position added to today was valued from its first fill, not its average.

Expected figures come from the simulator's raw M1 history plus the moves the test makes, in points.
"""

from __future__ import annotations

import pytest
from test_live.test_day_pnl import LOTS_UNITS, _raw_start, _trade

MIDNIGHT_DAY = 19_790  # 2024-03-08, days since 1970 in broker time
MIDNIGHT = MIDNIGHT_DAY * 86400


def _bid(sim) -> float:
    return float(sim.conn.modules.MetaTrader5.symbol_info_tick("EURUSD").bid)


def _carried_then_cut(port, sim):
    """A netting account: 1 lot bought on Thursday at 22:00 by the run (magic 777), seen open by its day's
    P&L (its "owned" note), up 600 points by 23:30; on Friday at 00:30 the terminal holds deals from
    midnight on only and the bid has fallen 400 points."""
    sim.state.configure(trade={"hedging": False})
    sim.market.set_now("2024-03-07 22:00")
    trade = _trade(port)
    assert trade.order(+1, 1.0, None, None, 777, "")
    trade.day_pnl(MIDNIGHT_DAY - 1)  # the run sees its position open: owned, with its opening time
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +600)
    sim.market.set_now("2024-03-08 00:30")
    sim.state.book.configure(history_from=MIDNIGHT)
    sim.state.book.move("EURUSD", -400)
    return trade


def test_a_carried_netting_position_reversed_today_with_its_history_cut_counts_from_midnight(port, sim):
    """The run reverses it (sells 2 lots: an "in/out" deal that closes the carried lot and opens 1 lot
    short). The closed lot made, today, 1 lot x 100,000 x (the reversal's bid - the bid at 00:00): about
    -400 USD; the new short, opened today, its whole floating profit. Before the fix the "in/out" deal
    was taken as the position's opening (no deal before midnight served): the closed lot's whole profit
    since Thursday's 22:00 fill (about +200 USD) counted as today's, in the user's favour, by ~600 USD."""
    trade = _carried_then_cut(port, sim)
    assert trade.order(-1, 2.0, None, None, 777, "")
    (inout,) = [d for d in sim.state.book.deals if int(d.entry) == 2]
    day_start, _ = _raw_start(sim, "EURUSD")
    start_bid = day_start + 600 * 1e-5  # the last M1 close before 00:00, with the 23:30 move
    closed_today = (float(inout.price) - start_bid) * LOTS_UNITS
    (short,) = sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    expected = closed_today + float(short.profit) + float(short.swap)
    got = trade.day_pnl(MIDNIGHT_DAY)
    assert float(inout.profit) > 0 > closed_today  # the trap: a gain of yesterday, a loss of today
    assert got.unknown == ()
    assert got.value == pytest.approx(expected, abs=0.05)


def test_a_carried_netting_position_added_to_then_closed_today_with_its_history_cut(port, sim):
    """The run adds 1 lot at 00:30 (an "in" deal of today), then closes the 2 lots at 01:30 after a
    further fall of 100 points. Today: the carried lot from the bid at 00:00, the added lot from its fill
    (the fill is the ask; it closes at the bid). Before the fix the "in" of today passed for the opening:
    the carried lot's gain of yesterday counted as today's."""
    trade = _carried_then_cut(port, sim)
    fill = float(sim.conn.modules.MetaTrader5.symbol_info_tick("EURUSD").ask)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-08 01:30")
    sim.state.book.move("EURUSD", -100)
    (pos,) = sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    assert trade.close(int(pos.ticket), None) == 1
    (out,) = [d for d in sim.state.book.deals if int(d.entry) == 1]
    day_start, _ = _raw_start(sim, "EURUSD")
    start_bid = day_start + 600 * 1e-5
    expected = ((float(out.price) - start_bid) + (float(out.price) - fill)) * LOTS_UNITS
    got = trade.day_pnl(MIDNIGHT_DAY)
    assert got.unknown == ()
    assert got.value == pytest.approx(expected, abs=0.05)


def test_a_carried_netting_position_added_to_then_closed_today_counts_each_lot_from_its_own_start(port, sim):
    """The whole history held: 1 lot bought on Thursday at 15:00, up 1000 points by 23:30; on Friday at
    00:30 1 lot more bought at the ask F, the price falls 400 points, and the run closes the 2 lots at the
    bid P. Today: the carried lot (P - the bid at 00:00) and the added lot (P - F), 100,000 each: about
    -794 USD. Before, the close's profit (from the average price) was divided by the move from Thursday's
    fill and applied to the move since 00:00: about -119 USD, 675 USD in the user's favour, under a
    500 USD daily limit that should have halted."""
    sim.state.configure(trade={"hedging": False})
    sim.market.set_now("2024-03-07 15:00")
    trade = _trade(port)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +1000)
    sim.market.set_now("2024-03-08 00:30")
    fill = float(sim.conn.modules.MetaTrader5.symbol_info_tick("EURUSD").ask)
    assert trade.order(+1, 1.0, None, None, 777, "")
    sim.state.book.move("EURUSD", -400)
    (pos,) = sim.conn.modules.MetaTrader5.positions_get(symbol="EURUSD")
    assert trade.close(int(pos.ticket), None) == 1
    (out,) = [d for d in sim.state.book.deals if int(d.entry) == 1]
    day_start, _ = _raw_start(sim, "EURUSD")
    start_bid = day_start + 1000 * 1e-5
    expected = ((float(out.price) - start_bid) + (float(out.price) - fill)) * LOTS_UNITS
    got = trade.day_pnl(MIDNIGHT_DAY)
    assert got.unknown == ()
    assert got.value == pytest.approx(expected, abs=0.05)
