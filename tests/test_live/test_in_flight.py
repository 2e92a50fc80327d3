"""A trade request still in flight when the run stops (Ctrl-C while ``order_send`` waits, or a killed
process) has an unknown outcome: the terminal may fill it after the stop. The resumed run must count it
as open and look it up, exactly as a request whose reply was lost, never let the EA send another."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from test_live.live_support import OPEN_SOURCES, one_lot_limits, quick_trading
from test_live.test_runner_lost import _Holder, _terminal_notes

from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.runner import LiveRunner, LiveSettings


def _live(port, sim, journal, *, bars: int) -> None:
    """A live run of an EA that buys 0.1 lots whenever it holds none, ``--max-positions 1``, on a link
    whose timeout (10 s) outlasts the terminal's delays here."""
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0, backoff=0.01)
    OPEN_SOURCES.append(source)
    factory = quick_trading(one_lot_limits())
    settings = LiveSettings("EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=bars)
    LiveRunner(_Holder, {}, source, settings, trading=factory, sleep=sim.sleep, status=lambda _: None).run()


def _wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the simulated terminal did not get there in time"
        time.sleep(0.05)


def _filled(sim, tag: str) -> bool:
    """The terminal has filled the request ``tag`` (its deal carries the id)."""
    return any(str(d.comment).startswith(tag) for d in sim.state.book.deals)


def _ctrl_c_while_order_send_waits(port, sim, journal) -> None:
    """A live run whose first ``buy(0.1)`` the terminal holds 2 s; Ctrl-C 0.3 s after it got there."""
    sim.state.configure(delay=(("order_send", 2.0),))
    started = threading.Event()

    def interrupt() -> None:
        _wait_for(lambda: sim.state.begun["order_send"] == 1)  # the terminal holds it now
        time.sleep(0.3)
        started.set()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        _live(port, sim, journal, bars=5)
    assert started.is_set() and sim.state.book.executed == 0  # stopped while the terminal held it
    sim.state.configure(delay=(("order_send", 0.0),))  # later requests are answered at once


def test_a_request_in_flight_at_ctrl_c_is_counted_open_and_looked_up_on_resume(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    _ctrl_c_while_order_send_waits(port, sim, journal)
    (tag,) = [n["id"] for n in _terminal_notes(journal) if n["event"] == "request"]
    warned = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert any(tag in m for m in warned)  # the stop says that its outcome is unknown
    _wait_for(lambda: _filled(sim, tag))  # the terminal fills it after the stop
    _live(port, sim, journal, bars=3)
    book = sim.state.book
    assert book.executed == 1 and len(book.positions) == 1  # one buy(0.1): never a second position
    assert [n["event"] for n in _terminal_notes(journal) if n.get("id") == tag][-1] == "recovered"


def test_a_request_in_flight_when_the_process_is_killed_is_looked_up_on_resume(port, sim, tmp_path):
    """A killed process leaves the request's record and nothing after it: the resumed run holds the
    request as unresolved while the terminal fills it late."""
    journal = tmp_path / "live.jsonl"
    _ctrl_c_while_order_send_waits(port, sim, journal)
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = next(
        i for i, raw in enumerate(lines) if (json.loads(raw).get("terminal") or {}).get("event") == "request"
    )
    journal.write_bytes(b"".join(lines[: cut + 1]))  # what SIGKILL leaves: nothing after the request
    tag = json.loads(lines[cut])["terminal"]["id"]
    # The terminal fills it while the resumed run goes on: it counts as open from the first bar on.
    _live(port, sim, journal, bars=3)
    _wait_for(lambda: _filled(sim, tag))
    _live(port, sim, journal, bars=2)
    book = sim.state.book
    assert book.executed == 1 and len(book.positions) == 1
