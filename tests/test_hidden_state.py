"""No hidden switches: the library reads no environment variable outside its few documented config
functions, keeps no ``global`` flags, and takes run choices (kernel profiling) as arguments. Checked by
parsing the sources (nothing imported), like ``tests/test_architecture.py``.

Environment variables may set defaults only at the edge: the command line, and the named functions below,
each documented in the README's configuration table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")
ENV_READERS = {  # module -> the one function in it that may read the environment, and why
    "neuronet/cachedir.py": "cache_root",  # NEURONET_CACHE, XDG_CACHE_HOME, LOCALAPPDATA: the cache folder
    "opencl/choice.py": "choose_device",  # NEURONET_DEVICE: the device when none is given
    "opencl/selfcheck.py": "_key",  # POCL_*, CL_CONFIG_*: driver settings, part of a self-check's identity
    "opencl/vendors.py": "register",  # OCL_ICD_VENDORS: the ICD loader's vendors folder, ours added
    "nn/threads.py": "plan",  # OPENBLAS_NUM_THREADS etc.: BLAS threads the user set are kept
    "neuronet/cli.py": "_debug_wanted",  # NEURONET_DEBUG: the CLI's --debug default
    "neuronet/live/credentials.py": "from_env",  # NEURONET_MT5_LOGIN/PASSWORD/SERVER: terminal login
    # names ``os.getenv`` without calling it: an indicator that calls it reads state its key cannot see
    "backtests/indicator_cache.py": "<module>",
}
ENV_NAMES = {"environ", "getenv", "putenv", "unsetenv", "environb"}


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _env_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, enclosing function) of every ``os.environ``/``os.getenv``-style use, imports included."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        names = {getattr(node, "attr", None), getattr(node, "id", None)}
        if isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
        if names & ENV_NAMES:
            found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_the_environment_is_read_only_in_the_documented_config_functions():
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, function in _env_uses(ast.parse(path.read_text(encoding="utf-8"))):
            if ENV_READERS.get(rel) != function:
                offenders.append(f"{rel}:{line} in {function}()")
    assert not offenders, "environment read or written outside a config function:\n" + "\n".join(offenders)


def test_the_allowlist_names_real_functions():
    """An entry left behind after its function moved would let a new reader in unnoticed."""
    for rel, function in ENV_READERS.items():
        uses = _env_uses(ast.parse((ROOT / rel).read_text(encoding="utf-8")))
        assert any(f == function for _, f in uses), f"{rel}: {function}() reads no environment variable"


def test_the_checker_finds_a_hidden_switch():
    tree = ast.parse("import os\nfrom os import environ\ndef f():\n    return os.environ.get('X')\n")
    assert _env_uses(tree) == [(2, "<module>"), (4, "f")]


DOCUMENTED_VARIABLES = {  # the README's table
    "NEURONET_CACHE",
    "NEURONET_DEVICE",
    "NEURONET_DEBUG",
    "NEURONET_MT5_LOGIN",
    "NEURONET_MT5_PASSWORD",
    "NEURONET_MT5_SERVER",
}


def test_only_the_documented_variables_are_named():
    """A variable nothing reads any more (a benchmark still setting it) would switch nothing, silently."""
    offenders = []
    for path in _sources() + sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for word in re.findall(r"\bNEURONET_[A-Z_]+\b", node.value):
                    if word not in DOCUMENTED_VARIABLES:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {word}")
    assert not offenders, "\n".join(offenders)


def test_no_module_keeps_global_flags():
    """``global`` rebinding is how a module flag gets flipped at run time (a debug switch, a fused path)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Global)
    ]
    assert not offenders, "global statements: " + ", ".join(offenders)


def test_no_module_level_boolean_switches():
    """A module-level ``FUSED = True`` is a switch that callers (and tests) flip for everyone in the process;
    a choice like that is a parameter (``get_backend(..., fused_online=False)``)."""
    offenders = []
    for path in _sources():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = getattr(node, "value", None)
            constant = value.value if isinstance(value, ast.Constant) else None
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(constant, bool):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "module-level booleans: " + ", ".join(offenders)


def test_profiling_reaches_the_ea_as_an_argument(monkeypatch):
    """``Backtest(profile=True)`` configures the EA's backend; nothing is left in the environment."""
    pytest.importorskip("pyopencl")
    import numpy as np
    import pandas as pd

    from backtests import Backtest
    from datafeeds import CandleMeta, Timeframe, make_frame
    from opencl import NoDeviceError, choose_device
    from strategies import ExpertAdvisor

    try:  # asked first: inside on_study the missing device would be the EA's failure, not a skip
        choose_device()
    except NoDeviceError as exc:
        pytest.skip(f"no usable OpenCL device: {exc}")

    seen = []

    class Probe(ExpertAdvisor):
        backend = "opencl"

        def on_study(self, bars):
            seen.append(self.nn_backend().runtime.profiler.enabled)

    close = 1.1 + np.cumsum(np.random.default_rng(0).normal(0, 5e-4, 60))
    data = {"open": close, "high": close, "low": close, "close": close, "spread": np.full(60, 5)}
    index = pd.date_range("2021-03-01", periods=60, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    df = make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5, source="test"))
    monkeypatch.delenv("NEURONET_PROFILE", raising=False)
    Backtest(df, Probe, profile=True).run()
    Backtest(df, Probe).run()
    assert seen == [True, False]
    import os

    assert "NEURONET_PROFILE" not in os.environ
