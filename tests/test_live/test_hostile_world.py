"""A hostile world against a multi-symbol live account on the simulated terminal (a real RPyC server): real
processes killed at each step of a request's life, then resumed; nothing may be sent twice, and nothing the
EA asked for may be lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_live.multi_eas import BuyAll
from test_live.test_multi_live import ROOMY, _sent, live_runner

from neuronet.live.journal import read_journal

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

def _dying(self, *records):
    for kind, fields in records:
        event = (fields.get("terminal") or {{}}).get("event")
        if (kind, event, fields.get("symbol")) == ({kind!r}, {event!r}, {symbol!r}):
            line = _journal._encode({{"type": kind, **_journal.json_ready(fields)}})
            self._file.write(line[: len(line) // 2])
            self._file.flush()
            os.fsync(self._file.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
    return _write_all(self, *records)

_journal.Journal.write_all = _dying
sim = Sim(rpyc.classic.connect("127.0.0.1", {port}))
sim.state.book.configure(lost_replies={lost!r})
live_runner({port}, sim, pathlib.Path({journal!r}), ea=BuyAll, bars=3, per_symbol=ROOMY).run()
"""


def _die_writing(tmp_path, port, journal, kind, event, symbol, lost=()):
    """Run ``BuyAll`` live in a real process that dies writing the first ``kind`` record of ``symbol`` whose
    terminal note is ``event`` (None: the EA's own record); ``lost``: the trade server's lost replies."""
    script = tmp_path / "run.py"
    text = DIE_WRITING.format(
        kind=kind, event=event, symbol=symbol, port=port, journal=str(journal), lost=tuple(lost)
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
