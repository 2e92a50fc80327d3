"""``backend="auto"``, the default everywhere: the best usable OpenCL device, else NumPy with a warning."""

import inspect
import logging

import pytest

from nn import Sequential, get_backend
from strategies import ForecastEA, FractalEA


def test_auto_is_the_one_default():
    assert inspect.signature(Sequential).parameters["backend"].default == "auto"
    assert inspect.signature(Sequential.from_specs).parameters["backend"].default == "auto"
    assert inspect.signature(get_backend).parameters["name"].default == "auto"
    assert FractalEA.param_defaults()["backend"] == ForecastEA.param_defaults()["backend"] == "auto"


def test_auto_falls_back_to_numpy_and_says_why(monkeypatch, caplog):
    import nn.ops_opencl

    class NoDevice:
        def __init__(self, device=None, dtype=None, **options):
            raise RuntimeError("clGetPlatformIDs failed")  # a raw driver error

    monkeypatch.setattr(nn.ops_opencl, "OpenCLBackend", NoDevice)
    with caplog.at_level(logging.WARNING):
        be = get_backend("auto")
    assert be.name == "numpy"
    assert "training on the NumPy backend: no usable OpenCL device (RuntimeError" in caplog.text
    with pytest.raises(nn.BackendUnavailableError):
        get_backend("opencl")  # asked for by name, OpenCL is never silently replaced


def test_auto_uses_opencl_where_a_device_works():
    try:
        get_backend("opencl")
    except (OSError, ValueError):
        pytest.skip("no usable OpenCL device here")
    assert get_backend("auto").name.startswith("opencl:")
