"""Every benchmark runs (at a toy size), so none can rot: ``python -m benchmarks --tiny`` module by module.

Slow (PoCL kernel builds); PyTorch may be absent, and each benchmark must then skip its peer, not fail.
"""

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_"))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODULES)
def test_benchmark_runs_at_a_tiny_size(name, capsys):
    from opencl import NoDeviceError

    try:
        importlib.import_module(f"benchmarks.{name}").main(["--tiny"])
    except NoDeviceError as exc:
        pytest.skip(f"no usable OpenCL device: {exc}")
    out = capsys.readouterr().out
    assert out.strip() and "nan" not in out.lower()


def test_every_benchmark_takes_tiny_and_the_runner_passes_it(monkeypatch):
    import benchmarks.__main__ as runner

    seen = []
    for name in MODULES:
        module = importlib.import_module(f"benchmarks.{name}")
        monkeypatch.setattr(module, "main", lambda argv, name=name: seen.append((name, argv)))
    runner.main(["--tiny"])
    assert seen == [(name, ["--tiny"]) for name in MODULES]


def test_without_an_opencl_device_the_runner_skips_with_a_note_and_goes_on(monkeypatch, capsys):
    """``make bench-tiny`` where no OpenCL device works: a note per OpenCL benchmark, and no error."""
    import benchmarks.__main__ as runner
    from opencl import NoDeviceError

    seen = []

    def no_device(argv, name):
        seen.append(name)
        if name in ("epoch", "gemm"):
            raise NoDeviceError("no OpenCL device passes the self-check: 0:0 CPU: self-check failed")

    for name in MODULES:
        module = importlib.import_module(f"benchmarks.{name}")
        monkeypatch.setattr(module, "main", lambda argv, name=name: no_device(argv, name))
    runner.main(["--tiny"])
    assert seen == MODULES
    out = capsys.readouterr().out
    assert "skipped benchmarks.epoch: no usable OpenCL device (no OpenCL device passes" in out
    assert "skipped benchmarks.gemm:" in out and "skipped benchmarks.replay" not in out


def test_the_header_names_the_machine_the_pinning_and_every_contestants_pool(capsys):
    from benchmarks._machine import Contestant, cpus_given, header

    given = len(cpus_given())
    header([Contestant("a peer", processes=given), Contestant("ours", processes=2 * given, peer=False)])
    out = capsys.readouterr().out
    assert out.startswith("machine: ") and "\npinning: " in out and "load average" in out
    assert f"a peer: {given} process" in out and f"ours: {2 * given} processes x 1 thread" in out


@pytest.mark.parametrize("processes, threads", [(2, 1), (1, 2)], ids=["processes", "threads"])
def test_a_peer_wider_than_the_cpus_given_is_refused(processes, threads):
    from benchmarks._machine import Contestant, UnfairComparison, cpus_given, header

    given = len(cpus_given())
    peer = Contestant("backtesting.py optimize", processes=processes * given, threads=threads)
    with pytest.raises(
        UnfairComparison, match=f"backtesting.py optimize would run .* on the {given} CPUs given"
    ):
        header([peer])


def test_the_runner_skips_an_unfair_comparison_and_goes_on(monkeypatch, capsys):
    import benchmarks.__main__ as runner
    from benchmarks._machine import UnfairComparison

    seen = []

    def unfair(argv, name):
        seen.append(name)
        if name == "optimize":
            raise UnfairComparison("refusing to compare: a peer would run 16 x 1 at once on the 2 CPUs given")

    for name in MODULES:
        module = importlib.import_module(f"benchmarks.{name}")
        monkeypatch.setattr(module, "main", lambda argv, name=name: unfair(argv, name))
    runner.main(["--tiny"])
    assert seen == MODULES
    assert "skipped benchmarks.optimize: refusing to compare: a peer would run 16" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is a Linux call")
def test_the_optimisation_benchmark_sizes_backtesting_pys_pool_to_the_cpus_given():
    """backtesting.py's own pool takes a process per CPU of the host; pinned, it must take the CPUs given."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "import backtesting\n"
        "from benchmarks.optimize import size_peer_pool\n"
        "size_peer_pool(1)\n"
        "with backtesting.Pool() as pool:\n"
        "    print(len(set(pool.starmap(os.getpid, [()] * 8))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_the_step_profile_lists_every_product_with_its_device_time(capsys):
    """``benchmarks.step --profile``: one row per product of the step (shape, layout, tiles, K slices, device
    µs), then their total."""
    from opencl import NoDeviceError

    try:
        importlib.import_module("benchmarks.step").main(["--tiny", "--profile", "--no-torch"])
    except NoDeviceError:
        pytest.skip("no OpenCL device")
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("B8 ")]
    assert len(rows) == 14
    assert all(float(row.split()[-2]) > 0 for row in rows)  # our device µs; PyTorch's column is nan here


@pytest.mark.parametrize("hold", [False, True])
def test_the_replay_benchmark_holds_the_previous_result_only_when_asked(monkeypatch, hold):
    import weakref

    import backtests
    from benchmarks import replay

    alive_during_run: list[bool] = []
    last: list[weakref.ref] = []

    class FakeResult:
        def __init__(self):
            self.timings, self.trades = {"replay_s": 1.0}, []

    class FakeBacktest:
        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            alive_during_run.append(bool(last) and last[-1]() is not None)
            result = FakeResult()
            last.append(weakref.ref(result))
            return result

    monkeypatch.setattr(backtests, "Backtest", FakeBacktest)
    replay.time_ours(None, repeats=2, hold=hold)
    assert alive_during_run == [False, hold, hold]
