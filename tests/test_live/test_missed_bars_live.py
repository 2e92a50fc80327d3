"""Bars that closed while a live run was stopped (or the terminal unreachable) are decided late. On paper a
late decision fills at its bar's open, as the backtest does; on a live account that price is gone, and the
terminal would fill every stale decision at once at the current price (a day's crossovers became eleven
deals in one second, each reversal paying the spread). So a request made at a missed bar is refused on a
live account (10021, "no quotes"): the EA's state catches up, the account is left as it was."""

from __future__ import annotations

from test_live.test_account_report import live_run

from neuronet.live.journal import read_journal


def test_a_live_run_sends_nothing_for_bars_decided_after_they_closed(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, bars=5)
    sent, deals = sim.state.call_count("order_send"), len(sim.state.book.deals)
    sim.market.advance(24 * 3600)  # stopped for a day (a Friday: the terminal quotes all along)
    live_run(port, sim, journal, bars=24)  # the day's 24 bars, decided late, and nothing more
    records = read_journal(journal)
    missed = {r["bar"] for r in records if r["type"] == "open" and r.get("missed")}
    assert len(missed) == 24
    results = [r for r in records if r["type"] == "result" and r.get("bar") in missed and "call" in r]
    assert results and all(r["value"] in (None, 0, False) and r["retcode"] == 10021 for r in results)
    refused = [r["terminal"] for r in records if (r.get("terminal") or {}).get("event") == "refused"]
    assert any("closed before it was decided on" in n["reason"] for n in refused)
    assert sim.state.call_count("order_send") == sent and len(sim.state.book.deals) == deals
