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
    importlib.import_module(f"benchmarks.{name}").main(["--tiny"])
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
