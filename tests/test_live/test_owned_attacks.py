"""Attacks on what a live run knows of its positions without the terminal's history (the journal's "owned"
notes), on the report of a position carried into a run, and on the paper fill's fresh quote: each class of
the live side tried once (a terminal clock in another zone and across daylight saving, a reply lost after a
timeout, a second process reading the journal while it is written, a resume after a crash mid-write)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_live.live_support import MAGIC, backtest_of, runner, same_frames
from test_live.test_account_report import live_run, source
from test_live.test_day_pnl_lost_history import (
    EVENING,
    LOSS_100,
    MIDNIGHT,
    _BuyWhenFlat,
    _cut_history_and_close,
    _day_open_bid,
)
from test_live.test_report_carried_in import _carry_in_and_close

from datafeeds.terminal_errors import TerminalError
from neuronet.live.journal import read_journal
from neuronet.live.owned import owned_in
from neuronet.live.report import journal_result
from neuronet.live.terminal_trade import TerminalTrade

TODAY = MIDNIGHT // 86400  # 2024-03-08, a server day of the simulated terminal's UTC+2 clock


def _notes(journal, event):
    return [r["terminal"] for r in read_journal(journal) if (r.get("terminal") or {}).get("event") == event]


# -- whose clock ---------------------------------------------------------------------------------------------
def test_a_paper_run_across_the_daylight_saving_change_takes_every_fresh_quote(port, sim, tmp_path):
    """From Friday 2024-03-08 20:00 (broker, UTC+2) over the weekend to Monday (UTC+3 once New York is on
    summer time): every bar's quote is stamped at its open in the broker's clock, read with the same clock
    as the bars, so none is refused as stale and every bar is decided at its own quote; the paper run
    equals the backtest of the same bars."""
    sim.market.set_now("2024-03-08 20:00")
    journal = tmp_path / "paper.jsonl"
    runner(port, sim, journal, max_bars=8).run()
    said = [r["message"] for r in read_journal(journal) if r["type"] == "warning"]
    assert not any("stale" in m for m in said), said
    opens = [r for r in read_journal(journal) if r["type"] == "open"]
    assert len(opens) >= 8 and not any(r["missed"] for r in opens)
    days = {pd.Timestamp(r["time"]).day for r in opens}
    assert {8, 10} <= days, days  # decided on both sides of the change (Friday's bars, Sunday night's UTC)
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


def test_the_day_of_a_carried_close_is_the_servers_not_utcs(port, sim, tmp_path):
    """The position bought at 22:00 broker time (20:00 UTC, the same UTC day as the close) is carried over
    the server's midnight: today's part of its close is counted from the bid at 00:00 server time, not
    its whole profit (which a UTC day would take)."""
    sim.market.set_now(EVENING)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)
    sim.market.set_now("2024-03-08 00:30")
    _cut_history_and_close(sim, -40)
    (closing,) = [d for d in sim.state.book.deals if int(d.entry) == 1]
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    trade.restore_owned(owned_in(read_journal(journal), journal).values())
    got = trade.day_pnl(TODAY)
    since_midnight = 100_000 * (float(closing.price) - _day_open_bid(sim))
    assert got.unknown == () and got.value == pytest.approx(since_midnight, abs=0.01)
    assert abs(float(closing.profit) - since_midnight) > 1.0  # the two readings differ here


def test_a_carried_entry_is_shown_at_its_utc_time(port, sim, tmp_path):
    """The carried position's entry, at 10:00 broker time (UTC+2), is shown at 08:00 UTC in the report's
    trades, as every time of the report is."""
    journal, entry, _ = _carry_in_and_close(port, sim, tmp_path, cut=False)
    got = journal_result(journal, source(port))
    shown = pd.Timestamp(got.trades["entry_time"].iloc[0])
    assert shown == pd.Timestamp(int(entry.time), unit="s", tz="UTC") - pd.Timedelta(hours=2)


# -- unknown outcomes ----------------------------------------------------------------------------------------
def test_a_position_whose_reply_was_lost_is_owned_once_it_shows(port, sim, tmp_path):
    """The buy executes and its reply is lost (10012, looked up: recovered). The run owns the position it
    sees open, whatever its reply said: closed by hand on the next server day with the terminal's history
    cut, today's P&L is known, and nothing was sent twice."""
    sim.market.set_now(EVENING)
    sim.state.book.configure(lost_replies=(-10005,))
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=2)
    assert sim.state.call_count("order_send") == 1 and len(sim.state.book.positions) == 1
    (position,) = sim.state.book.positions
    assert int(position) in owned_in(read_journal(journal), journal)
    sim.market.set_now("2024-03-08 00:30")
    _cut_history_and_close(sim, -40)
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    trade.restore_owned(owned_in(read_journal(journal), journal).values())
    assert trade.day_pnl(TODAY).unknown == ()


def test_a_report_whose_position_look_up_fails_stops_rather_than_leave_the_close_out(port, sim, tmp_path):
    """The terminal drops the link while the report reads a carried position's opening deal: the report
    fails with the terminal's error (one line on the command line); it never goes on without that close."""
    journal, _, _ = _carry_in_and_close(port, sim, tmp_path, cut=False)
    sim.fail("history_deals_get", 2)  # the span's deals are read, then the position's: dropped
    with pytest.raises(TerminalError):
        journal_result(journal, source(port))


# -- a second process reading ----------------------------------------------------------------------------
def test_a_report_read_while_the_note_is_being_written_falls_back_on_the_terminal(port, sim, tmp_path):
    """Another process (``neuronet live report``) reads the journal while the run writes: its last line
    is an "owned" note still half written. The reader leaves the cut line out; the carried position's
    owner and entry then come from the terminal's history, and the figures are those of the whole
    journal."""
    journal, _, closing = _carry_in_and_close(port, sim, tmp_path, cut=False)
    whole = journal_result(journal, source(port))
    lines = journal.read_text().splitlines(keepends=True)
    note = next(i for i, x in enumerate(lines) if '"event":"owned"' in x)
    journal.write_text("".join(lines[:note] + lines[note + 1 :]) + lines[note][: len(lines[note]) // 2])
    assert not owned_in(read_journal(journal), journal)
    got = journal_result(journal, source(port))
    assert got.trades["profit"].sum() == pytest.approx(whole.trades["profit"].sum())
    assert got.trades["profit"].sum() == pytest.approx(float(closing.profit), abs=0.01)


# -- a resume after a crash mid-write ------------------------------------------------------------------------
def test_a_crash_while_the_note_is_written_is_made_good_by_the_resumed_run(port, sim, tmp_path):
    """The run is killed while it writes its first "owned" note (the journal ends in half of it). The
    resumed run drops the cut line, sees the position again and journals it once more; then, closed by
    hand on the next server day with the history cut, the position is still known. Nothing is sent twice."""
    sim.market.set_now(EVENING)
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=2)
    lines = journal.read_text().splitlines(keepends=True)
    note = next(i for i, x in enumerate(lines) if '"event":"owned"' in x)
    journal.write_text("".join(lines[:note]) + lines[note][: len(lines[note]) // 2])
    assert not owned_in(read_journal(journal), journal)
    sent = sim.state.call_count("order_send")
    live_run(port, sim, journal, ea=_BuyWhenFlat, params={}, limits=LOSS_100, bars=1)
    assert sim.state.call_count("order_send") == sent  # it holds its position: nothing new sent
    assert len(_notes(journal, "owned")) == 1
    sim.market.set_now("2024-03-08 00:30")
    _cut_history_and_close(sim, -40)
    src = source(port)
    trade = TerminalTrade(src, "EURUSD", magic=MAGIC, clock=src.clock)
    trade.restore_owned(owned_in(read_journal(journal), journal).values())
    assert trade.day_pnl(TODAY).unknown == ()


# -- a damaged note ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        {"position": "x", "magic": 1, "side": 1, "time": 1, "price_open": 1.1},
        {"position": 7, "magic": 1, "side": 5, "time": 1, "price_open": 1.1},
        {"position": 0, "magic": 1, "side": 1, "time": 1, "price_open": 1.1},
        {"magic": 1, "side": 1, "time": 1, "price_open": 1.1},
    ],
)
def test_a_damaged_owned_note_is_refused_by_its_line_never_taken_as_none(bad):
    from neuronet.live.errors import JournalError
    from neuronet.live.owned import owned_of

    with pytest.raises(JournalError, match=r"j\.jsonl line 9: an owned note cannot be read"):
        owned_of({"event": "owned", **bad}, "journal j.jsonl line 9")
    assert owned_of({"event": "result", **bad}) is None  # another note: not an owned one


def test_a_report_of_a_journal_with_a_damaged_owned_note_names_its_line(port, sim, tmp_path):
    from neuronet.live.errors import JournalError

    journal, _, _ = _carry_in_and_close(port, sim, tmp_path, cut=False)
    lines = journal.read_text().splitlines(keepends=True)
    note = next(i for i, x in enumerate(lines) if '"event":"owned"' in x)
    lines[note] = lines[note].replace('"side":1', '"side":5')
    journal.write_text("".join(lines))
    with pytest.raises(JournalError, match=f"line {note + 1}: an owned note cannot be read"):
        journal_result(journal, source(port))
