"""A run's journal resumes and reports whatever was written into it and however a crash left its end; a
file that is not a journal is refused before the run touches it."""

from __future__ import annotations

import json

import pytest
from test_live.live_support import backtest_of, runner, same_frames
from test_live.test_cli_live import neuronet

from neuronet.live.errors import JournalError
from neuronet.live.journal import read_journal
from neuronet.live.report import journal_result
from strategies.sma import SmaCrossEA


class _NanFirst(SmaCrossEA):
    """SmaCrossEA that first asks for ``buy(nan)`` and ``sell(inf)`` (refused, 10014) with odd comments."""

    def on_bar(self) -> None:
        if not getattr(self, "asked", False):
            self.asked = True
            self.buy(float("nan"), comment="nan \u2028 日本")
            self.sell(float("inf"))
        super().on_bar()


def test_a_refused_buy_of_nan_is_journaled_so_that_the_journal_replays(port, sim, tmp_path):
    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, ea=_NanFirst, max_bars=4).run()
    asked = [r for r in read_journal(journal) if r["type"] == "result" and r.get("call") == "order"]
    assert [r["retcode"] for r in asked[:2]] == [10014, 10014]
    runner(port, sim, journal, ea=_NanFirst, max_bars=4).run()  # resumed: the requests made again agree
    bt, _ = backtest_of(journal, ea=_NanFirst)
    same_frames(journal_result(journal).trades, bt.trades)


def test_a_last_bar_record_without_its_newline_resumes_and_reports(port, sim, tmp_path):
    """The resume read the last bar record, the repair cut it, and the journal then said "bar 303 opens out
    of order" to every resume and report."""
    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, max_bars=5).run()
    lines = journal.read_bytes().splitlines(keepends=True)
    last_bar = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "bar")
    journal.write_bytes(b"".join(lines[:last_bar]) + lines[last_bar].rstrip(b"\n"))  # died before "\n"
    bars_before = sum(r["type"] == "bar" for r in read_journal(journal))
    runner(port, sim, journal, max_bars=3).run()
    records = read_journal(journal)
    assert sum(r["type"] == "bar" for r in records) == bars_before + 3
    bt, _ = backtest_of(journal)
    same_frames(journal_result(journal).trades, bt.trades)


@pytest.mark.parametrize(
    "content", [b"ghp_0123456789abcdefghijklmnop", b"\x89PNG\r\x1a\x00\x00"], ids=["token", "binary"]
)
def test_a_foreign_file_given_as_journal_is_refused_and_left_as_it_was(port, sim, tmp_path, content):
    path = tmp_path / "secret.txt"
    path.write_bytes(content)
    with pytest.raises(JournalError, match="not a neuronet journal"):
        runner(port, sim, path, max_bars=2).run()
    assert path.read_bytes() == content
    res = neuronet("live", "SmaCrossEA", "--journal", str(path), "-o", f"port={port}", cwd=tmp_path)
    assert res.returncode == 2 and "not a neuronet journal" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and path.read_bytes() == content


@pytest.mark.parametrize(
    "note", ['"garbage"', "[1]", '{"event": "unresolved"}', '{"event": "halted", "day": "x"}']
)
def test_a_terminal_record_of_the_wrong_shape_is_refused_with_its_line(port, sim, tmp_path, note):
    from neuronet.live.journal import JournalRecords
    from neuronet.live.rebuild import read_state

    journal = tmp_path / "run.jsonl"
    runner(port, sim, journal, max_bars=2).run()
    lines = len(read_journal(journal))
    with open(journal, "a") as f:
        f.write(f'{{"type": "request", "source": "terminal", "terminal": {note}}}\n')
    with pytest.raises(JournalError, match=f"line {lines + 1}: request record cannot be read"):
        read_state(str(journal), JournalRecords(journal), paper=False)
