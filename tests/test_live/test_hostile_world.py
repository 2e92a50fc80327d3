"""A hostile world against a multi-symbol live account on the simulated terminal (a real RPyC server): real
processes killed at each step of a request's life, then resumed; nothing may be sent twice, and nothing the
EA asked for may be lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_live.live_support import OPEN_SOURCES, one_lot_limits, quick_trading
from test_live.multi_eas import BuyAll
from test_live.test_multi_live import ROOMY, _sent, live_runner

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from neuronet.live.runner import LiveRunner, LiveSettings
from strategies.base import ExpertAdvisor

ROOT = Path(__file__).resolve().parents[2]

# The process writes half of the first record that matches, then kills itself (SIGKILL): a crash in the
# middle of a journal line, at a chosen step of a request's life.
DIE_WRITING = """
import os, pathlib, signal, rpyc
from neuronet.live import journal as _journal
from test_live.test_multi_live import ROOMY, live_runner
from test_live.conftest import Sim
from test_live.multi_eas import BuyAll

_write_all = _journal.Journal.write_all
_seen = [0]

def _dying(self, *records):
    for kind, fields in records:
        event = (fields.get("terminal") or {{}}).get("event")
        if (kind, event, fields.get("symbol")) == ({kind!r}, {event!r}, {symbol!r}):
            _seen[0] += 1
            if _seen[0] == {nth}:
                line = _journal._encode({{"type": kind, **_journal.json_ready(fields)}})
                self._file.write(line[: len(line) // 2])
                self._file.flush()
                os.fsync(self._file.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
    return _write_all(self, *records)

_journal.Journal.write_all = _dying
sim = Sim(rpyc.classic.connect("127.0.0.1", {port}))
sim.state.book.configure(lost_replies={lost!r})
{run}
"""
MULTI = "live_runner({port}, sim, pathlib.Path({journal!r}), ea=BuyAll, bars=3, per_symbol=ROOMY).run()"


def _die_writing(tmp_path, port, journal, kind, event, symbol, lost=(), nth=1, run=MULTI):
    """Run ``BuyAll`` live (or ``run``) in a real process that dies writing the ``nth`` ``kind`` record of
    ``symbol`` whose terminal note is ``event`` (None: the EA's own record); ``lost``: the trade server's
    lost replies."""
    script = tmp_path / "run.py"
    args = {"port": port, "journal": str(journal)}
    text = DIE_WRITING.format(
        kind=kind, event=event, symbol=symbol, lost=tuple(lost), nth=nth, run=run.format(**args), **args
    )
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert not journal.read_bytes().endswith(b"\n")  # killed in the middle of a line


def test_a_request_killed_before_it_reached_the_terminal_is_sent_on_resume(port, sim, tmp_path):
    """Killed while the terminal's note of GBPUSD's order was being written (so before ``order_send``, which
    comes only after that note is on disk): GBPUSD's order never reached the terminal. The bar is decided
    again on resume; EURUSD's order, sent, is not sent again, and GBPUSD's, never sent, must be sent now —
    not answered "None" from the journal as if it had been."""
    journal = tmp_path / "live.jsonl"
    _die_writing(tmp_path, port, journal, "request", "request", "GBPUSD")
    assert _sent(sim) == {"EURUSD": 1}
    live_runner(port, sim, journal, ea=BuyAll, bars=1, per_symbol=ROOMY).run()
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1, "USDJPY": 1}, "GBPUSD's order of the bar was lost"
    assert not _notes(journal, "unresolved")


def _notes(journal: Path, event: str) -> list[dict]:
    return [
        r["terminal"]
        for r in read_journal(journal)
        if r.get("source") == "terminal" and r["terminal"]["event"] == event
    ]


SEEN: list[tuple] = []  # what Answers' orders answered (not a class attribute: those are parameters)


class Answers(BuyAll):
    """``BuyAll`` that keeps what each of its orders answered, and its retcode, in ``SEEN``."""

    def on_bar(self):
        for symbol in self.symbols:
            SEEN.append((symbol, self.buy(0.1, symbol=symbol, comment=f"all {symbol}"), self.last_retcode))


def test_a_request_killed_after_the_send_before_its_answer_was_journaled_is_not_sent_again(
    port, sim, tmp_path
):
    """Killed while the terminal's answer to GBPUSD's order (filled) was being written: the order is on
    the terminal, the journal holds its request and no answer. Resumed, the bar decided again must not send
    it again; the EA's call answers 10012 (outcome unknown, looked up) and the terminal shows it."""
    journal = tmp_path / "live.jsonl"
    _die_writing(tmp_path, port, journal, "result", "result", "GBPUSD")
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1}
    SEEN.clear()
    Answers.__name__ = "BuyAll"
    live_runner(port, sim, journal, ea=Answers, bars=1, per_symbol=ROOMY).run()
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1, "USDJPY": 1}
    assert [(s, r) for s, _, r in SEEN[:3]] == [("EURUSD", 10009), ("GBPUSD", 10012), ("USDJPY", 10009)]
    assert [(n["symbol"], n["retcode"]) for n in _notes(journal, "recovered")] == [("GBPUSD", 10009)]


def test_a_run_killed_while_it_looked_up_a_lost_reply_looks_it_up_again_and_never_sends_it_again(
    port, sim, tmp_path
):
    """GBPUSD's order executes and its reply is lost (an IPC timeout); the process dies while writing the
    note that the look-up found it. Resumed, it is looked up again (found) and never sent again."""
    journal = tmp_path / "live.jsonl"
    _die_writing(tmp_path, port, journal, "result", "recovered", "GBPUSD", lost=(1, -10005))
    assert _sent(sim) == {"EURUSD": 1, "GBPUSD": 1}
    live_runner(port, sim, journal, ea=BuyAll, bars=2, per_symbol=ROOMY).run()
    assert _sent(sim) == {"EURUSD": 2, "GBPUSD": 2, "USDJPY": 2}  # the cut bar's 3, then the next bar's 3
    assert [n["symbol"] for n in _notes(journal, "recovered")] == ["GBPUSD"]  # found among its own deals
    assert not _notes(journal, "not executed")


class Flip(ExpertAdvisor):
    """Holds 0.1 lots and turns it around at every bar: a close, then an order the other way."""

    magic: int = 4343

    def on_bar(self) -> None:
        held = self.positions()
        for p in held:
            self.close(p.ticket)
        if not held or held[0].side < 0:
            self.buy(0.1)
        else:
            self.sell(0.1)


def one_symbol_live(
    port,
    sim,
    journal,
    *,
    ea=Flip,
    bars: int,
    symbol: str = "EURUSD",
    limits: Limits | None = None,
    sleep=None,
) -> LiveRunner:
    """A one-symbol live run of ``ea`` (1 lot and one position at most unless ``limits`` says else);
    ``sleep``: the runner's (default: an hour of simulated time a call)."""
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=0.5, backoff=0.01)
    OPEN_SOURCES.append(source)
    factory = quick_trading(limits or one_lot_limits(symbol))
    settings = LiveSettings(symbol, Timeframe.H1, journal, mode="live", history_bars=100, max_bars=bars)
    return LiveRunner(
        ea, {}, source, settings, trading=factory, sleep=sleep or sim.sleep, status=lambda _: None
    )


class TwoBuys(ExpertAdvisor):
    """Buys 0.1 then 0.2 lots at every bar, whatever it holds: a deterministic bar of two requests."""

    magic: int = 4646

    def on_bar(self) -> None:
        self.buy(0.1)
        self.buy(0.2)


ONE = (
    "from test_live.test_hostile_world import {ea}, one_symbol_live\n"
    "from neuronet.live.limits import Limits\n"
    "roomy = Limits(max_lots=1.0, max_positions=9, max_daily_loss=1e4, symbols=('EURUSD',))\n"
    "one_symbol_live({port}, sim, pathlib.Path({journal!r}), ea={ea}, bars=3, limits=roomy).run()"
)
ROOMY_ONE = Limits(max_lots=1.0, max_positions=9, max_daily_loss=1e4, symbols=("EURUSD",))


def _deals(sim) -> list[tuple[int, int, float]]:
    """(type, entry, volume) of each deal the terminal made, in order."""
    return [(d.type, d.entry, d.volume) for d in sim.state.book.deals]


def test_a_one_symbol_bar_killed_before_its_second_order_reached_the_terminal_sends_it_on_resume(
    port, sim, tmp_path
):
    """Killed while the terminal's note of the bar's second order was written: the bar is decided again on
    resume, the first order answered from the journal (not sent twice) and the second sent."""
    journal = tmp_path / "live.jsonl"
    _die_writing(
        tmp_path, port, journal, "request", "request", "EURUSD", run=ONE.replace("{ea}", "TwoBuys"), nth=2
    )
    assert _deals(sim) == [(0, 0, 0.1)]
    one_symbol_live(port, sim, journal, ea=TwoBuys, bars=1, limits=ROOMY_ONE).run()
    assert _deals(sim)[:2] == [(0, 0, 0.1), (0, 0, 0.2)], "the cut bar's second order was lost or doubled"
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    decided = [r for r in recs[resumed:] if r["type"] == "decision"]
    assert decided[0]["bar"] == recs[resumed]["forming"]  # the cut bar, decided again


def test_a_reversal_killed_after_its_close_never_turns_into_a_buy_on_resume(port, sim, tmp_path):
    """``Flip`` buys at the first bar; at the second it closes the long, and the process is killed before
    the sell that follows reached the terminal. Decided again on resume, the EA sees no position and asks
    a buy: the opposite of what it decided at that bar. Nothing is sent for the rest of that bar (10027,
    journaled as a warning); the account stays flat until the EA's next bar."""
    journal = tmp_path / "live.jsonl"
    _die_writing(
        tmp_path, port, journal, "request", "request", "EURUSD", run=ONE.replace("{ea}", "Flip"), nth=3
    )
    assert _deals(sim) == [(0, 0, 0.1), (1, 1, 0.1)]  # bought, then the long closed
    one_symbol_live(port, sim, journal, ea=Flip, bars=1, limits=ROOMY_ONE).run()
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    cut = recs[resumed]["forming"]
    assert _deals(sim) == [(0, 0, 0.1), (1, 1, 0.1)]  # no buy at the bar decided to sell
    made_at_cut = [r for r in recs[resumed:] if r["type"] == "request" and r.get("bar") == cut]
    assert not made_at_cut, "a request of the bar decided again was sent though it asked otherwise"
    assert any(r["type"] == "warning" and "asks otherwise" in r["message"] for r in recs[resumed:])


class FlipFirst(BuyAll):
    """A multi-symbol ``Flip`` on its first symbol (EURUSD): a close, then an order the other way."""

    def on_bar(self) -> None:
        held = self.positions("EURUSD")
        for p in held:
            self.close(p.ticket)
        if not held or held[0].side < 0:
            self.buy(0.1, symbol="EURUSD")
        else:
            self.sell(0.1, symbol="EURUSD")


def test_a_multi_symbol_reversal_killed_after_its_close_never_turns_into_a_buy_on_resume(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    run = "from test_live.test_hostile_world import FlipFirst\n" + MULTI.replace("=BuyAll", "=FlipFirst")
    _die_writing(tmp_path, port, journal, "request", "request", "EURUSD", run=run, nth=3)
    assert _deals(sim) == [(0, 0, 0.1), (1, 1, 0.1)]
    live_runner(port, sim, journal, ea=FlipFirst, bars=1, per_symbol=ROOMY).run()
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    cut = recs[resumed]["forming"]
    sent = [r for r in recs[resumed:] if r["type"] == "request" and r.get("bar") == cut]
    assert not sent, "the bar decided again sent a buy where the EA had decided to sell"
    assert _deals(sim) == [(0, 0, 0.1), (1, 1, 0.1)]


class HoldThenAdd(ExpertAdvisor):
    """Buys one lot while it holds none; holding one, adds 0.1 lots once (``ADDED`` keeps the answer)."""

    magic: int = 4545

    def on_bar(self) -> None:
        held = self.positions()
        if not held:
            self.buy(1.0)
        elif len(held) == 1:
            ADDED.append(self.buy(0.1))


ADDED: list = []


def test_a_gain_carried_from_yesterday_does_not_hide_todays_loss_from_the_daily_limit(port, sim, tmp_path):
    """One lot bought on Thursday gains about 1000 USD by 23:30; on Friday the price falls 900 points
    (about -900 USD today, the position still about +100 since it opened). With ``--max-daily-loss 500``
    Friday's new order must be refused."""
    limits = Limits(max_lots=1.0, max_positions=2, max_daily_loss=500.0, symbols=("EURUSD",))
    journal = tmp_path / "live.jsonl"
    one_symbol_live(port, sim, journal, ea=HoldThenAdd, bars=1, limits=limits).run()
    assert len(sim.state.book.positions) == 1
    sim.market.set_now("2024-03-07 23:30")
    sim.state.book.move("EURUSD", +1000)
    sim.market.set_now("2024-03-08 00:30")  # the next server day
    sim.state.book.move("EURUSD", -900)
    ADDED.clear()
    one_symbol_live(port, sim, tmp_path / "friday.jsonl", ea=HoldThenAdd, bars=1, limits=limits).run()
    first = min(sim.conn.modules.MetaTrader5.positions_get(), key=lambda p: p.ticket)
    assert 0 < first.profit < 500  # still a gain since it opened: that hides the day's loss
    assert ADDED and not ADDED[0], "a new order was sent after the account lost about 900 USD today"


@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB file system (tmpfs), where root may mount one; unmounted after."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip("cannot mount a small file system here")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)  # lazily: a file a failed run left open


class FillsTheDisk(ExpertAdvisor):
    """Buys 0.1 lots at every bar; at its second bar it first fills the disk its journal is on."""

    magic: int = 4747

    def on_bar(self) -> None:
        filler = Path(os.environ["A_FULL_DISK"])
        if self.bars.time.size and not FILLED and len(sim_deals()) == 1:
            FILLED.append(filler)  # once: the resumed run decides that bar again on a freed disk
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:  # full
                pass
            finally:
                os.close(fd)
            # The journal's last block may still have room (a write into it needs no new block): taken
            # by blank lines, which a journal may hold, so the very next record meets the full disk
            # whatever the journal's length was.
            fd = os.open(filler.parent / "live.jsonl", os.O_WRONLY | os.O_APPEND)
            try:
                while os.write(fd, b"\n"):
                    pass
            except OSError:  # full
                pass
            finally:
                os.close(fd)
        self.buy(0.1)


SIM_DEALS: list = []
FILLED: list = []


def sim_deals() -> list:
    return SIM_DEALS[0]() if SIM_DEALS else []


def test_a_full_disk_stops_the_run_with_one_line_naming_the_journal_and_resumes_once_freed(
    port, sim, tmp_path, small_disk, monkeypatch
):
    """The journal's disk fills in the middle of a bar: the run stops with a journal error that names the
    journal (not as the EA's own failure), nothing unjournaled is sent; once space is freed the same journal
    resumes and nothing is sent twice."""
    filler = small_disk / "filler"
    monkeypatch.setenv("A_FULL_DISK", str(filler))
    SIM_DEALS[:] = [lambda: sim.state.book.deals]
    FILLED.clear()
    journal = small_disk / "live.jsonl"
    limits = Limits(max_lots=1.0, max_positions=9, max_daily_loss=1e4, symbols=("EURUSD",))
    with pytest.raises(JournalError, match=r"live\.jsonl.*No space left"):
        one_symbol_live(port, sim, journal, ea=FillsTheDisk, bars=4, limits=limits).run()
    assert len(sim.state.book.deals) == 1  # the second bar's order was not sent unjournaled
    filler.unlink()
    one_symbol_live(port, sim, journal, ea=FillsTheDisk, bars=2, limits=limits).run()
    tags = [d.comment.split()[0] for d in sim.state.book.deals]
    assert len(tags) == len(set(tags)) and len(tags) >= 2  # each request id filled once
    requests = [
        r
        for r in read_journal(journal)
        if r.get("source") == "terminal" and r["terminal"]["event"] == "request"
    ]
    assert sorted(r["terminal"]["id"] for r in requests) == sorted(tags)  # every order sent is journaled


TIMEOUT_THEN_FILLED = (
    "import MetaTrader5 as _m\n_send = _m.order_send\n"
    "def _late(request):\n"
    "    res = _send(request)\n"
    "    _m.order_send = _send\n"  # only the first
    "    return res._replace(retcode=10012, comment='Request canceled by timeout')\n"
    "_m.order_send = _late"
)
ANSWERS: list = []


class BuyOnceNoted(ExpertAdvisor):
    """Buys 0.1 lots while it holds none, keeping each answer and retcode in ``ANSWERS``."""

    magic: int = 4848

    def on_bar(self) -> None:
        if not self.positions():
            ANSWERS.append((self.buy(0.1), self.last_retcode))


def test_a_timeout_answer_for_an_order_the_terminal_filled_is_looked_up_not_taken_as_refused(
    port, sim, tmp_path
):
    """``order_send`` answers 10012 ("request canceled by timeout") for an order the trade server in fact
    filled: the outcome of a timed-out request is unknown, so it is looked up by its id and found, the EA
    gets its ticket, and it is journaled as recovered, never as refused."""
    ANSWERS.clear()
    journal = tmp_path / "live.jsonl"
    sim.conn.execute(TIMEOUT_THEN_FILLED)
    try:
        one_symbol_live(port, sim, journal, ea=BuyOnceNoted, bars=2).run()
    finally:
        sim.conn.execute("_m.order_send = _send")
    assert len(sim.state.book.deals) == 1
    (ticket, retcode), *_ = ANSWERS
    assert ticket == sim.state.book.deals[0].order and retcode == 10009
    assert [n["event"] for n in _notes(journal, "recovered")] == ["recovered"]


STOPPED: list = []  # StopAfterFirstBuy stops once


class StopAfterFirstBuy(TwoBuys):
    """``TwoBuys`` stopped (Ctrl-C) once, right after the first buy of its second bar."""

    def on_bar(self) -> None:
        self.buy(0.1)
        if len(self.bars) > 300 and not STOPPED:
            STOPPED.append(True)
            raise KeyboardInterrupt
        self.buy(0.2)


def _results(journal: Path) -> list[tuple]:
    return [
        (r["bar"], r["call"], json.dumps(r["value"]), r["retcode"])
        for r in read_journal(journal)
        if r["type"] == "result" and r.get("source") != "terminal"
    ]


def test_a_one_symbol_paper_run_stopped_in_the_middle_of_a_bar_books_as_one_that_never_stopped(
    port, sim, tmp_path
):
    from test_live.live_support import runner

    whole = tmp_path / "whole.jsonl"
    StopAfterFirstBuy.__name__ = "TwoBuys"
    runner(port, sim, whole, ea=TwoBuys, params={}, max_bars=3).run()
    sim.market.set_now("2024-03-07 10:00")
    STOPPED.clear()
    cut = tmp_path / "cut.jsonl"
    with pytest.raises(KeyboardInterrupt):
        runner(port, sim, cut, ea=StopAfterFirstBuy, params={}, max_bars=3).run()
    runner(port, sim, cut, ea=StopAfterFirstBuy, params={}, max_bars=2).run()
    assert _results(cut) == _results(whole)  # the cut bar's first buy once, its second buy made on resume
