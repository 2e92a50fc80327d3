"""BLAS threads of the NumPy backend (``nn.threads``): the idle CPUs when it starts, or what the user set."""

from __future__ import annotations

import os

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from nn import threads
from nn.ops_numpy import NumpyBackend


@pytest.fixture
def two_cpus(monkeypatch):
    """A 2-CPU machine whose 1-minute load average the test sets; no thread variable of the user's."""
    for name in threads.USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)

    def load(value: float) -> None:
        monkeypatch.setattr(os, "getloadavg", lambda: (value, value, value), raising=False)

    return load


@pytest.mark.parametrize(("load", "expected"), [(0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (2.0, 1), (6.5, 1)])
def test_threads_are_the_idle_cpus_at_least_one(two_cpus, load, expected):
    two_cpus(load)
    plan = threads.plan()
    assert plan.threads == expected and plan.cpus == 2
    assert f"load {load:.1f}" in plan.why


def test_only_the_cpus_this_process_may_use_count(two_cpus, monkeypatch):
    """Pinned to 2 of 8 CPUs (``taskset -c 0,1``) on an idle machine: 2 threads, not 8."""
    two_cpus(0.0)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert threads.plan().threads == 2


@pytest.mark.parametrize("name", threads.USER_VARIABLES)
def test_a_thread_count_the_user_set_is_kept(two_cpus, monkeypatch, name):
    two_cpus(5.0)
    monkeypatch.setenv(name, "2")
    plan = threads.plan()
    assert plan.threads is None and plan.why == f"as set by {name}=2"


def test_the_first_numpy_backend_sizes_blas_once_and_devices_says_so(two_cpus, monkeypatch):
    if not any(lib["user_api"] == "blas" for lib in threadpool_info()):
        pytest.skip("NumPy loaded no BLAS that threadpoolctl knows")
    two_cpus(1.5)
    monkeypatch.setattr(threads, "_applied", [])
    with threadpool_limits(limits=2, user_api="blas"):  # restores the process's limits afterwards
        backend = NumpyBackend()
        assert backend.blas.threads == 1
        assert {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"} == {1}
        two_cpus(0.0)
        assert NumpyBackend().blas is backend.blas  # once per process: a second backend changes nothing
        line = threads.describe_blas()
    assert "1 thread now" in line and "uses 1 thread: the idle share of 2 CPUs at load 1.5" in line
