"""Shared fixtures: a seeded RNG and the awkward sizes every kernel is tested on."""

import numpy as np
import pytest

# Sizes that are not multiples of 4, of a vector width or of a work-group size.
AWKWARD = (1, 3, 5, 17, 130)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240419)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``NEURONET_REQUIRE_OPENCL=1`` (set by CI), a run without a usable OpenCL device fails at once.

    The OpenCL tests skip themselves where no device exists, which is right on a user's machine but would let
    CI pass without testing a single kernel.
    """
    import os

    if os.environ.get("NEURONET_REQUIRE_OPENCL", "0") in ("", "0"):
        return
    from opencl import list_devices
    from opencl.device import probe

    devices = list_devices()
    if not any(probe(d) is None for d in devices):
        reasons = "; ".join(f"{d.index} {d.name}: {probe(d)}" for d in devices) or "no OpenCL platform"
        raise pytest.UsageError(f"NEURONET_REQUIRE_OPENCL=1 but no usable OpenCL device: {reasons}")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every process it starts) gets its own ``NEURONET_CACHE``: tests never write to the
    user's real cache. A test that needs a particular folder sets the variable itself, after this."""
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path_factory.mktemp("neuronet-cache")))
