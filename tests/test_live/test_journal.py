"""The journal: one fsynced JSON line per record; a crash's cut last line tolerated, garbage refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from neuronet.live.errors import JournalError
from neuronet.live.journal import JOURNAL_VERSION, Journal, json_ready, read_journal


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
    got = json_ready({"a": np.int64(3), "b": float("nan"), "c": [np.float32(0.5)], "d": math.inf, "e": None})
    assert got == {"a": 3, "b": "nan", "c": [0.5], "d": "inf", "e": None}
    json.dumps(got, allow_nan=False)


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


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(JournalError, match="does not exist"):
        read_journal(tmp_path / "nope.jsonl")
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage\n")
    with pytest.raises(JournalError, match="line 1: not JSON"):
        read_journal(path)


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
    pytest.importorskip("fcntl")
    path = tmp_path / "j.jsonl"
    with Journal(path), pytest.raises(JournalError, match="in use by another run"):
        Journal(path)
    with Journal(path) as j:  # free again once the first is closed
        j.write("stop", reason="test")
