"""The runner looks up the requests whose reply was lost (``TerminalTrade.unresolved``) once the terminal
answers again, keeps them while it still cannot be asked or does not show them, never sends them again,
and a resumed run takes over those the stopped one left unresolved."""

from __future__ import annotations

import time

from test_live.live_support import LIVE_PARAMS, OPEN_SOURCES, one_lot_limits, quick_trading
from test_live.test_runner import _FakeTerminalTrade

from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalConnectionError
from datafeeds.timeframes import Timeframe
from neuronet.live.journal import read_journal
from neuronet.live.runner import LiveRunner, LiveSettings
from strategies.base import ExpertAdvisor
from strategies.sma import SmaCrossEA


class _Lost(_FakeTerminalTrade):
    """A trade context holding one request whose reply was lost; the first look-up fails."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.unresolved = {"nn0badc0de": {"action": 1}}
        self.looks = 0

    def resolve(self):
        self.looks += 1
        if self.looks == 1:
            raise TerminalConnectionError("the bridge is still down")
        self.unresolved = {}
        return {"nn0badc0de": None}


def test_lost_requests_are_looked_up_when_the_terminal_answers(port, sim, tmp_path, caplog):
    made: list[_Lost] = []

    def factory(*args, **kw):
        made.append(_Lost(*args, **kw))
        return made[-1]

    source = TerminalSource("127.0.0.1", port, retries=0)
    OPEN_SOURCES.append(source)
    settings = LiveSettings(
        "EURUSD", Timeframe.H1, tmp_path / "j.jsonl", mode="live", history_bars=300, max_bars=4
    )
    LiveRunner(
        SmaCrossEA, LIVE_PARAMS, source, settings, trading=factory, sleep=sim.sleep, status=lambda _: None
    ).run()
    assert made[0].looks == 2 and made[0].unresolved == {}  # the failed look kept it for the next one
    assert "cannot be looked up yet: the bridge is still down" in caplog.text


class _Holder(ExpertAdvisor):
    """Wants one position: buys 0.1 lots whenever it holds none."""

    magic = 7

    def on_bar(self) -> None:
        if not self.positions():
            self.buy(0.1)


def _live(port, sim, journal, *, bars, sleep, **trade_kw):
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=0.5, backoff=0.01)
    OPEN_SOURCES.append(source)
    factory = quick_trading(one_lot_limits(), **trade_kw)
    settings = LiveSettings("EURUSD", Timeframe.H1, journal, mode="live", history_bars=300, max_bars=bars)
    LiveRunner(_Holder, {}, source, settings, trading=factory, sleep=sleep, status=lambda _: None).run()


def _terminal_notes(journal) -> list[dict]:
    return [r["terminal"] for r in read_journal(journal) if r.get("source") == "terminal"]


def test_a_live_run_whose_order_is_answered_late_holds_one_position(port, sim, tmp_path):
    """``--max-positions 1``: the order answered after the timeout is never sent again, the EA's next
    buys are refused while it is unresolved, and once the terminal shows it the run holds one position."""
    sim.state.configure(delay=(("order_send", 5.0),))

    def sleep(_):  # a poll: ten minutes of the terminal's time, a quarter second of real time
        sim.market.advance(600)
        time.sleep(0.25)  # the terminal fills the late request meanwhile, a few hours later in its time

    journal = tmp_path / "live.jsonl"
    _live(port, sim, journal, bars=8, sleep=sleep)
    book = sim.state.book
    assert book.executed == 1 and len(book.positions) == 1 and sim.state.call_count("order_send") == 1
    notes = _terminal_notes(journal)
    (lost,) = [n["id"] for n in notes if n["event"] == "unresolved"]
    assert [n["event"] for n in notes if n.get("id") == lost] == [
        "request",
        "unresolved",
        "result",
        "recovered",
    ]
    held = [n for n in notes if n["event"] == "refused" and "reply was lost" in n["reason"]]
    assert held and all(n["retcode"] == 10027 for n in held)


def test_a_resumed_live_run_looks_up_what_the_stopped_one_left_unresolved(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    sim.state.configure(fail=(("order_send", 1, 0),))  # the link drops before the request executes
    _live(port, sim, journal, bars=3, sleep=sim.sleep)
    (lost,) = [n["id"] for n in _terminal_notes(journal) if n["event"] == "unresolved"]
    refused = [n for n in _terminal_notes(journal) if n["event"] == "refused"]
    assert refused and "reply was lost" in refused[-1]["reason"]  # held for the rest of the run
    assert sim.state.call_count("order_send") == 1 and sim.state.book.executed == 0
    said = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert any(f"whose reply was lost and that the terminal does not show yet ({lost})" in m for m in said)
    _live(port, sim, journal, bars=3, sleep=sim.sleep, lost_reply_settle=0.0)  # the restart settles it
    notes = _terminal_notes(journal)
    assert [n["event"] for n in notes if n.get("id") == lost][-1] == "not executed"
    assert sim.state.call_count("order_send") == 2 and len(sim.state.book.positions) == 1  # then bought


def test_a_request_recovered_later_is_a_trade_of_the_report_not_a_rejected_one(port, sim, tmp_path):
    from neuronet.live.report import journal_result

    journal = tmp_path / "live.jsonl"
    sim.state.book.configure(lost_replies=(-10005,))  # it executes, its reply is lost...
    # ...and the look-up fails: its first read (the first is today's P&L, read by the limits)
    sim.state.configure(fail=(("history_deals_get", 2, -10004),))
    _live(port, sim, journal, bars=4, sleep=sim.sleep, retries=0)
    events = [n["event"] for n in _terminal_notes(journal)]
    assert events[:4] == ["request", "unresolved", "result", "recovered"]
    source = TerminalSource("127.0.0.1", port, retries=0, timeout=10.0)
    OPEN_SOURCES.append(source)
    got = journal_result(journal, source)
    assert got.rejected == [] and len(got.trades) == 1  # the position, closed at the end in the report
