"""A live journal belongs to the trading account it was written on. Resumed on another account (the same
command after switching the terminal from the demo to the real account, say), the run would carry the first
account's halt and unresolved requests over, and its report would score one account's deals against the
other's deposit: both are refused in one line."""

from __future__ import annotations

import pytest
from test_live.test_account_report import live_run, source

from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.report import journal_result


def test_a_live_journal_resumed_on_another_account_is_refused(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, bars=3)
    (account,) = [r for r in read_journal(journal) if r["type"] == "account"]
    assert (account["login"], account["server"]) == (5012345, "Simulated-Demo")
    size = journal.stat().st_size
    sim.state.account_login, sim.state.account_server = 777, "Real-Live"
    sent = sim.state.call_count("order_send")
    with pytest.raises(JournalError, match=r"account 5012345 \(Simulated-Demo\).*777 \(Real-Live\)"):
        live_run(port, sim, journal, bars=3)
    assert sim.state.call_count("order_send") == sent and journal.stat().st_size == size  # untouched
    with pytest.raises(JournalError, match=r"account 5012345 \(Simulated-Demo\).*777 \(Real-Live\)"):
        journal_result(journal, source(port))
    sim.state.account_login, sim.state.account_server = 5012345, "Simulated-Demo"
    live_run(port, sim, journal, bars=2)  # the account it was written on resumes it
    assert journal.stat().st_size > size
    journal_result(journal, source(port))
