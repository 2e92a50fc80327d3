"""``datafeeds.files``: paths from user input stay inside their folder, the one atomic writer (permissions,
temporary files of killed writers)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from datafeeds.files import (
    UnsafePathError,
    atomic_write,
    atomic_write_json,
    inside,
    output_path,
    remove_stale,
    temp_files,
)
from datafeeds.store import CandleStore, write_npz


@pytest.mark.parametrize("part", ["../../X", "..", "/", "/etc", "a/../../b", "EUR\0USD", "", "  "], ids=repr)
def test_names_that_leave_the_folder_are_refused(tmp_path, part):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(UnsafePathError):
        inside(root, part)


def test_a_symlink_that_points_outside_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "EURUSD").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="outside the folder"):
        inside(root, "EURUSD", "H1.npz")
    assert inside(root, "GBPUSD", "H1.npz") == root / "GBPUSD" / "H1.npz"


def test_store_paths_refuse_traversal_and_nul(tmp_path):
    store = CandleStore(tmp_path)
    for symbol in ("../../X", "/", "EUR\0", ".hidden"):
        with pytest.raises(ValueError, match="store folder name"):
            store.path("mt5", symbol, "H1")
    with pytest.raises(ValueError, match="store folder name"):
        store.clear("mt5", "../../X")


def test_store_listing_and_clearing_skip_files_a_symlink_leads_outside(tmp_path, candles):
    root, outside = tmp_path / "cache", tmp_path / "outside"
    write_npz(outside / "H1.npz", candles(["2023-01-02 00:00"], [(1, 1, 1, 1)]))
    (root / "mt5").mkdir(parents=True)
    (root / "mt5" / "EURUSD").symlink_to(outside, target_is_directory=True)
    store = CandleStore(root)
    assert store.entries() == []
    store.clear()
    store.clear("mt5", "EURUSD")
    assert (outside / "H1.npz").is_file()


def test_written_files_get_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "out.csv", lambda f: f.write(b"x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_output_path_refuses_nul_and_folders(tmp_path):
    with pytest.raises(UnsafePathError, match="NUL"):
        output_path("out\0.csv")
    with pytest.raises(UnsafePathError, match="is a folder"):
        output_path(tmp_path)


_KILLED_WRITER = """
import os, sys
from datafeeds.files import atomic_write

def die(f):
    f.write(b"PK\\x03\\x04 half of a file")
    f.flush()
    os._exit(9)

atomic_write(sys.argv[1], die)
"""


def test_a_killed_writer_leaves_a_temp_file_no_reader_takes_for_data(tmp_path):
    target = tmp_path / "candles" / "mt5" / "EURUSD" / "H1.npz"
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(target)], timeout=60)
    assert proc.returncode == 9
    left = list(temp_files(target.parent))
    assert len(left) == 1 and not target.exists()
    store = CandleStore(tmp_path / "candles")
    assert store.entries() == [] and store.temp_files() == left
    assert remove_stale(target.parent) == []  # fresh: could be a live writer
    os.utime(left[0], (time.time() - 3600, time.time() - 3600))
    store.clear()
    assert store.temp_files() == [] and not (tmp_path / "candles" / "mt5").exists()


def test_json_is_strict_nan_and_inf_become_null(tmp_path):
    import json

    import numpy as np

    doc = {"mse": float("nan"), "mae": np.float32("inf"), "steps": np.arange(3), "ok": np.float64(0.5),
           "nested": [{"x": -float("inf")}], 7: True}  # fmt: skip
    path = atomic_write_json(tmp_path / "metrics.json", doc)
    text = path.read_text()
    strict = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert strict == {"mse": None, "mae": None, "steps": [0, 1, 2], "ok": 0.5, "nested": [{"x": None}],
                      "7": True}  # fmt: skip


@pytest.mark.parametrize(
    ("cell", "why"),
    [("inf", "is infinite"), ("-inf", "is infinite"), ("1e39", "overflows float32"), ("nan", "not a number")],
)
def test_a_table_with_inf_or_float32_overflow_names_row_and_column(cell, why):
    import numpy as np

    from datafeeds.errors import CandleDataError
    from datafeeds.tables import require_float32

    values = np.ones((5, 2))
    values[3, 1] = float(cell)
    with pytest.raises(CandleDataError, match=rf"data\.csv: row 5, column 'OT': .* {why}"):
        require_float32(values, ["HUFL", "OT"], "data.csv")
    require_float32(np.full((2, 2), 3.4e38), ["a", "b"], "fine.csv")


def test_read_csv_file_names_the_file_in_every_failure(tmp_path):
    from datafeeds.errors import DataError
    from datafeeds.files import read_csv_file

    good = tmp_path / "good.csv"
    good.write_text("date,x\n2020-01-01,1.5\n")
    assert read_csv_file(good)["x"].tolist() == [1.5]
    with pytest.raises(FileNotFoundError, match=r"missing\.csv: no such file"):
        read_csv_file(tmp_path / "missing.csv")
    with pytest.raises(IsADirectoryError, match="is a folder, not a table"):
        read_csv_file(tmp_path, "table")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty\.csv: not a readable CSV file"):
        read_csv_file(empty)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 50)
    with pytest.raises(DataError, match=r"binary\.csv: not a readable CSV file"):
        read_csv_file(binary)


@pytest.mark.parametrize("value", ["2021-02-30", "soon", "", None, [1, 2]])
def test_read_timestamp_returns_none_for_what_is_not_a_time(value):
    from datafeeds.clock import read_timestamp

    assert read_timestamp(value) is None


def test_read_timestamp_reads_a_time():
    import pandas as pd

    from datafeeds.clock import read_timestamp

    assert read_timestamp("2021-02-03 04:05") == pd.Timestamp("2021-02-03 04:05")


def test_an_atomic_write_never_replaces_a_device_or_a_pipe(tmp_path):
    """The write renames a temporary file over its target: ``data export --out /dev/null`` run by root
    would have replaced the device node with a CSV file."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(UnsafePathError, match="is not a regular file"):
        atomic_write(pipe, lambda f: f.write(b"x"))
    assert stat.S_ISFIFO(pipe.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]
