"""On a Dask cluster the engine survives losing the only copy of the shared data: Dask's memory manager
keeps one replica of scattered data and cannot recompute it, so tasks depending on it are cancelled when
its worker dies; the engine scatters it again and resubmits them. (Local workers: test_optimize_pool.py.)"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from backtests.optimize.engine import Engine


def _slow_len(shared, i):
    time.sleep(0.2)
    return int(shared.sum()), i


@pytest.mark.slow
def test_tasks_outlive_the_worker_holding_the_shared_data():
    from distributed import LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Engine(scheduler=cluster.scheduler_address) as engine,
    ):
        shared = engine.share(np.arange(100))
        client = engine._client
        deadline = time.monotonic() + 60
        while len(client.who_has(shared.future)[shared.future.key]) != 1 and time.monotonic() < deadline:
            time.sleep(0.2)  # until the memory manager has dropped the extra replica
        (holder,) = client.who_has(shared.future)[shared.future.key]
        stream = engine.stream(_slow_len, shared, ((i, (i,)) for i in range(12)))
        results = [next(stream)]
        pid = client.run(os.getpid, workers=[holder])[holder]
        os.kill(pid, signal.SIGKILL)
        results += list(stream)
    assert sorted(tag for tag, _ in results) == list(range(12))
    assert all(value == (4950, tag) for tag, value in results)
