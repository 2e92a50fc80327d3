"""Attention layers on the NumPy float64 reference: finite-difference gradients, shapes, known values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from layer_check import bind_random

from nn.attention import (
    FeedForward,
    LayerNorm,
    LearnablePositionalEncoding,
    MultiHeadSelfAttention,
    Patching,
    SinusoidalPositionalEncoding,
    TokenLinear,
    TransformerEncoderLayer,
    sinusoid_table,
)
from nn.layers import from_config


def fd_check(layer, input_shape, batch, rng, fd, *, training=False, reset=None, x=None):
    """backward() against central differences of ``L = Σ forward(x)·R`` for the input and all parameters.

    ``reset`` runs before every forward pass so that a dropout layer reuses one mask.
    """
    flat_p, flat_g = bind_random(layer, input_shape, rng)
    x = rng.normal(size=(batch, *input_shape)) if x is None else x
    reset = reset or (lambda: None)
    reset()
    r = rng.normal(size=layer.forward(x, training).shape)

    def loss() -> float:
        reset()
        return float(np.sum(layer.forward(x, training) * r))

    reset()
    layer.forward(x, training)
    gx = layer.backward(r, True)
    gp = flat_g.copy()
    num_x, num_p = fd(loss, x), fd(loss, flat_p)
    np.testing.assert_allclose(gx, num_x, atol=1e-6 * max(1.0, np.abs(num_x).max()), rtol=1e-5)
    if gp.size:
        np.testing.assert_allclose(gp, num_p, atol=1e-6 * max(1.0, np.abs(num_p).max()), rtol=1e-5)
    return x


@pytest.mark.parametrize("d", [1, 3, 5, 17])
def test_layernorm_gradients(d, rng, finite_difference):
    fd_check(LayerNorm(), (3, d), 2, rng, finite_difference)


def test_layernorm_matches_definition(rng):
    layer = LayerNorm(eps=1e-5)
    bind_random(layer, (4, 6), rng)
    x = rng.normal(size=(2, 4, 6)) * 3 + 1
    y = layer.forward(x, False)
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, xhat * layer.params["gamma"] + layer.params["beta"], atol=1e-12)


@pytest.mark.parametrize(("s", "d", "heads", "causal"), [(1, 4, 1, False), (3, 6, 2, True), (5, 6, 3, False)])
def test_attention_gradients(s, d, heads, causal, rng, finite_difference):
    fd_check(MultiHeadSelfAttention(heads, causal=causal), (s, d), 2, rng, finite_difference)


def test_attention_dropout_gradients(rng, finite_difference):
    layer = MultiHeadSelfAttention(2, dropout=0.3, seed=7)

    def reset():
        layer._drop.counter = 0

    fd_check(layer, (4, 4), 2, rng, finite_difference, training=True, reset=reset)


def test_attention_matches_explicit_formula(rng):
    s, d, h = 5, 6, 2
    layer = MultiHeadSelfAttention(h, causal=True)
    bind_random(layer, (s, d), rng)
    x = rng.normal(size=(3, s, d))
    p = layer.params
    q, k, v = np.split(x @ p["wqkv"].T + p["bqkv"], 3, axis=-1)
    heads = []
    for i in range(h):
        sl = slice(i * d // h, (i + 1) * d // h)
        sc = q[..., sl] @ np.swapaxes(k[..., sl], 1, 2) / math.sqrt(d // h)
        sc = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, sc)
        a = np.exp(sc - sc.max(-1, keepdims=True))
        heads.append((a / a.sum(-1, keepdims=True)) @ v[..., sl])
    want = np.concatenate(heads, axis=-1) @ p["wo"].T + p["bo"]
    np.testing.assert_allclose(layer.forward(x, False), want, atol=1e-12)


def test_causal_attention_ignores_the_future(rng):
    layer = MultiHeadSelfAttention(2, causal=True)
    bind_random(layer, (6, 4), rng)
    x = rng.normal(size=(1, 6, 4))
    y = layer.forward(x, False)
    x2 = x.copy()
    x2[0, 4:] += 10.0
    np.testing.assert_allclose(layer.forward(x2, False)[0, :4], y[0, :4], atol=1e-12)


def test_attention_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadSelfAttention(3).build((4, 8))


def test_positional_encodings(rng, finite_difference):
    table = sinusoid_table(7, 6)
    assert table[0, 0] == 0.0 and table[0, 1] == 1.0
    np.testing.assert_allclose(table[3, 2], math.sin(3 / 10000 ** (2 / 6)))
    np.testing.assert_allclose(table[3, 5], math.cos(3 / 10000 ** (4 / 6)))
    fd_check(SinusoidalPositionalEncoding(), (7, 6), 2, rng, finite_difference)
    fd_check(SinusoidalPositionalEncoding(), (3, 5), 1, rng, finite_difference)  # odd d_model
    fd_check(LearnablePositionalEncoding(), (3, 5), 3, rng, finite_difference)


@pytest.mark.parametrize(("length", "patch", "stride"), [(96, 16, 8), (17, 4, 3), (5, 5, 1), (3, 4, 2)])
def test_patching(length, patch, stride, rng, finite_difference):
    layer = Patching(patch, stride)
    x = rng.normal(size=(2, length))
    bind_random(layer, (length,), rng)
    y = layer.forward(x, False)
    n = (length + stride - patch) // stride + 1
    assert y.shape == (2, n, patch)
    padded = np.concatenate([x, np.repeat(x[:, -1:], stride, axis=1)], axis=1)
    for i in range(n):
        np.testing.assert_array_equal(y[:, i], padded[:, i * stride : i * stride + patch])
    fd_check(Patching(patch, stride), (length,), 2, rng, finite_difference, x=x)


def test_patching_official_count():
    assert Patching(16, 8).build((96,)) == (12, 16)  # PatchTST: (96 − 16)/8 + 2 patches


def test_token_linear_and_feedforward(rng, finite_difference):
    fd_check(TokenLinear(3), (4, 5), 2, rng, finite_difference)
    fd_check(TokenLinear(2, bias=False), (3, 1, 5), 2, rng, finite_difference)
    fd_check(FeedForward(7, "gelu"), (3, 5), 2, rng, finite_difference)
    fd_check(FeedForward(4, "relu"), (2, 3), 2, rng, finite_difference)


def test_feedforward_dropout_gradients(rng, finite_difference):
    layer = FeedForward(6, "gelu", dropout=0.4, seed=3)

    def reset():
        layer._drop1.counter = layer._drop2.counter = 0

    fd_check(layer, (3, 4), 2, rng, finite_difference, training=True, reset=reset)


def test_encoder_layer_gradients(rng, finite_difference):
    fd_check(TransformerEncoderLayer(2, 5, dropout=0.0), (3, 4), 2, rng, finite_difference)


def test_encoder_layer_dropout_gradients(rng, finite_difference):
    layer = TransformerEncoderLayer(2, 5, dropout=0.25, seed=11)

    def reset():
        for d in (
            layer._drop,
            layer.children["attn"]._drop,
            layer.children["ffn"]._drop1,
            layer.children["ffn"]._drop2,
        ):
            d.counter = 0

    fd_check(layer, (3, 4), 2, rng, finite_difference, training=True, reset=reset)


def test_encoder_layer_declares_prefixed_children():
    layer = TransformerEncoderLayer(2, 8)
    layer.build((5, 4))
    names = [s.name for s in layer.param_specs()]
    assert names[:4] == ["attn.wqkv", "attn.bqkv", "attn.wo", "attn.bo"]
    assert "norm2.gamma" in names and "ffn.w1" in names
    expected = (4 * 12 + 12 + 16 + 4) + 2 * (4 + 4) + (8 * 4 + 8 + 4 * 8 + 4)
    assert sum(s.size for s in layer.param_specs()) == expected


@pytest.mark.parametrize(
    "layer",
    [
        LayerNorm(1e-6),
        MultiHeadSelfAttention(2, True, 0.1, 5),
        Patching(4, 2, 3),
        TokenLinear(3, False),
        FeedForward(8, "relu", 0.2, 1),
        TransformerEncoderLayer(2, 8, 0.1, "gelu", False, 1e-5, 9),
        SinusoidalPositionalEncoding(),
        LearnablePositionalEncoding(),
    ],
    ids=lambda la: la.type_name,
)
def test_config_round_trip(layer):
    clone = from_config(layer.config())
    assert type(clone) is type(layer) and clone.config() == layer.config()
