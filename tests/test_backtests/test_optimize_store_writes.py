"""A batch of passes is written to the study store in one transaction, and reads back exactly as Optuna's
own ``add_trials`` records it: states, values (infinite ones included), parameters of every distribution,
attributes with NaN, infinities, huge and unicode values, trial numbers and times. A batch that fails
halfway leaves nothing of itself in the store, and neither does a process killed while it writes one."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import optuna.distributions as od
import pandas as pd
import pytest
from optuna.trial import TrialState, create_trial

from backtests.optimize import optimize, store
from datafeeds.sample import read_sample
from strategies import SmaCrossEA

DIST = {
    "fast": od.IntDistribution(2, 40, step=2),
    "ratio": od.FloatDistribution(0.5, 2.0, step=0.25),
    "mode": od.CategoricalDistribution(["a,b", "€ unicode", "plain"]),
    "flag": od.CategoricalDistribution([True, False]),
}
FIELDS = ("number", "state", "values", "params", "distributions", "user_attrs", "system_attrs",
          "intermediate_values", "datetime_start", "datetime_complete")  # fmt: skip


def _passes(start: int, n: int) -> list:
    out = []
    modes = ["a,b", "€ unicode", "plain"]
    for i in range(start, start + n):
        params = {
            "fast": 2 + 2 * (i % 20),
            "ratio": 0.5 + 0.25 * (i % 7),
            "mode": modes[i % 3],
            "flag": bool(i % 2),
        }
        stats = {
            "final_balance": 10_000.0 + i,
            "profit_factor": math.inf if i % 5 == 0 else 1.5,
            "sharpe": math.nan,
            "huge": 1e308,
            "note": "ünïcode ✓",
            "daily_returns": [1e-4 * i, -2e-4],
        }
        if i % 4 == 3:
            refused = {"stats": {}, "error": "ValueError: fast < slow"}
            out.append(
                create_trial(state=TrialState.FAIL, params=params, distributions=DIST, user_attrs=refused)
            )
        else:
            value = -math.inf if i % 4 == 2 else float(i)  # an undefined figure is told as the worst
            out.append(
                create_trial(value=value, params=params, distributions=DIST, user_attrs={"stats": stats})
            )
    return out


def _open(path, name: str) -> store.Store:
    return store.open_study(store.storage_url(path), name, "maximize", {"test": name})


def test_a_batch_reads_back_as_optunas_own_record(tmp_path):
    db = tmp_path / "study.db"
    ours, theirs = _open(db, "ours"), _open(db, "theirs")
    first, second = _passes(0, 13), _passes(13, 6)
    for batch in (first, second):
        ours.record(batch)  # one transaction each
        theirs.study.add_trials(batch)  # Optuna's own path, trial by trial
    storage = store.storage_url(db)
    got = optuna.load_study(study_name="ours", storage=storage).get_trials(deepcopy=False)
    want = optuna.load_study(study_name="theirs", storage=storage).get_trials(deepcopy=False)
    assert [t.number for t in got] == list(range(19))
    for a, b in zip(got, want, strict=True):
        for name in FIELDS:
            assert repr(getattr(a, name)) == repr(getattr(b, name)), (a.number, name)
    assert [t.number for t in ours.finished()] == list(range(19))


def test_a_batch_that_fails_halfway_leaves_nothing_of_itself(tmp_path):
    durable = _open(tmp_path / "study.db", "atomic")
    durable.record(_passes(0, 3))
    broken = _passes(3, 4)
    broken[2].user_attrs["stats"]["unserialisable"] = object()  # after two rows of the batch were written
    with pytest.raises(TypeError):
        durable.record(broken)
    again = _open(tmp_path / "study.db", "atomic")
    assert [t.number for t in again.finished()] == [0, 1, 2]
    durable.record(_passes(3, 2))  # the store goes on where it stood
    assert [t.number for t in _open(tmp_path / "study.db", "atomic").finished()] == [0, 1, 2, 3, 4]


CHILD = """
import sys
from backtests.optimize import optimize, store
from datafeeds.sample import read_sample
from strategies import SmaCrossEA

write = store.Store.record


def record(self, trials):
    print("writing", flush=True)
    write(self, trials)
    print("written", flush=True)  # a whole batch is in the store


store.Store.record = record
optimize(read_sample().iloc[:1500], SmaCrossEA, SPACE, workers=0, batch=BATCH, store_path=sys.argv[1])
"""
SPACE = {"fast": "2:20:2", "slow": "30:60:10"}  # 40 passes
BATCH = 4


@pytest.mark.parametrize("after, delay", [(1, 0.0), (3, 0.002), (5, 0.006)])
def test_a_killed_optimisation_keeps_whole_batches_and_resume_runs_only_the_rest(tmp_path, after, delay):
    """The client process is killed (SIGKILL: no clean-up of any kind) while it writes a batch, ``delay``
    seconds into the write that follows ``after`` whole batches: the store holds whole batches only, is
    intact, and the same call resumes it, running only the passes that were lost, to the table of a run
    never stopped."""
    db = tmp_path / "study.db"
    script = CHILD.replace("SPACE", repr(SPACE)).replace("BATCH", str(BATCH))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "TQDM_DISABLE": "1"}
    child = subprocess.Popen([sys.executable, "-c", script, str(db)], stdout=subprocess.PIPE, env=env)
    try:
        lines = [child.stdout.readline().strip() for _ in range(2 * after + 1)]
        assert lines == [b"writing", b"written"] * after + [b"writing"]
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with sqlite3.connect(db) as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
        kept = con.execute("select count(*) from trials").fetchone()[0]
    assert kept % BATCH == 0 and after * BATCH <= kept < 40  # whole batches, the run was cut short
    candles = read_sample().iloc[:1500]
    resumed = optimize(candles, SmaCrossEA, SPACE, workers=0, batch=BATCH, store_path=str(db))
    assert resumed.attrs["ran"] == 40 - kept  # only the lost passes ran again
    whole = optimize(candles, SmaCrossEA, SPACE, workers=0, batch=BATCH, store_path=str(tmp_path / "w.db"))
    pd.testing.assert_frame_equal(resumed.drop(columns="seconds"), whole.drop(columns="seconds"))
    assert resumed.attrs["robustness"] == whole.attrs["robustness"]
