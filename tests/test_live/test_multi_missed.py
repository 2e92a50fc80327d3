"""Bars of a multi-symbol run that closed while it was stopped: processed in order at their own opens, or
with ``skip_missed`` skipped (entered on the account, no ``on_bar``), as for one symbol; the option was
silently ignored for several symbols."""

from __future__ import annotations

from test_live.test_multi_runner import Basket, multi_runner

from neuronet.live.journal import read_journal
from neuronet.live.report import journal_result


def _resumed_after_three_bars_down(port, sim, journal, **settings):
    multi_runner(port, sim, journal, ea=Basket, params={}, max_bars=4).run()
    sim.market.advance(3 * 3600)  # the runner is down for three bars
    return multi_runner(port, sim, journal, ea=Basket, params={}, max_bars=5, **settings).run()


def test_a_multi_symbol_run_skips_missed_bars_when_told_to(mt5_server, sim, tmp_path):
    journal = tmp_path / "skip.jsonl"
    summary = _resumed_after_three_bars_down(mt5_server[1], sim, journal, skip_missed=True)
    assert summary.resumed and summary.skipped == 3 and summary.missed == 0
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    after = recs[resumed:]
    skipped = [r["bar"] for r in after if r["type"] == "warning" and "skipped" in r["message"]]
    closed = [r["bar"] for r in after if r["type"] == "bar"]
    decided = {r["bar"] for r in after if r["type"] == "decision"}
    assert skipped == closed[:3] and not decided & set(skipped)  # the three missed bars: no on_bar
    assert closed == list(range(closed[0], closed[0] + 5))  # nothing repeated, nothing lost
    assert summary.decisions == len(decided) >= 1
    journal_result(journal)  # the journal still rebuilds


def test_a_multi_symbol_run_processes_missed_bars_by_default(mt5_server, sim, tmp_path):
    journal = tmp_path / "missed.jsonl"
    summary = _resumed_after_three_bars_down(mt5_server[1], sim, journal)
    assert summary.missed == 3 and summary.skipped == 0
    recs = read_journal(journal)
    resumed = next(i for i, r in enumerate(recs) if r["type"] == "resume")
    closed = [r["bar"] for r in recs[resumed:] if r["type"] == "bar"]
    decided = [r["bar"] for r in recs[resumed:] if r["type"] == "decision"]
    assert closed[:3] == decided[:3]
