"""Layers through their public passes: finite differences in float64, configs, the registry."""

from __future__ import annotations

import numpy as np
import pytest

from nn.backend import ACTIVATIONS, Activation
from nn.init import initial_values
from nn.layer import Layer
from nn.layers import (
    ActivationLayer,
    BatchNorm,
    Dense,
    Dropout,
    Softmax,
    from_config,
    layer_types,
    register_layer,
)
from nn.ops_numpy import NumpyBackend

AWKWARD = (1, 3, 5, 17, 130)
DENSE_ACTIVATIONS = [
    *ACTIVATIONS,
    {"kind": "linear", "alpha": 0.5, "beta": 0.3},
    {"kind": "lrelu", "alpha": 0.2},
]


def _bind(layer: Layer, input_shape: tuple[int, ...], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Build and bind ``layer`` to standalone float64 arrays (params random, grads poisoned)."""
    layer.build(input_shape)
    params = {s.name: rng.normal(scale=0.5, size=s.shape) for s in layer.param_specs()}
    grads = {s.name: np.full(s.shape, np.nan) for s in layer.param_specs()}
    state = {s.name: initial_values(s, rng) for s in layer.state_specs()}
    layer.bind(NumpyBackend(), params, grads, state)
    return params


def _check_layer(layer, x, rng, finite_difference, before_forward=lambda: None, rtol=1e-6):
    params = layer.params
    r = rng.normal(size=(x.shape[0], *layer.output_shape))

    def loss() -> float:
        before_forward()
        return float((layer.forward(x, True) * r).sum())

    loss()
    gx = layer.backward(r, need_input_grad=True)
    analytic = {name: layer.grads[name].copy() for name in params}
    np.testing.assert_allclose(gx, finite_difference(loss, x), rtol=rtol, atol=1e-8)
    for name, p in params.items():
        np.testing.assert_allclose(
            analytic[name], finite_difference(loss, p), rtol=rtol, atol=1e-8, err_msg=name
        )


@pytest.mark.parametrize("activation", DENSE_ACTIVATIONS, ids=str)
@pytest.mark.parametrize("batch", (1, 3, 17))
def test_dense_with_each_activation_matches_finite_differences(rng, finite_difference, activation, batch):
    layer = Dense(3, activation=activation)
    _bind(layer, (5,), rng)
    x = rng.normal(size=(batch, 5))
    _check_layer(layer, x, rng, finite_difference)


@pytest.mark.parametrize("kind", ACTIVATIONS)
@pytest.mark.parametrize("size", AWKWARD)
def test_activation_layer_matches_finite_differences(rng, finite_difference, kind, size):
    layer = ActivationLayer(kind)
    _bind(layer, (2,), rng)
    x = rng.normal(scale=2.0, size=(size, 2))
    x = np.where(np.abs(x) < 0.05, 0.3, x)  # relu/lrelu kink
    _check_layer(layer, x, rng, finite_difference)


@pytest.mark.parametrize("classes", AWKWARD)
def test_softmax_layer_matches_finite_differences(rng, finite_difference, classes):
    layer = Softmax()
    _bind(layer, (classes,), rng)
    _check_layer(layer, rng.normal(size=(4, classes)), rng, finite_difference)


@pytest.mark.parametrize("size", (3, 17))
def test_dropout_with_fixed_mask_matches_finite_differences(rng, finite_difference, size):
    layer = Dropout(0.4, seed=11)
    _bind(layer, (size,), rng)
    x = rng.normal(size=(5, size))

    def fixed_mask() -> None:
        layer.counter = 0  # every evaluation draws the same mask (counter 1)

    _check_layer(layer, x, rng, finite_difference, before_forward=fixed_mask)
    assert (layer._mask == 0).any() and (layer._mask > 0).any()
    first = layer._mask.copy()
    layer.forward(x, True)
    assert not np.array_equal(first, layer._mask)  # the counter advances: a new mask per training pass
    np.testing.assert_array_equal(layer.forward(x, False), x)  # identity in inference


@pytest.mark.parametrize("batch", (3, 5, 17))
def test_batchnorm_layer_matches_finite_differences(rng, finite_difference, batch):
    layer = BatchNorm()
    _bind(layer, (4,), rng)
    _check_layer(layer, rng.normal(loc=2.0, size=(batch, 4)), rng, finite_difference, rtol=1e-5)


def test_seed_batchnorm_streaming_statistics(rng):
    """Seed bug 8: training must normalise with the batch's own statistics, not per-sample running ones."""
    layer = BatchNorm(momentum=0.1)
    _bind(layer, (3,), rng)
    layer.params["gamma"][...] = 1.0
    layer.params["beta"][...] = 0.0
    x = rng.normal(loc=5.0, scale=3.0, size=(17, 3))
    y = layer.forward(x, True)
    np.testing.assert_allclose(y.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.std(axis=0), 1.0, atol=1e-5)
    np.testing.assert_allclose(layer.state["running_mean"], 0.1 * x.mean(axis=0))
    # One row (online mode) is normalised with the running statistics.
    one = layer.forward(x[:1], True)
    expected = (x[:1] - layer.state["running_mean"]) / np.sqrt(layer.state["running_var"] + 1e-5)
    np.testing.assert_allclose(one, expected)


def test_dense_softmax_expands_into_dense_and_softmax():
    parts = Dense(3, activation="softmax", init="he_normal").expand()
    assert [p.config() for p in parts] == [
        {"type": "dense", "units": 3, "activation": "linear", "init": "he_normal"},
        {"type": "softmax"},
    ]


@pytest.mark.parametrize(
    "layer",
    [
        Dense(7, activation="tanh"),
        Dense(2, activation={"kind": "lrelu", "alpha": 0.2}, init="seed_uniform"),
        Dense(3, activation="gelu"),
        ActivationLayer("swish", alpha=1.5),
        Softmax(),
        Dropout(0.25, seed=3),
        BatchNorm(momentum=0.05, eps=1e-3),
    ],
    ids=lambda layer: layer.type_name,
)
def test_config_round_trip(layer):
    config = layer.config()
    assert config["type"] == layer.type_name
    assert from_config(config).config() == config


def test_default_initialisers_follow_activation():
    assert Dense(4, activation="tanh").init == "xavier_uniform"
    assert Dense(4, activation="relu").init == "he_uniform"


def test_bad_layer_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="units"):
        Dense(0)
    with pytest.raises(ValueError, match="unknown activation"):
        Dense(3, activation="tanhh")
    with pytest.raises(ValueError, match="init"):
        Dense(3, init="glorot")
    with pytest.raises(ValueError, match="rate"):
        Dropout(1.0)
    with pytest.raises(ValueError, match="unknown layer type 'conv'"):
        from_config({"type": "conv"})
    with pytest.raises(ValueError, match="layer 'dense'"):
        from_config({"type": "dense", "units": 3, "neurons": 4})
    with pytest.raises(ValueError, match="flat"):
        Dense(3).build((2, 3))


def test_register_layer_adds_a_type():
    @register_layer
    class Scale(Layer):
        type_name = "test_scale_by_two"

        def build(self, input_shape):
            self.input_shape = self.output_shape = tuple(input_shape)
            return self.output_shape

        def forward(self, x, training):
            return 2 * x

        def backward(self, gy, need_input_grad=True):
            return 2 * gy

        def config(self):
            return {"type": self.type_name}

    assert "test_scale_by_two" in layer_types()
    assert isinstance(from_config({"type": "test_scale_by_two"}), Scale)
    with pytest.raises(ValueError, match="already registered"):
        register_layer(type("Other", (Scale,), {"type_name": "dense"}))


def test_activation_config_keeps_parameters():
    layer = Dense(2, activation=Activation("linear", 2.0, 1.0))
    assert layer.config()["activation"] == {"kind": "linear", "alpha": 2.0, "beta": 1.0}
    assert Dense(2, activation="lrelu").config()["activation"] == "lrelu"


def test_every_layer_config_names_its_constructor_arguments_and_rebuilds():
    """Configuration is stated once (the constructor's signature): config() has exactly its arguments,
    and from_config(config()) gives a layer with the same config."""
    import inspect

    import nn  # noqa: F401  (registers every layer type)
    from nn.layers import _REGISTRY, from_config

    required = {
        "units": 4,
        "rate": 0.25,
        "kind": "tanh",
        "pred_len": 3,
        "seq_len": 12,
        "length": 8,
        "out_len": 4,
        "d_model": 8,
    }
    for name, cls in sorted(_REGISTRY.items()):
        params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
        kwargs = {
            p.name: required[p.name]
            for p in params
            if p.default is inspect.Parameter.empty and p.name in required
        }
        if any(p.default is inspect.Parameter.empty and p.name not in kwargs for p in params):
            continue  # wrappers of another layer (channel_independent, revin): covered by their own tests
        config = cls(**kwargs).config()
        assert config["type"] == name
        assert set(config) - {"type"} == {p.name for p in params}, name
        assert from_config(config).config() == config, name
