"""A real Dask cluster on 127.0.0.1: a scheduler and two workers as separate processes, the optimisation
submitted with ``neuronet optimize --scheduler``, one worker killed mid-run. Dask re-runs the tasks the
dead worker held; the results must equal an inline run's, pass for pass, with none missing or doubled."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from backtests.optimize import optimize
from datafeeds.sample import read_sample
from strategies import SmaCrossEA

BIN = Path(sys.executable).parent
SPACE = {"fast": "2:30:2", "slow": "20:100:10"}  # 15 x 9 = 135 passes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recorded(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return con.execute("select count(*) from trials").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is still being created
        return 0


def _wait_for_workers(address: str, n: int, timeout: float = 120.0) -> None:
    from distributed import Client

    with Client(address, timeout="60s") as client:
        client.wait_for_workers(n, timeout=timeout)


@pytest.mark.slow
def test_killed_worker_costs_nothing_and_results_equal_the_local_run(tmp_path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    log = open(tmp_path / "cluster.log", "w")  # noqa: SIM115 - closed in finally
    try:
        scheduler = [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
        procs.append(subprocess.Popen(scheduler, stdout=log, stderr=log, cwd=tmp_path))
        for i in range(2):
            worker = [BIN / "dask", "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                      "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}")]  # fmt: skip
            procs.append(subprocess.Popen(worker, stdout=log, stderr=log, cwd=tmp_path))
        _wait_for_workers(address, 2)
        out = tmp_path / "opt"
        db = out / "study.db"
        run = subprocess.Popen(
            [sys.executable, "-m", "neuronet", "optimize", "sma", "-p", f"fast={SPACE['fast']}",
             "-p", f"slow={SPACE['slow']}", "--scheduler", address, "--out", str(out), "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while _recorded(db) == 0 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        at_kill = _recorded(db)
        procs[1].send_signal(signal.SIGKILL)  # a worker dies with tasks in flight
        procs[1].wait(timeout=30)
        stdout, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stderr
        assert 0 < at_kill < 135, "the worker must die mid-run"
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()

    cluster = pd.read_csv(out / "results.csv")
    assert len(cluster) == 135 == len(cluster[["fast", "slow"]].drop_duplicates())
    assert "passes run now: 135" in stdout
    local = optimize(read_sample(), SmaCrossEA, SPACE, workers=0)
    key = ["fast", "slow"]
    a = cluster.sort_values(key).reset_index(drop=True)
    b = local.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[["pass", *key]], b[["pass", *key]])  # numbers independent of timing
    for col in ("criterion", "final_balance", "total_net_profit", "total_trades", "profit_factor"):
        np.testing.assert_allclose(a[col].to_numpy(float), b[col].to_numpy(float), rtol=1e-12, equal_nan=True)
    assert (a["error"].notna() == b["error"].notna()).all()
    assert tuple(cluster.iloc[0][key]) == tuple(local.iloc[0][key])
    assert "Remove worker" in (tmp_path / "cluster.log").read_text()  # the scheduler saw it die
    assert f"Dask cluster {address}" in (out / "report.html").read_text()
