"""Fixtures for OpenCL tests: one runtime per usable device (and float64 where the device has it)."""

from __future__ import annotations

import numpy as np
import pytest

from opencl import NoDeviceError, get_runtime, list_devices
from opencl.selfcheck import verdict

try:
    USABLE = [d for d in list_devices() if verdict(d).usable]
except NoDeviceError:  # no OpenCL at all: every test here is skipped, with the reason
    USABLE = []


def pytest_collection_modifyitems(config, items):
    for item in items:  # successful kernel builds stay quiet: a pyopencl CompilerWarning fails the test
        if "test_opencl" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("error::pyopencl.CompilerWarning"))
    if USABLE:
        return
    skip = pytest.mark.skip(reason="no usable OpenCL device on this machine (see `neuronet devices`)")
    for item in items:
        if "test_opencl" in str(item.fspath):
            item.add_marker(skip)


def _params():
    out = []
    for d in USABLE:
        out.append(pytest.param((d, np.float32), id=f"{d.index}-f32"))
        if d.fp64:
            out.append(pytest.param((d, np.float64), id=f"{d.index}-f64"))
    return out


@pytest.fixture(params=_params())
def rt(request):
    """A runtime for every usable device and every dtype it supports."""
    info, dtype = request.param
    return get_runtime(info, dtype)


@pytest.fixture(params=[pytest.param(d, id=d.index) for d in USABLE])
def rt32(request):
    """A float32 runtime for every usable device."""
    return get_runtime(request.param, np.float32)
