"""The journal: one fsynced JSON line per record; a crash's cut last line tolerated, garbage refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from neuronet.live.errors import JournalError
from neuronet.live.journal import JOURNAL_VERSION, Journal, JournalRecords, json_ready, read_journal


def _start(path):
    with Journal(path) as j:
        j.write("start", version=JOURNAL_VERSION, ea="X")
        j.write("bar", bar=1, time=pd.Timestamp("2024-03-07 08:00", tz="UTC"), close=np.float64(1.5))


def test_records_round_trip_as_json_lines(tmp_path):
    path = tmp_path / "j.jsonl"
    _start(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)
    records = read_journal(path)
    assert [r["type"] for r in records] == ["start", "bar"]
    assert records[1]["time"] == "2024-03-07T08:00:00+00:00" and records[1]["close"] == 1.5
    assert records[1]["_line"] == 2


def test_json_ready_takes_numpy_nan_and_times():
    got = json_ready({"a": np.int64(3), "b": float("nan"), "c": [np.float32(0.5)], "d": -math.inf, "e": None})
    assert got == {"a": 3, "b": {"$float": "nan"}, "c": [0.5], "d": {"$float": "-inf"}, "e": None}
    json.dumps(got, allow_nan=False)


def test_every_value_written_reads_back(tmp_path):
    """``buy(nan)`` was journaled as the text "nan", and the journal could never be replayed."""
    path = tmp_path / "j.jsonl"
    values = [
        math.nan,
        math.inf,
        -math.inf,
        np.float64("nan"),
        1e308,
        5e-324,
        10**30,
        -(2**70),
        -0.0,
        0.1,
        "nan",
        "inf",
        "日本語 \u2028 line\nbreak \ud800",
        {"$float": "nan", "other": 1},
        [],
        {},
        True,
    ]
    with Journal(path) as j:
        j.write("start", ea="X")
        j.write("request", call="order", args=values)
    assert path.read_bytes().isascii() and len(path.read_bytes().splitlines()) == 2
    got = read_journal(path)[1]["args"]
    assert len(got) == len(values)
    for a, b in zip(got, values, strict=True):
        if isinstance(b, float) and math.isnan(b):
            assert isinstance(a, float) and math.isnan(a)
        else:
            assert a == b and type(a) is type(b if not isinstance(b, np.floating) else 1.0)
    assert math.copysign(1.0, got[8]) == -1.0


def test_a_last_line_cut_by_a_crash_is_ignored_and_repaired(tmp_path, caplog):
    path = tmp_path / "j.jsonl"
    _start(path)
    with open(path, "a") as f:
        f.write('{"type":"bar","bar":2,"clo')  # the process died mid-write
    assert [r["type"] for r in read_journal(path)] == ["start", "bar"]
    assert "cut short" in caplog.text
    with Journal(path) as j:  # appending again first cuts the broken tail off
        j.write("stop", reason="test")
    assert [r["type"] for r in read_journal(path)] == ["start", "bar", "stop"]


def test_garbage_inside_is_refused_with_its_line_number(tmp_path):
    path = tmp_path / "j.jsonl"
    _start(path)
    text = path.read_text().splitlines()
    path.write_text(text[0] + "\n" + "not json at all\n" + text[1] + "\n")
    with pytest.raises(JournalError, match="line 2: not JSON"):
        read_journal(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [('{"type": "launch"}', "line 2: unknown record 'launch'"), ("[1, 2]", "line 2: unknown record 'list'")],
)
def test_unknown_records_are_refused(tmp_path, line, message):
    path = tmp_path / "j.jsonl"
    _start(path)
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0], line, text[1]]) + "\n")
    with pytest.raises(JournalError, match=message):
        read_journal(path)


def test_a_journal_must_begin_with_a_start_of_this_version(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text('{"type": "bar", "bar": 1}\n')
    with pytest.raises(JournalError, match="line 1: a journal begins with a start record"):
        read_journal(path)
    path.write_text('{"type": "start", "version": 99}\n')
    with pytest.raises(JournalError, match="version 99"):
        read_journal(path)
    path.write_text('{"type": "start", "version": 1}\n{"type": "stop"}\n')  # JSON lines, not ours
    with pytest.raises(JournalError, match="line 1: a start record without the journal's format marker"):
        read_journal(path)


def test_a_journal_written_before_the_format_marker_is_still_read(tmp_path):
    path = tmp_path / "j.jsonl"
    head = {"type": "start", "version": 1, "ea": "X", "symbol": "EURUSD", "timeframe": "H1", "mode": "paper"}
    path.write_text(json.dumps({**head, "account": {}}) + "\n")
    with Journal(path) as j:
        j.write("stop", reason="test")
    assert [r["type"] for r in read_journal(path)] == ["start", "stop"]


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(JournalError, match="does not exist"):
        read_journal(tmp_path / "nope.jsonl")
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage\n")
    with pytest.raises(JournalError, match="line 1: not JSON"):
        read_journal(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "one incomplete line and no journal header"),
        (bytes(b for b in range(256) if b != 10) * 40, "one incomplete line and no journal header"),
        (b'{"type": "start", "format": "neuronet-jou', "one incomplete line and no journal header"),
        (b"token\nsecond line without newline", "line 1: not JSON"),
        (b"time,open\n2024-01-01,1\n", "line 1: not JSON"),
        (b'{"type": "start", "version": 1}\n{"type": "bar"', "without the journal's format marker"),
        (b"\n\n", "is empty"),
    ],
    ids=["token", "binary-blob", "cut-header", "two-lines", "csv", "foreign-jsonl", "blank"],
)
def test_a_file_that_is_not_a_journal_is_never_repaired_or_written(tmp_path, content, message):
    """A one-line token given as ``--journal`` (no newline) was truncated to nothing and overwritten: only
    a file whose first line is a journal's header is repaired or appended to."""
    path = tmp_path / "token.txt"
    path.write_bytes(content)
    with pytest.raises(JournalError, match=message):
        Journal(path)
    with pytest.raises(JournalError, match=message):
        read_journal(path)
    assert path.read_bytes() == content and not (tmp_path / "token.txt.lock").exists()


def test_a_complete_last_record_without_its_newline_is_read_and_kept(tmp_path):
    """The reader took a complete last record without its newline and the repair then cut it from disk;
    resumes and reports failed from then on ("bar 303 opens out of order"). Both now agree: it is a record,
    and the repair gives it its newline."""
    path = tmp_path / "j.jsonl"
    _start(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert [r["type"] for r in read_journal(path)] == ["start", "bar"]
    with Journal(path) as j:
        j.write("stop", reason="test")
    assert [r["type"] for r in read_journal(path)] == ["start", "bar", "stop"]
    assert path.read_bytes().count(b"\n") == 3


def test_a_last_line_that_is_json_but_no_record_is_refused_not_cut(tmp_path):
    path = tmp_path / "j.jsonl"
    _start(path)
    with open(path, "ab") as f:
        f.write(b'{"type": "launch"}')  # whole JSON, so no crash cut it: someone else's line
    with pytest.raises(JournalError, match="line 3: unknown record 'launch'"):
        read_journal(path)
    before = path.read_bytes()
    for _ in range(2):  # the refusal let go of the lock: the second try meets the same refusal
        with pytest.raises(JournalError, match="its last line is an unknown record 'launch'; not repaired"):
            Journal(path)
    assert path.read_bytes() == before


def test_a_journal_is_read_a_line_at_a_time(tmp_path):
    """A year of ticks is a few hundred MB of journal: a resume or a report reads it with memory bounded by
    its longest line, not by the file (here 20,000 records, each read and dropped in turn)."""
    import tracemalloc

    path = tmp_path / "j.jsonl"
    _start(path)
    record = {"type": "tick", "bar": 1, "time": "2024-03-07T08:00:00+00:00", "bid": 1.1, "ask": 1.1001}
    line = (json.dumps(record) + "\n").encode()
    with open(path, "ab") as f:
        f.write(line * 20_000)
    records = JournalRecords(path)
    tracemalloc.start()
    try:
        count = sum(1 for _ in records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_002
    assert peak < 20 * len(line) * 50  # the file is 20,000 lines; the reader held a few at a time
    assert sum(1 for _ in records) == count  # every pass reads the file again


def test_unknown_record_types_cannot_be_written(tmp_path):
    with Journal(tmp_path / "j.jsonl") as j, pytest.raises(ValueError, match="unknown journal record"):
        j.write("launch")


def test_a_journal_that_cannot_be_written_is_one_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(JournalError, match="cannot write it"):
        Journal(tmp_path / "file" / "j.jsonl")


def test_every_record_is_fsynced_as_it_is_written(tmp_path, monkeypatch):
    import os

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    with Journal(tmp_path / "j.jsonl") as j:
        for k in range(3):
            j.write("warning", message=f"m{k}")
            assert len(synced) == k + 1  # on disk before write returns


def test_one_writer_per_journal(tmp_path):
    path = tmp_path / "j.jsonl"
    with Journal(path), pytest.raises(JournalError, match="in use by another run"):
        Journal(path)
    with Journal(path) as j:  # free again once the first is closed
        j.write("stop", reason="test")


def test_a_journal_reached_through_a_symlink_takes_the_same_lock(tmp_path):
    """A second run on the same journal through a symlink interleaved its records with the first's."""
    path = tmp_path / "j.jsonl"
    (tmp_path / "link.jsonl").symlink_to(path)
    with Journal(path), pytest.raises(JournalError, match="in use by another run"):
        Journal(tmp_path / "link.jsonl")


@pytest.mark.parametrize("folder", ["same", "other"])
def test_a_journal_reached_through_a_hard_link_takes_the_same_lock(tmp_path, folder):
    """The lock was taken by path only: a hard link (another path to the same file, whose ``.lock`` is
    another file) let a second writer in, and two runs interleaved their records in one journal."""
    path = tmp_path / "j.jsonl"
    other = tmp_path / ("other" if folder == "other" else "") / "other.jsonl"
    other.parent.mkdir(exist_ok=True)
    with Journal(path) as j:
        j.write("start", ea="X")
        j.write("stop", reason="test")
        other.hardlink_to(path)
        before = path.read_bytes()
        with pytest.raises(JournalError, match="in use by another run"):
            Journal(other)
        assert path.read_bytes() == before
        j.write("stop", reason="still the one writer")
    with Journal(other) as j:  # free again once the first is closed
        j.write("stop", reason="through the link")
    assert [r.get("reason") for r in read_journal(path)] == [
        None,
        "test",
        "still the one writer",
        "through the link",
    ]


# A process that holds a journal open until its standard input closes; with NO_FCNTL it runs as on a system
# without fcntl (Windows has none): the lock must still be there.
_HOLDER = """
import os, sys
if os.environ.get("NO_FCNTL"):
    sys.modules["fcntl"] = None
import filelock
from neuronet.live.errors import JournalError
from neuronet.live.journal import Journal
try:
    journal = Journal(sys.argv[1])
except JournalError as exc:
    print("REFUSED", exc, flush=True)
    sys.exit(2)
print("HOLDING", type(filelock.FileLock(sys.argv[1] + ".probe")).__name__, flush=True)
sys.stdin.readline()
"""


def _holder(path, **env):
    import os
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("env", [{}, {"NO_FCNTL": "1"}], ids=["fcntl", "without-fcntl"])
def test_a_second_process_on_a_journal_is_refused_in_one_line(tmp_path, env):
    path = tmp_path / "j.jsonl"
    first = _holder(path, **env)
    try:
        word, kind = first.stdout.readline().split()
        assert word == "HOLDING" and (kind == "UnixFileLock") == (env == {})
        second = _holder(path, **env)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 2 and out.startswith("REFUSED") and "in use by another run" in out
        assert out.count("\n") == 1
    finally:
        first.communicate("\n", timeout=60)
    third = _holder(path, **env)  # the first one's lock went with it
    assert third.stdout.readline().startswith("HOLDING")
    third.communicate("\n", timeout=60)


@pytest.mark.parametrize("env", [{}, {"NO_FCNTL": "1"}], ids=["fcntl", "without-fcntl"])
def test_a_second_process_through_a_hard_link_is_refused_where_the_system_has_fcntl(tmp_path, env):
    """Two processes, one journal file under two names. Without ``fcntl`` (as on Windows) only the lock
    beside each path holds, and a hard link is another path: the README says so, and this shows it."""
    path, link = tmp_path / "j.jsonl", tmp_path / "elsewhere" / "j.jsonl"
    link.parent.mkdir()
    first = _holder(path, **env)
    try:
        assert first.stdout.readline().startswith("HOLDING")
        link.hardlink_to(path)
        second = _holder(link, **env)
        if env:
            assert second.stdout.readline().startswith("HOLDING")  # not covered there (documented)
            second.communicate("\n", timeout=60)
        else:
            out, _ = second.communicate(timeout=60)
            assert second.returncode == 2 and out.startswith("REFUSED") and "in use by another run" in out
            assert "hard link" in out and out.count("\n") == 1
    finally:
        first.communicate("\n", timeout=60)
    third = _holder(link, **env)  # the first one's locks went with it
    assert third.stdout.readline().startswith("HOLDING")
    third.communicate("\n", timeout=60)


def test_a_writer_killed_through_one_name_leaves_the_journal_free_under_another(tmp_path):
    """The lock on the file goes with the process (the system releases it), so a killed run is resumed
    through any of the file's names."""
    path, link = tmp_path / "j.jsonl", tmp_path / "link.jsonl"
    first = _holder(path)
    assert first.stdout.readline().startswith("HOLDING")
    link.hardlink_to(path)
    first.kill()
    first.communicate(timeout=60)
    second = _holder(link)
    assert second.stdout.readline().startswith("HOLDING")
    second.communicate("\n", timeout=60)


def test_a_resume_through_a_hard_link_while_the_run_holds_the_journal_is_refused(port, sim, tmp_path):
    """A run holds its journal (another process); the same run started again under a second name of that
    file (a hard link) would resume it and write beside the first: refused, nothing written. Once the
    first has stopped, the hard link resumes the journal as the path would."""
    from test_live.live_support import runner

    path, link = tmp_path / "run.jsonl", tmp_path / "again.jsonl"
    runner(port, sim, path, max_bars=2).run()
    link.hardlink_to(path)
    before = path.read_bytes()
    first = _holder(path)
    try:
        assert first.stdout.readline().startswith("HOLDING")
        with pytest.raises(JournalError, match="in use by another run"):
            runner(port, sim, link, max_bars=2).run()
        assert path.read_bytes() == before
    finally:
        first.communicate("\n", timeout=60)
    assert runner(port, sim, link, max_bars=2).run().resumed
    records = read_journal(path)
    assert [r["type"] for r in records].count("resume") == 1 and records[0] == read_journal(link)[0]
    assert path.read_bytes().startswith(before)


def test_neuronet_live_on_a_journal_in_use_is_one_line_and_status_2(tmp_path):
    from test_live.test_cli_live import neuronet

    path = tmp_path / "j.jsonl"
    first = _holder(path)
    try:
        assert first.stdout.readline().startswith("HOLDING")
        res = neuronet("live", "SmaCrossEA", "--journal", str(path), "-o", "port=1", cwd=tmp_path)
    finally:
        first.communicate("\n", timeout=60)
    assert res.returncode == 2 and "is in use by another run; stop it first" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_neuronet_live_on_a_hard_link_of_a_journal_in_use_is_one_line_and_status_2(tmp_path):
    from test_live.test_cli_live import neuronet

    path, link = tmp_path / "j.jsonl", tmp_path / "link.jsonl"
    first = _holder(path)
    try:
        assert first.stdout.readline().startswith("HOLDING")
        link.hardlink_to(path)
        res = neuronet("live", "SmaCrossEA", "--journal", str(link), "-o", "port=1", cwd=tmp_path)
    finally:
        first.communicate("\n", timeout=60)
    assert res.returncode == 2 and "is in use by another run" in res.stderr and "stop it first" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_record_too_long_to_be_read_back_is_never_written(port, sim, tmp_path, monkeypatch):
    """``--history 0`` on a terminal holding millions of M1 bars made a history line longer than the reader
    takes (256 MiB): the run wrote a journal it could never resume or report. Here scaled down."""
    from test_live.live_support import runner

    import neuronet.live.journal as journal_module

    monkeypatch.setattr(journal_module, "MAX_LINE", 2**16)  # 3,000 bars of history are about 175 KB
    path = tmp_path / "run.jsonl"
    with pytest.raises(JournalError, match=r"history record of 0\.\d MiB.*give a smaller --history"):
        runner(port, sim, path, history_bars=3000, max_bars=2).run()
    assert path.read_bytes() == b""  # no start without its history: the same command can begin afresh
    runner(port, sim, path, history_bars=300, max_bars=2).run()
    runner(port, sim, path, history_bars=300, max_bars=2).run()  # written, so read back and resumed
    assert len([r for r in read_journal(path) if r["type"] == "resume"]) == 1


def test_a_run_that_fails_before_its_start_record_leaves_a_journal_that_begins_afresh(port, sim, tmp_path):
    """A terminal that was down at the first start left a journal holding one ``stop`` record, and every
    later run of the same command was refused ("a journal begins with a start record")."""
    from test_live.live_support import runner

    from datafeeds.terminal_errors import TerminalConnectionError

    path = tmp_path / "run.jsonl"
    with pytest.raises(TerminalConnectionError):
        runner(1, sim, path, max_bars=2).run()  # nothing listens on port 1
    assert path.read_bytes() == b""
    runner(port, sim, path, max_bars=2).run()  # the terminal is up now: the same journal begins
    assert read_journal(path)[0]["type"] == "start"
