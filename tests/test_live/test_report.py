"""``neuronet live report``'s library side: a paper journal scored as a backtest; edited journals refused."""

from __future__ import annotations

import json

import pytest
from test_live.live_support import runner

from backtests.report import write_report
from neuronet.live.errors import JournalError
from neuronet.live.report import journal_result


@pytest.fixture
def journal(port, sim, tmp_path):
    path = tmp_path / "run.jsonl"
    runner(port, sim, path, max_bars=30).run()
    return path


def test_the_report_files_of_a_backtest_are_written(journal, tmp_path):
    result = journal_result(journal)
    page = write_report(result, tmp_path / "rep")
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert page.name == "report.html" and (tmp_path / "rep" / "trades.csv").exists()
    assert doc["ea"]["class"] == "SmaCrossEA" and doc["data"]["model"] == "live"
    assert doc["complete"] is True and doc["periods"]["forward_start"] == 300
    assert doc["stats"]["total_trades"] == len(doc["trades"]) >= 1


def test_an_edited_result_is_refused_with_its_line(journal):
    lines = journal.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if '"type":"result"' in line and '"call":"order"' in line)
    record = json.loads(lines[k])
    record["value"] = 999
    lines[k] = json.dumps(record)
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=f"line {k + 1}: the paper account answers"):
        journal_result(journal)


def test_bars_out_of_order_are_refused(journal):
    lines = journal.read_text().splitlines()
    k = [i for i, line in enumerate(lines) if '"type":"bar"' in line][3]
    del lines[k]
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=r"opens out of order|closes out of order"):
        journal_result(journal)


def test_a_live_account_journal_is_not_reported_from(journal):
    lines = journal.read_text().splitlines()
    start = json.loads(lines[0])
    start["mode"] = "live"
    journal.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    with pytest.raises(JournalError, match="'live' run"):
        journal_result(journal)


def test_a_journal_without_history_is_refused(tmp_path, journal):
    path = tmp_path / "short.jsonl"
    path.write_text(journal.read_text().splitlines()[0] + "\n")
    with pytest.raises(JournalError, match="no history record"):
        journal_result(path)
