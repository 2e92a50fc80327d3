"""Fixtures for the nn tests: the backends to run on, and the float64 finite-difference helper.

``backend`` yields "numpy" always and "opencl" when ``nn.ops_opencl`` imports and an OpenCL device answers,
so the end-to-end and persistence tests exercise every backend that this machine has.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest


def _backend_names() -> list[str]:
    names = ["numpy"]
    try:
        import nn

        nn.get_backend("opencl")
    except (OSError, ValueError):  # no OpenCL runtime or device (a clear error): the reference still runs
        return names
    return [*names, "opencl"]


BACKENDS = _backend_names()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=BACKENDS[1:])
def device_backend(request: pytest.FixtureRequest) -> str:
    """Only the accelerated backends, for comparisons against the reference (skipped when there are none)."""
    return request.param


@pytest.fixture
def finite_difference() -> Callable[..., np.ndarray]:
    """The float64 central-difference helper (a fixture, since test modules cannot import conftest)."""
    return _finite_difference


def _finite_difference(f: Callable[[], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to every element of ``x`` (edited in place)."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + h
        up = f()
        flat[i] = keep - h
        down = f()
        flat[i] = keep
        gflat[i] = (up - down) / (2.0 * h)
    return g


def pytest_collection_modifyitems(config, items):
    """Successful kernel builds stay quiet: a pyopencl CompilerWarning fails any nn test (where installed)."""
    import importlib.util

    if importlib.util.find_spec("pyopencl") is not None:
        for item in items:
            if "test_nn" in str(item.fspath):
                item.add_marker(pytest.mark.filterwarnings("error::pyopencl.CompilerWarning"))
