"""The local worker pool with real processes: shared data installed once, a worker killed mid-run, a
task's own exception, Ctrl-C while long tasks run, code that workers cannot import by name, and the
choice of start method."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from backtests.optimize import pool
from backtests.optimize.engine import Engine


def _sum_plus(shared, i, pause=0.0):
    time.sleep(pause)
    return int(shared.sum()) + i, os.getpid()


def _fail_on(shared, i):
    if i == 3:
        raise ValueError(f"task {i} refuses")
    return i


def _die(shared, i):
    os.kill(os.getpid(), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child not yet reaped counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def test_tasks_see_the_shared_data_and_objects_shared_later():
    with Engine(2) as engine:
        first = engine.share(np.arange(100))
        out = dict(engine.stream(_sum_plus, first, ((i, (i, 0.02)) for i in range(20))))
        second = engine.share(np.arange(10))  # after the workers started: they start again with it
        later = dict(engine.stream(_sum_plus, second, ((i, (i,)) for i in range(4))))
        again = dict(engine.stream(_sum_plus, first, [(0, (0,))]))
    assert {i: v for i, (v, _) in out.items()} == {i: 4950 + i for i in range(20)}
    assert len({pid for _, pid in out.values()} - {os.getpid()}) == 2  # two other processes ran them
    assert {i: v for i, (v, _) in later.items()} == {i: 45 + i for i in range(4)}
    assert again[0][0] == 4950


def test_a_killed_worker_costs_only_the_tasks_in_flight_and_each_result_comes_once():
    with Engine(2) as engine:
        shared = engine.share(np.arange(100))
        stream = engine.stream(_sum_plus, shared, ((i, (i, 0.1)) for i in range(16)))
        results = [next(stream)]
        os.kill(results[0][1][1], signal.SIGKILL)  # the worker that ran the first task
        results += list(stream)
    assert sorted(tag for tag, _ in results) == list(range(16))
    assert all(value == 4950 + tag for tag, (value, _) in results)


def test_a_task_that_kills_its_worker_every_time_is_given_up_with_one_line():
    with Engine(1) as engine:
        shared = engine.share(0)
        with pytest.raises(OSError, match="lost with its worker process 4 times"):
            list(engine.stream(_die, shared, [(0, (0,))]))


def test_a_tasks_own_exception_ends_the_stream_and_the_pool_still_works():
    with Engine(2) as engine:
        shared = engine.share(0)
        with pytest.raises(ValueError, match="task 3 refuses"):
            list(engine.stream(_fail_on, shared, ((i, (i,)) for i in range(8))))
        assert sorted(dict(engine.stream(_fail_on, shared, [(0, (0,)), (1, (1,))]))) == [0, 1]


def test_leaving_a_stream_early_stops_the_workers_at_once():
    """Ctrl-C in the client (here: leaving the loop) does not wait for the running 60 s tasks."""
    with Engine(2) as engine:
        shared = engine.share(np.arange(3))
        stream = engine.stream(_sum_plus, shared, [(0, (0,)), *((i, (i, 60.0)) for i in range(1, 5))])
        _, (_, pid) = next(stream)
        t0 = time.monotonic()
        stream.close()
        assert time.monotonic() - t0 < 10
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_code_that_workers_cannot_import_by_name_travels_by_value(tmp_path):
    """An EA file the user names is loaded under a module name no worker can import."""
    source = tmp_path / "user_code.py"
    source.write_text("def triple(shared, i):\n    return 3 * i + shared\n")
    spec = importlib.util.spec_from_file_location("not_importable_user_code", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with Engine(2) as engine:
        shared = engine.share(100)
        assert dict(engine.stream(module.triple, shared, ((i, (i,)) for i in range(5)))) == {
            i: 3 * i + 100 for i in range(5)
        }


def test_workers_are_forked_only_where_forking_is_safe(monkeypatch):
    monkeypatch.setattr(pool.multiprocessing, "get_start_method", lambda allow_none=False: None)
    monkeypatch.setattr(pool, "gpu_driver_loaded", lambda: False)
    monkeypatch.setattr(pool.threading, "active_count", lambda: 1)  # whatever other tests left running
    linux = pool.sys.platform.startswith("linux")
    assert pool.start_method() == ("fork" if linux else "spawn")
    monkeypatch.setattr(pool, "gpu_driver_loaded", lambda: True)  # an OpenCL or CUDA driver is loaded
    assert pool.start_method() in ("forkserver", "spawn")
    monkeypatch.setattr(pool, "gpu_driver_loaded", lambda: False)
    monkeypatch.setattr(pool.threading, "active_count", lambda: 2)  # another Python thread runs
    assert pool.start_method() in ("forkserver", "spawn")
    monkeypatch.setattr(pool.multiprocessing, "get_start_method", lambda allow_none=False: "spawn")
    assert pool.start_method() == "spawn"  # the user's own choice


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's process map")
def test_a_loaded_opencl_driver_is_seen(monkeypatch):
    maps = "7f00-7f01 r-xp 0 08:01 1 /opt/venv/lib/pocl/libpocl-21062cec.so\n"
    monkeypatch.setattr(pool.Path, "read_text", lambda self: maps)
    assert pool.gpu_driver_loaded()
    monkeypatch.setattr(pool.Path, "read_text", lambda self: "7f00-7f01 r-xp 0 08:01 1 /usr/lib/libm.so.6\n")
    assert not pool.gpu_driver_loaded()


@pytest.mark.slow
def test_workers_started_by_spawn_get_the_shared_data_pickled(monkeypatch):
    monkeypatch.setattr(pool, "start_method", lambda: "spawn")
    with Engine(2) as engine:
        shared = engine.share(np.arange(100))
        out = dict(engine.stream(_sum_plus, shared, ((i, (i,)) for i in range(6))))
    assert {i: v for i, (v, _) in out.items()} == {i: 4950 + i for i in range(6)}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is a Linux call")
def test_workers_default_to_the_cpus_this_process_may_run_on():
    """Pinned to one CPU (``taskset -c 0``), one worker by default and at most 4, whatever the machine has."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from backtests.optimize.engine import Engine\n"
        "from backtests.optimize.errors import OptimizeError\n"
        "print(Engine().workers)\n"
        "try:\n    Engine(5)\nexcept OptimizeError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "1"
    assert "up to 4 (4 processes per CPU of the 1 this process may run on" in lines[1]
