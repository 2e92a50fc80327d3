"""What a caller of ``nn`` gets wrong raises ``nn.errors`` classes: one line on the command line, the old
built-in family in Python (``except ValueError`` keeps working), never a bare ``ValueError`` that reads as
neuronet's own bug, and never a ``MemoryError`` from a size typed by mistake."""

import numpy as np
import pytest

import nn
from neuronet.errors import NeuronetError
from nn import NNConfigError, NNDataError, NNTypeError, Sequential, get_backend
from nn.layers import from_config
from nn.optim import optimizer_from_config


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: from_config({"type": "dense", "units": 0}), "dense units must be a positive integer"),
        (lambda: from_config({"type": "dense", "units": 3, "activation": "nosuch"}), "unknown activation"),
        (lambda: from_config({"type": "nosuch"}), "unknown layer type 'nosuch'"),
        (lambda: from_config({"type": "dropout", "rate": 1.0}), r"rate must be in \[0, 1\)"),
        (lambda: optimizer_from_config({"type": "adam", "lr": float("nan")}), "adam lr must be a finite"),
        (lambda: optimizer_from_config({"type": "nosuch"}), "unknown optimizer"),
        (lambda: get_backend("cuda"), "unknown backend 'cuda'"),
        (lambda: nn.EarlyStopping("loss", patience=-1), "patience must be an integer >= 0"),
        (lambda: Sequential([], (3,)), "at least one layer"),
    ],
)
def test_a_setting_out_of_range_is_a_config_error(make, match):
    with pytest.raises(NNConfigError, match=match) as info:
        make()
    assert isinstance(info.value, ValueError) and isinstance(info.value, NeuronetError)


def _model():
    return Sequential.from_specs([{"type": "dense", "units": 2}], input_shape=(3,), backend="numpy")


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        (np.zeros((4, 2)), np.zeros((4, 2)), r"X has shape \(4, 2\), expected \(N, 3\)"),
        (np.full((4, 3), np.nan), np.zeros((4, 2)), "X must be finite numbers"),
        (np.zeros((4, 3)), np.zeros((4, 5)), r"Y has shape \(4, 5\)"),
        (np.zeros((0, 3)), np.zeros((0, 2)), "no samples"),
    ],
)
def test_data_that_does_not_fit_the_model_is_a_data_error(x, y, match):
    with pytest.raises(NNDataError, match=match):
        _model().fit(x, y, epochs=1)


def test_fit_arguments_out_of_range_are_config_errors():
    with pytest.raises(NNConfigError, match="fit: batch_size must be an integer >= 1"):
        _model().fit(np.zeros((4, 3)), np.zeros((4, 2)), epochs=1, batch_size=0)


def test_a_layer_that_is_not_a_layer_keeps_the_value_error_family():
    with pytest.raises(NNConfigError, match="Sequential takes Layer objects"):
        Sequential(["dense"], (3,))


def test_registering_a_layer_without_a_type_name_is_a_type_error():
    class Nameless:
        type_name = ""

    with pytest.raises(NNTypeError, match="needs a non-empty class attribute type_name"):
        nn.register_layer(Nameless)


def test_a_model_too_large_to_hold_is_refused_before_allocation():
    """``units=10**9`` on 1,000 inputs: 10^12 weights. Refused from the sizes alone, in one line, instead of
    a raw MemoryError (or a host that swaps) while the buffers are allocated."""
    with pytest.raises(NNConfigError, match="make the layers smaller"):
        Sequential.from_specs([{"type": "dense", "units": 10**9}], input_shape=(1000,), backend="numpy")


@pytest.mark.parametrize("name", ["cuda", "", "opencl:", "numpy:x", "auto:gpu"])
def test_a_backend_name_is_checked_without_starting_a_backend(name):
    with pytest.raises(NNConfigError, match="expected auto, numpy, opencl or opencl:<device>"):
        nn.check_backend_name(name)
    assert nn.check_backend_name(" NumPy ") == "numpy"
