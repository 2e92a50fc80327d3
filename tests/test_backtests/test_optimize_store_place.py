"""A study store that cannot be written where it is asked for is refused before the first pass runs: a
pass is kept only once written, so finding out at the first batch would lose the passes that ran. Real
files and folders, the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backtests.optimize import optimize
from backtests.optimize.errors import StoreError, StorePermissionError
from datafeeds import load_candles
from neuronet.errors import NeuronetError
from strategies import SmaCrossEA

SPACE = {"fast": [3, 5], "slow": [20, 30]}
AS_ROOT = pytest.mark.skipif(
    os.geteuid() == 0, reason="permission case: root may write any file, so only an ordinary user is refused"
)


@pytest.fixture(scope="module")
def candles():
    return load_candles("synthetic", bars=300, seed=21)


def _counting(marker: Path) -> type:
    """``SmaCrossEA`` that leaves a line in ``marker`` at each pass's start (passes run in this process)."""

    class Counted(SmaCrossEA):
        def on_init(self):
            with open(marker, "a") as out:
                out.write("pass\n")
            super().on_init()

    return Counted


def _refused(candles, tmp_path: Path, store: Path, family: type, words: str) -> None:
    marker = tmp_path / "passes.txt"
    with pytest.raises(family, match=words) as caught:
        optimize(candles, _counting(marker), SPACE, workers=0, store_path=str(store))
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, NeuronetError)
    assert str(store) in str(caught.value) and "\n" not in str(caught.value)
    assert not marker.exists(), "passes ran before the store was refused"


def test_a_store_whose_folder_is_a_file_is_refused_before_any_pass(candles, tmp_path):
    (tmp_path / "file").write_text("x")
    for store in (tmp_path / "file" / "study.db", tmp_path / "file" / "deeper" / "study.db"):
        _refused(candles, tmp_path, store, NotADirectoryError, r"cannot be made, .*file is not a folder")
    assert (tmp_path / "file").read_text() == "x"


@AS_ROOT
def test_a_new_store_in_a_folder_that_cannot_be_written_is_refused_before_any_pass(candles, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        _refused(candles, tmp_path, folder / "study.db", StorePermissionError, r"cannot be made in .*locked")
        _refused(candles, tmp_path, folder / "new" / "study.db", PermissionError, r"cannot be made in")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


@AS_ROOT
def test_a_read_only_store_file_or_its_read_only_folder_is_refused_before_any_pass(candles, tmp_path):
    folder = tmp_path / "kept"
    folder.mkdir()
    store = folder / "study.db"
    assert len(optimize(candles, SmaCrossEA, {"fast": [3], "slow": [20]}, workers=0, store_path=str(store)))
    before = store.read_bytes()
    store.chmod(0o444)
    _refused(candles, tmp_path, store, StorePermissionError, r"the file cannot be written")
    store.chmod(0o644)
    folder.chmod(0o500)  # SQLite could not write its journal next to the file
    try:
        _refused(candles, tmp_path, store, StorePermissionError, r"its folder .*kept cannot be written")
    finally:
        folder.chmod(0o700)
    assert store.read_bytes() == before


def _neuronet(store: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neuronet", "optimize", "sma", "-p", "fast=3,5", "--to", "2017-06-01",
         "--workers", "0", "--store", str(store), "--out", str(cwd / "o")],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _one_line(res: subprocess.CompletedProcess, store: Path) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(store) in lines[0], res.stderr


def test_a_store_under_a_file_is_one_line_and_status_2_on_the_command_line(tmp_path):
    (tmp_path / "file").write_text("x")
    store = tmp_path / "file" / "study.db"
    _one_line(_neuronet(store, tmp_path), store)
    assert not (tmp_path / "o").exists()


@AS_ROOT
def test_a_store_in_a_locked_folder_is_one_line_and_status_2_on_the_command_line(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        store = folder / "study.db"
        _one_line(_neuronet(store, tmp_path), store)
    finally:
        folder.chmod(0o700)
