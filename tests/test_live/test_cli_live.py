"""``neuronet live`` as a user runs it: a real subprocess against the simulated terminal's RPyC server,
whose clock a thread of the test moves on (one H1 bar every few tenths of a second)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from neuronet.live.journal import read_journal


def _start(*args, cwd):
    return subprocess.Popen(
        [sys.executable, "-m", "neuronet", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def neuronet(*args, cwd, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


class _Clock(threading.Thread):
    """Moves the simulated present on by one hour every ``period`` seconds until stopped."""

    def __init__(self, sim, period=0.4):
        super().__init__(daemon=True)
        self.sim, self.period, self.stopped = sim, period, threading.Event()

    def run(self):
        while not self.stopped.wait(self.period):
            self.sim.market.advance(3600)


@pytest.fixture
def clock(sim):
    thread = _Clock(sim)
    thread.start()
    yield thread
    thread.stopped.set()
    thread.join()


def _live_args(port, journal, *extra):
    return (
        "live",
        "SmaCrossEA",
        "-o",
        f"port={port}",
        "--history",
        "300",
        "--poll",
        "0.05",
        "-p",
        "fast=5",
        "-p",
        "slow=12",
        "--journal",
        str(journal),
        *extra,
    )


def test_live_paper_run_then_its_report(port, clock, tmp_path):
    journal = tmp_path / "run.jsonl"
    secret = "pw-Zq81-never-shown"
    login = ("-o", "login=5012345", "-o", f"password={secret}", "-o", "server=Simulated-Demo")
    res = neuronet(*_live_args(port, journal, "--max-bars", "4", *login), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert secret not in res.stdout + res.stderr + journal.read_text()
    assert "SmaCrossEA paper on EURUSD H1 at Simulated-Demo; journal" in res.stdout
    status = [line for line in res.stdout.splitlines() if " EURUSD H1 bid " in line]
    assert len(status) == 4 and all(" equity " in s and " today " in s for s in status)
    assert "stopped after 4 bars" in res.stdout
    res = neuronet("live", "report", str(journal), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["ea"]["params"]["fast"] == 5 and doc["data"]["forward_first"]
    again = neuronet("live", "report", str(journal), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_ctrl_c_stops_cleanly_and_leaves_the_journal_resumable(port, clock, tmp_path):
    journal = tmp_path / "run.jsonl"
    proc = _start(*_live_args(port, journal), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_text().count('"type":"bar"') >= 2:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted." in err
    assert (
        read_journal(journal)[-1]["type"] == "stop" and read_journal(journal)[-1]["reason"] == "interrupted"
    )
    res = neuronet(*_live_args(port, journal, "--max-bars", "2"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert sum(r["type"] == "resume" for r in read_journal(journal)) == 1


# a --live run of SmaCrossEA with every limit but the symbols it may trade
LIVE_WITH_LIMITS = (
    "live",
    "SmaCrossEA",
    "--live",
    "--max-lots",
    "1",
    "--max-positions",
    "2",
    "--max-daily-loss",
    "100",
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("live", "report", "missing.jsonl"), "journal missing.jsonl does not exist"),
        (("live", "report"), "give the journal file"),
        (("live", "SmaCrossEA", "extra"), "unexpected argument 'extra'"),
        (("live", "SmaCrossEA", "-p", "fats=3"), "did you mean 'fast'"),
        (("live", "SmaCrossEA", "-o", "colour=red"), "-o colour=...: not a terminal option"),
        (("live", "SmaCrossEA", "--live"), "needs explicit limits: give --max-lots, --max-positions"),
        ((*LIVE_WITH_LIMITS, "--allow-symbol", "GBPUSD"), "EURUSD is not among --allow-symbol GBPUSD"),
        (("live", "NoSuchEA"), "unknown EA"),
        (("live", "TrendFilterEA", "--timeframe", "M5"), "--timeframe M5: TrendFilterEA declares its own"),
        (("live", "SmaCrossEA", "--max-account-positions", "2"), "--max-account-positions is a limit of"),
        (
            (*LIVE_WITH_LIMITS, "--allow-symbol", "EURUSD", "--max-quote-age", "5"),
            "--max-quote-age is a paper fill's",
        ),
    ],
)
def test_user_errors_are_one_line(tmp_path, args, message):
    res = neuronet(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr


def test_an_unreachable_terminal_fails_at_once(tmp_path):
    res = neuronet("live", "SmaCrossEA", "-o", "port=1", "-o", "connect_timeout=1", cwd=tmp_path)
    assert res.returncode == 2 and "cannot reach the MetaTrader 5 bridge at 127.0.0.1:1" in res.stderr


def test_a_garbage_journal_is_refused_with_its_line(tmp_path):
    head = {
        "type": "start",
        "format": "neuronet-journal",
        "version": 1,
        "mode": "paper",
        "meta": {"symbol": "EURUSD", "timeframe": "H1"},
        "account": {},
        "forward_start": 2,
    }
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps(head) + '\nhello\n{"type": "stop"}\n')
    res = neuronet("live", "report", str(path), cwd=tmp_path)
    assert res.returncode == 2 and "line 2: not JSON" in res.stderr


def test_live_with_its_limits_goes_as_far_as_the_terminal(tmp_path):
    limits = (
        "--max-lots",
        "1",
        "--max-positions",
        "2",
        "--max-daily-loss",
        "100",
        "--allow-symbol",
        "EURUSD",
    )
    res = neuronet(
        "live",
        "SmaCrossEA",
        "--live",
        *limits,
        "-p",
        "magic=5",
        "-o",
        "port=1",
        "-o",
        "connect_timeout=1",
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "needs the terminal trade context" in res.stderr or "cannot reach" in res.stderr
