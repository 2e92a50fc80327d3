"""Every benchmark runs (at a toy size), so none can rot: ``python -m benchmarks --tiny`` module by module.

Slow (PoCL kernel builds); PyTorch may be absent, and each benchmark must then skip its peer, not fail.
"""

import importlib
import pkgutil

import pytest

import benchmarks

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
