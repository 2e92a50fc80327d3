"""``neuronet optimize`` as a user runs it: real subprocesses, real files, Ctrl-C and resume.

The end-to-end runs take 10-20 s each on a busy 2-core machine (interpreter start, imports): marked slow.
"""

import subprocess
import sys
import textwrap

import pandas as pd
import pytest


def neuronet(*args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


GRID = ("-p", "fast=5:15:5", "-p", "slow=20,30", "--to", "2017-08-01")


@pytest.mark.slow
def test_grid_with_forward_writes_the_report_and_resumes(tmp_path):
    out = tmp_path / "opt"
    args = ("optimize", "sma", *GRID, "--forward", "1/3", "--workers", "0", "--out", str(out))
    res = neuronet(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "passes run now: 6; already in the study store: 0" in res.stdout
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 6 and table["forward_criterion"].notna().sum() == 6
    assert table["criterion"].is_monotonic_decreasing
    page = (out / "report.html").read_text()
    assert "Passes on the parameters" in page and "forward results" in page
    assert page.count('data-chart="passes"') == 1 and "<script src=" not in page
    refused = neuronet(*args, cwd=tmp_path)  # a finished report is replaced only with --force
    assert refused.returncode == 2 and "--force" in refused.stderr
    again = neuronet(*args, "--force", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "passes run now: 0; already in the study store: 6" in again.stdout
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv"), table)


@pytest.mark.slow
def test_walk_forward_from_the_command_line(tmp_path):
    out = tmp_path / "wf"
    res = neuronet(
        "optimize", "sma", "-p", "fast=5,10", "-p", "slow=20,40", "--walk-forward", "800,400", "--anchored",
        "--to", "2017-07-15", "--workers", "0", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "walk-forward: " in res.stdout and "efficiency" in res.stdout
    windows = pd.read_csv(out / "walk_forward.csv")
    assert len(windows) >= 2 and set(windows.columns) >= {"fast", "slow", "oos_net_profit", "is_net_profit"}
    equity = pd.read_csv(out / "oos_equity.csv", index_col=0, parse_dates=True)
    assert equity.index.is_monotonic_increasing and equity.index.is_unique
    assert equity.index[0] == pd.Timestamp(windows["test_first"].iloc[0])
    assert equity.index[-1] == pd.Timestamp(windows["test_last"].iloc[-1])
    stitched_profit = equity["equity"].iloc[-1] - 10_000.0
    assert stitched_profit == pytest.approx(windows["oos_net_profit"].sum(), abs=0.01)
    page = (out / "report.html").read_text()
    assert "Walk-forward analysis" in page and "Parameter stability" in page


@pytest.mark.slow
def test_ctrl_c_keeps_finished_passes_and_the_rerun_resumes(tmp_path):
    ea = tmp_path / "my_ea.py"
    ea.write_text(
        textwrap.dedent(
            """
            import os
            from strategies import SmaCrossEA

            class Stoppable(SmaCrossEA):
                started = [0]

                def on_init(self):
                    self.started[0] += 1
                    if os.environ.get("STOP_AT") == str(self.started[0]):
                        raise KeyboardInterrupt  # as Ctrl-C arriving during this pass
                    super().on_init()
            """
        )
    )
    out = tmp_path / "opt"
    grid = ("-p", "fast=4:20:4", "-p", "slow=30,40", "--to", "2017-07-01")  # 10 passes, 3 per task
    args = ("optimize", f"{ea}:Stoppable", *grid, "--workers", "0", "--out", str(out))
    env_stop = subprocess.run(
        [sys.executable, "-m", "neuronet", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**_env(), "STOP_AT": "8"},
    )  # fmt: skip
    assert env_stop.returncode == 130, env_stop.stderr
    assert "finished passes are kept" in env_stop.stderr
    res = neuronet(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("passes run now"))
    ran, kept = (int(s.split(":")[1].split(";")[0]) for s in line.split("; "))
    assert ran + kept == 10 and kept == 7  # every pass finished before the interrupted eighth is kept


@pytest.mark.parametrize(
    "args, message",
    [
        (("-p", "fast=5:15:5", "--forward", "1/3", "--walk-forward", "100,50"), "not both"),
        (("-p", "fast=5:15:5", "--anchored"), "--anchored applies"),
        (("-p", "fast=5:15:5", "--heatmap", "fast,slow"), "--heatmap"),
        (("-p", "fast=5:15:5", "--method", "tpe"), "needs --passes"),
        (("-p", "fast=5:15:5", "--criterion", "sharp"), "did you mean 'sharpe'"),
        (("-p", "fsat=5:15:5"), "did you mean 'fast'"),
        (("-p", "fast=5:15:5", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"), "not both"),
    ],
)
def test_bad_arguments_get_one_line_errors(tmp_path, capsys, args, message):
    from neuronet.cli import main

    with pytest.raises(SystemExit) as code:
        main(["optimize", "sma", *args, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code.value.code == 2, err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _env():
    import os

    return dict(os.environ)
