"""A resumed live run still counts the positions its EA opened under a magic number of its own other than
the EA's (``buy(..., magic=...)``): they are its positions, its exposures and its day's money.

Before a restart, a live trade context counted every magic number the EA's requests had carried; after
one it knew only the EA's own, so a position of the second number vanished from ``positions()``, from
``max_positions`` and from the daily loss: the EA bought again, past a limit of one position (two lots held
where the uninterrupted run holds one).
"""

from __future__ import annotations

from test_live.live_support import MAGIC
from test_live.multi_eas import EachOnce
from test_live.test_account_report import live_run
from test_live.test_multi_live import _held as multi_held
from test_live.test_multi_live import live_runner

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from strategies.base import ExpertAdvisor

ONE = Limits(max_lots=1.0, max_positions=1, max_daily_loss=50_000.0, symbols=("EURUSD",))
SECOND = MAGIC + 1


class _SecondMagic(ExpertAdvisor):
    """Holds 0.1 lots of EURUSD under its second magic number: buys when it sees no position."""

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(0.1, magic=SECOND)


def _held(sim) -> list[tuple[int, float]]:
    """(magic, lots) of every position on the terminal."""
    return sorted((int(p.magic), float(p.volume)) for p in sim.conn.modules.MetaTrader5.positions_get() or ())


def test_resume_keeps_the_second_magic_numbers_position_as_the_eas(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_SecondMagic, params={}, limits=ONE, bars=3)
    assert _held(sim) == [(SECOND, 0.1)]
    live_run(port, sim, journal, ea=_SecondMagic, params={}, limits=ONE, bars=3)  # resumed
    assert _held(sim) == [(SECOND, 0.1)]  # as the uninterrupted run: no second buy past the limit


class _GbpSecondMagic(EachOnce):
    """``EachOnce``, its GBPUSD position under its second magic number."""

    def on_bar(self) -> None:
        for symbol in self.symbols:
            if not self.positions(symbol):
                magic = self.magic + 1 if symbol == "GBPUSD" else None
                self.buy(0.1, symbol=symbol, magic=magic, comment=f"each {symbol}")


def test_a_resumed_multi_symbol_run_keeps_its_second_magic_numbers_position(port, sim, tmp_path):
    _GbpSecondMagic.__name__ = "EachOnce"  # the journal's identity names the EA
    journal = tmp_path / "multi.jsonl"
    live_runner(port, sim, journal, ea=_GbpSecondMagic, bars=2).run()
    assert multi_held(sim) == {"EURUSD": 0.1, "GBPUSD": 0.1, "USDJPY": 0.1} and sim.state.book.executed == 3
    live_runner(port, sim, journal, ea=_GbpSecondMagic, bars=2).run()  # resumed
    assert sim.state.book.executed == 3  # no second GBPUSD buy past the limit of one position per symbol


def test_close_on_exit_closes_the_positions_of_every_magic_number_the_ea_used(port, sim, tmp_path):
    # ``--close-on-exit`` closed the EA's own number's positions only: the second number's 0.1 lots stayed.
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_SecondMagic, params={}, limits=ONE, bars=3, close_on_exit=True)
    assert _held(sim) == []
    stop = [r for r in read_journal(journal) if r["type"] == "stop"]
    assert [r["closed_on_exit"] for r in stop] == [1]
