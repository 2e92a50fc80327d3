"""``neuronet optimize``'s report folder and a real Ctrl-C: a finished report is never replaced without
``--force``, default folders of different commands never collide, and a study interrupted by SIGINT and
resumed writes the report of a run never interrupted, pass for pass."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd

from neuronet.cli import main

GRID = ["-p", "fast=5:15:5", "-p", "slow=20,30", "--to", "2017-06-01", "--workers", "0", "--no-progress"]


def run(capsys, *args: str, ea_arg: str = "sma") -> tuple[int, str, str]:
    """``neuronet optimize EA ARGS...`` in this process: exit status, stdout, stderr."""
    try:
        main(["optimize", ea_arg, *args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_finished_report_is_not_replaced_without_force(tmp_path, capsys):
    out = tmp_path / "opt"
    code, _, err = run(capsys, *GRID, "--out", str(out))
    assert code == 0, err
    page = (out / "report.html").read_bytes()
    for other in (["--method", "random", "--passes", "2"], ["--source", "synthetic"], []):  # refused first
        code, _, err = run(capsys, *GRID, *other, "--out", str(out))
        assert code == 2 and "--out" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert (out / "report.html").read_bytes() == page
    code, _, err = run(capsys, *GRID, "--method", "random", "--passes", "2", "--out", str(out), "--force")
    assert code == 0, err
    assert len(pd.read_csv(out / "results.csv")) == 2


def test_an_empty_range_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, *GRID, "--source", "synthetic", "--out", str(tmp_path / "o"))  # before 2020
    assert code == 2 and "0 bars" in err and len(err.strip().splitlines()) == 1, err


def test_the_out_folder_is_checked_before_the_data_is_read(tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = run(capsys, *GRID, "--csv", str(tmp_path / "missing.csv"), "--out", str(out))
    assert code == 2 and "--out" in err and "missing.csv" not in err
    assert (out / "notes.txt").read_text() == "mine"


def test_default_folders_of_different_commands_differ_and_the_same_command_finds_its_own(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, *GRID)[0] == 0
    synthetic = ["--source", "synthetic", "--from", "2020-01-01", "--to", "2020-05-01"]  # EURUSD H1 too
    assert run(capsys, *GRID, *synthetic)[0] == 0
    assert run(capsys, *GRID, "--method", "random", "--passes", "3")[0] == 0
    folders = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert len(folders) == 3 and all(f.startswith("optimize-SmaCrossEA-EURUSD-H1-") for f in folders)
    assert sum("-random-" in f for f in folders) == 1
    code, _, err = run(capsys, *GRID)  # the same command again: its own folder, finished
    assert code == 2 and "--force" in err
    code, stdout, err = run(capsys, *GRID, "--force")
    assert code == 0 and "passes run now: 0; already in the study store: 6" in stdout, err
    assert len(list((tmp_path / "reports").iterdir())) == 3


SLOW_EA = """
import time
from strategies import SmaCrossEA

class Slow(SmaCrossEA):
    def on_init(self):
        time.sleep(0.03)
        super().on_init()
"""


def _trials(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return con.execute("select count(*) from trials").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_sigint_mid_study_then_resume_writes_the_uninterrupted_report(tmp_path, capsys):
    """A real process, a real SIGINT while TPE passes run; the same command then resumes in the same
    folder (only the study store is there) and writes the report of a run never stopped."""
    (tmp_path / "slow_ea.py").write_text(textwrap.dedent(SLOW_EA))
    ea = f"{tmp_path / 'slow_ea.py'}:Slow"
    common = ["optimize", ea, "-p", "fast=2:40", "-p", "slow=20:60:5", "--method", "tpe", "--passes", "32",
              "--seed", "3", "--to", "2017-05-03", "--workers", "0", "--no-progress"]  # fmt: skip
    code, _, err = run(capsys, *common[2:], "--out", str(tmp_path / "whole"), ea_arg=ea)  # never stopped
    assert code == 0, err
    out = tmp_path / "cut"
    cmd = [sys.executable, "-m", "neuronet", *common, "--out", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _trials(out / "study.db") < 10 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    kept = _trials(out / "study.db")
    assert 10 <= kept < 32 and not (out / "report.html").exists()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"passes run now: {32 - kept}; already in the study store: {kept}" in again.stdout
    a, b = pd.read_csv(out / "results.csv"), pd.read_csv(tmp_path / "whole" / "results.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


_MEANWHILE = '''
import os, subprocess, sys
from strategies import SmaCrossEA


class Meanwhile(SmaCrossEA):
    """SmaCrossEA whose first pass waits for another whole ``neuronet optimize`` on the same ``--out``
    (with its own ``--store``): a second run that finishes while this one is still running."""

    def on_init(self):
        flag = os.environ["MEANWHILE_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            subprocess.run(os.environ["MEANWHILE_CMD"].split("\\x1f"), check=True)
        super().on_init()
'''


def test_a_report_another_run_wrote_meanwhile_in_the_same_folder_is_not_replaced(
    tmp_path, capsys, monkeypatch
):
    """Two optimisations on one ``--out`` with different stores: the first saw an empty folder, the second
    (started while the first ran) saw only the first's study store, which does not count. The one that
    finishes last must not write over the other's finished report."""
    out = tmp_path / "opt"
    ea = tmp_path / "meanwhile.py"
    ea.write_text(_MEANWHILE)
    other = [sys.executable, "-m", "neuronet", "optimize", "SmaCrossEA", *GRID, "--method", "random",
             "--passes", "2", "--out", str(out), "--store", str(tmp_path / "other.db")]  # fmt: skip
    monkeypatch.setenv("MEANWHILE_FLAG", str(tmp_path / "started"))
    monkeypatch.setenv("MEANWHILE_CMD", "\x1f".join(other))
    code, _, err = run(capsys, *GRID, "--out", str(out), ea_arg=f"{ea}:Meanwhile")
    assert len(pd.read_csv(out / "results.csv")) == 2  # the other run's report stands
    assert code == 2 and "--out" in err and "--force" in err and len(err.strip().splitlines()) == 1, err
    assert "finished passes are kept" in err  # the study is there to write the report later (--force)
