"""Shared fixtures: a seeded RNG and the awkward sizes every kernel is tested on; the session's and every
test's own ``NEURONET_CACHE``; and ``NEURONET_REQUIRE_OPENCL=1`` turning any OpenCL test's skip into a
failure."""

import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]
SESSION_CACHE = pytest.StashKey[Path]()

# Sizes that are not multiples of 4, of a vector width or of a work-group size.
AWKWARD = (1, 3, 5, 17, 130)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240419)


def pytest_configure(config: pytest.Config) -> None:
    """The session's own cache folder, set before any test module imports ``opencl`` (which registers the
    pip drivers in a folder of the cache and keeps each device's self-check there): a test run never writes
    to the user's real cache. Each test then gets its own folder (``_isolated_cache``)."""
    folder = Path(tempfile.mkdtemp(prefix="neuronet-test-cache-"))
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    os.environ["NEURONET_CACHE"] = str(folder)
    config.stash[SESSION_CACHE] = folder


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``NEURONET_REQUIRE_OPENCL=1`` (set by CI), a run without a usable OpenCL device fails at once.

    The OpenCL tests skip themselves where no device exists, which is right on a user's machine but would let
    CI pass without testing a single kernel.
    """
    if not _opencl_required():
        return
    from opencl import NoDeviceError, choose_device

    try:
        choose_device()
    except NoDeviceError as exc:
        raise pytest.UsageError(f"NEURONET_REQUIRE_OPENCL=1 but no usable OpenCL device: {exc}") from None


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    """Every test (and every process it starts) gets its own ``NEURONET_CACHE``: tests never write to the
    user's real cache. A test that needs a particular folder sets the variable itself, after this.

    The folder starts with the session's OpenCL device self-checks (``opencl/devices.json``), so that every
    process of the session uses the same device: a process that timed the devices afresh under another load
    could choose another CPU device and compute other float32 figures than the test compares with."""
    folder = tmp_path_factory.mktemp("neuronet-cache")
    verdicts = pytestconfig.stash[SESSION_CACHE] / "opencl" / "devices.json"
    if verdicts.is_file():
        (folder / "opencl").mkdir()
        shutil.copyfile(verdicts, folder / "opencl" / "devices.json")
    monkeypatch.setenv("NEURONET_CACHE", str(folder))


def _opencl_required() -> bool:
    return os.environ.get("NEURONET_REQUIRE_OPENCL", "0") not in ("", "0")


# Reasons that say OpenCL could not be had (as opposed to "runs on NVIDIA OpenCL GPUs only").
_OPENCL_MISSING = re.compile(
    r"\bno\b.{0,20}\bopencl\b|pyopencl|opencl platforms exist but list no device|opencl backend cannot",
    re.IGNORECASE,
)


def _fail_opencl_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    """With ``NEURONET_REQUIRE_OPENCL=1``, a skip because OpenCL could not be had (a module that could not
    get a runtime, a device fixture with nothing to run on, ``importorskip("pyopencl")``) is a failure: CI
    must not pass an OpenCL test module it never ran, whatever made getting the runtime fail."""
    if not report.skipped or not _opencl_required():
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if _OPENCL_MISSING.search(reason):
        report.outcome = "failed"
        report.longrepr = f"NEURONET_REQUIRE_OPENCL=1, but this OpenCL test was skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Module-level skips (``pytest.skip(..., allow_module_level=True)``, ``importorskip``)."""
    outcome = yield
    _fail_opencl_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Skips of single tests (``skipif`` marks, ``pytest.skip`` in a fixture or test)."""
    outcome = yield
    _fail_opencl_skip(outcome.get_result())
