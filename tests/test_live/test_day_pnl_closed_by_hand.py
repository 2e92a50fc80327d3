"""Today's P&L of a live run counts the loss of its own position when someone else closed it: a person by
hand (the closing deal carries magic 0, MetaTrader's number of the trades placed by hand) or another EA.

The day's deals were kept by their magic number alone, so the closing deal of the EA's position, made by a
request of magic 0, was not the EA's: the position gone and its loss nowhere, today's P&L read 0 and the
next order went out past ``--max-daily-loss``. A deal belongs to the run where the position it closes is
one of the run's (MQL5 ``DEAL_POSITION_ID``), whatever number the closing request carried.
"""

from __future__ import annotations

import pytest
from test_live.live_support import MAGIC
from test_live.test_account_report import live_run, source

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.terminal_trade import TerminalTrade
from strategies.base import ExpertAdvisor

LOSS_100 = Limits(max_lots=1.0, max_positions=1, max_daily_loss=100.0, symbols=("EURUSD",))


class _BuyWhenFlat(ExpertAdvisor):
    """Buys 1 lot of EURUSD whenever it holds none."""

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(1.0)


def _close_by_hand(sim, magic: int) -> None:
    """The position closed on the terminal's side by a request of ``magic`` (0: a person)."""
    sim.conn.execute(
        "import MetaTrader5 as _m\n"
        "_p = _m.positions_get()[0]\n"
        "_q = _m.symbol_info_tick(_p.symbol)\n"
        "_r = _m.order_send({'action': 1, 'symbol': _p.symbol, 'volume': _p.volume, 'type': 1, "
        f"'position': _p.ticket, 'price': _q.bid, 'magic': {magic}, 'type_filling': 0, 'comment': 'hand'}})\n"
        "assert _r.retcode == 10009, _r"
    )


def _deals(sim) -> list[tuple[int, int, float]]:
    """(magic, entry, profit) of every deal on the terminal."""
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    return [(int(d.magic), int(d.entry), round(float(d.profit), 2)) for d in deals]


@pytest.mark.parametrize("closer", [0, 777], ids=["by hand", "by another EA"])
def test_a_loss_closed_by_someone_else_counts_in_todays_pnl(port, sim, tmp_path, closer):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)
    assert len(sim.state.book.positions) == 1
    sim.state.book.move("EURUSD", -400)  # 1 lot loses 400 points: about -400 USD
    _close_by_hand(sim, closer)
    closing = [d for d in _deals(sim) if d[1] == 1]
    assert len(closing) == 1 and closing[0][0] == closer and closing[0][2] < -300.0
    start = len(read_journal(journal))
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)  # the same server day
    asked = [r for r in read_journal(journal)[start:] if r["type"] == "result" and r.get("call") == "order"]
    assert asked and all(r["retcode"] == 10027 for r in asked), "an order went out past the daily loss"
    assert not sim.state.book.positions


def test_the_runs_own_close_still_counts_once(port, sim, tmp_path):
    """The closing deal of the run's own request (its own magic) is counted once, not twice."""
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)
    sim.state.book.move("EURUSD", -40)
    _close_by_hand(sim, MAGIC)
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    paid = sum(p for _, _, p in _deals(sim))
    assert trade.day_pnl().value == pytest.approx(paid, abs=0.01) and paid < 0


def _deal(ticket: int, entry: int, magic: int, profit: float, time: int):
    from types import SimpleNamespace

    return SimpleNamespace(
        ticket=ticket, symbol="EURUSD", magic=magic, entry=entry, position_id=7, type=1 if entry else 0,
        volume=1.0, price=1.1, profit=profit, commission=0.0, swap=0.0, fee=0.0, time=time,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("history", "value", "unknown"), [(None, -400.0, 1), ("ours", -400.0, 0), ("theirs", 0.0, 0)]
)
def test_a_close_of_a_position_whose_opener_cannot_be_read_is_unknown_not_zero(history, value, unknown):
    """Position #7 opened at 10:00 and closed at 11:00 today by a request of magic 0 (-400 USD). Its
    opening deal is not among today's deals of the run (a read of the day's deals from a history cut short):
    whose position it was is read from its own deals; an unreadable answer makes the day's P&L unknown
    (new orders refused) with the loss counted, never 0."""
    from neuronet.live.day_pnl import DayPnlReader

    day = 19_789  # 2024-03-07
    start = day * 86400
    opener = {"ours": MAGIC, "theirs": 777}.get(history)
    closing = _deal(2, 1, 0, -400.0, start + 11 * 3600)

    def read(name, *args, position=None, symbol=None, none_ok=False):
        if name == "history_deals_get" and position is not None:
            return None if opener is None else [_deal(1, 0, opener, 0.0, start + 10 * 3600), closing]
        return [closing] if name == "history_deals_get" else []

    got = DayPnlReader(read, "EURUSD").of(day, {MAGIC})
    assert got.value == pytest.approx(value) and len(got.unknown) == unknown
