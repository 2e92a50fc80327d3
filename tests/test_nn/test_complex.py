"""Complex layers on the NumPy float64 reference: finite differences on Re and Im, known values, configs.

The gradient delivered for a complex z is ∂L/∂Re z + i·∂L/∂Im z; since complex tensors are stored as real
(..., 2) arrays, perturbing every stored real separately checks exactly that definition — including the
non-holomorphic maps (|s| in the modulus softmax, split ReLU, layer norm) where the seed's formulas fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from layer_check import bind_random

from nn.complex import (
    ComplexActivation,
    ComplexDense,
    ComplexDropout,
    ComplexEncoderLayer,
    ComplexLayerNorm,
    ComplexMultiHeadAttention,
)
from nn.layers import from_config
from nn.ops_numpy import NumpyBackend

_B = NumpyBackend


def fd_check(layer, input_shape, batch, rng, fd, *, training=False, reset=None, x=None, tol=1e-6):
    """backward() against central differences of ``L = Σ forward(x)·R`` for the input and every parameter."""
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
    gx = layer.backward(r)
    analytic_p = flat_g.copy()
    np.testing.assert_allclose(gx, fd(loss, x), rtol=tol, atol=tol)
    if flat_p.size:
        np.testing.assert_allclose(analytic_p, fd(loss, flat_p), rtol=tol, atol=tol)


def _c(a):
    return a[..., 0] + 1j * a[..., 1]


@pytest.mark.parametrize("shape", [(5, 2), (3, 4, 2)], ids=["vector", "tokens"])
def test_complex_dense_gradients(shape, rng, finite_difference):
    fd_check(ComplexDense(3), shape, 2, rng, finite_difference)
    fd_check(ComplexDense(1, use_bias=False), shape, 3, rng, finite_difference)


def test_complex_dense_is_the_complex_affine_map(rng):
    layer = ComplexDense(4)
    bind_random(layer, (3, 2), rng)
    x = rng.normal(size=(5, 3, 2))
    want = _c(x) @ _c(layer.params["w"]).T + _c(layer.params["b"])
    np.testing.assert_allclose(_c(layer.forward(x, False)), want, rtol=1e-12)


@pytest.mark.parametrize("kind", ["relu", "lrelu", "tanh", "sigmoid"])
def test_complex_activation_gradients(kind, rng, finite_difference):
    x = rng.normal(size=(3, 7, 2))
    x[np.abs(x) < 1e-3] = 0.1  # keep the split kinks away from the difference stencil
    fd_check(ComplexActivation(kind, alpha=0.2), (7, 2), 3, rng, finite_difference, x=x)


def test_complex_activation_values(rng):
    x = rng.normal(size=(2, 5, 2))
    for kind, f in [("tanh", np.tanh), ("sigmoid", lambda z: 1 / (1 + np.exp(-z)))]:
        layer = ComplexActivation(kind)
        bind_random(layer, (5, 2), rng)
        np.testing.assert_allclose(_c(layer.forward(x, False)), f(_c(x)), rtol=1e-12)
    layer = ComplexActivation("lrelu", alpha=0.1)
    bind_random(layer, (5, 2), rng)
    y = layer.forward(x, False)  # split: Re and Im handled independently
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.1 * x))


def test_seed_holomorphic_rule_is_wrong_for_split_relu(rng):
    """The MQL5 port backpropagates conj(f'(z))·g through every activation; for split ReLU no complex f'
    exists. Ours must differ from any single complex factor when Re and Im have opposite signs."""
    layer = ComplexActivation("relu")
    bind_random(layer, (1, 2), rng)
    x = np.array([[[0.7, -0.4]]])
    layer.forward(x, True)
    g = layer.backward(np.array([[[1.0, 1.0]]]))
    np.testing.assert_allclose(g, [[[1.0, 0.0]]])  # only Re passes: not a complex multiple of g = 1+i


def test_complex_layernorm_gradients(rng, finite_difference):
    fd_check(ComplexLayerNorm(), (6, 2), 3, rng, finite_difference)
    fd_check(ComplexLayerNorm(eps=1e-3), (2, 5, 2), 2, rng, finite_difference)


def test_complex_layernorm_normalises(rng):
    layer = ComplexLayerNorm(eps=1e-12)
    bind_random(layer, (9, 2), rng)
    layer.params["w"][...] = [1.0, 0.0]
    layer.params["b"][...] = 0.0
    y = _c(layer.forward(rng.normal(size=(4, 9, 2)) * 3 + 1, False))
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose((np.abs(y) ** 2).mean(axis=-1), 1, rtol=1e-9)


def test_complex_layernorm_is_the_official_map_with_a_rescaled_weight(rng):
    """The official ComplexLN (unbiased variance, no eps) equals this layer with w·√((D−1)/D)."""
    d = 6
    layer = ComplexLayerNorm(eps=1e-300)
    bind_random(layer, (3, d, 2), rng)
    x = rng.normal(size=(2, 3, d, 2))
    z = x[..., 0] + 1j * x[..., 1]
    w = layer.params["w"][:, 0] + 1j * layer.params["w"][:, 1]
    b = layer.params["b"][:, 0] + 1j * layer.params["b"][:, 1]
    c = z - z.mean(-1, keepdims=True)
    official = c / np.sqrt((np.abs(c) ** 2).sum(-1, keepdims=True) / (d - 1)) * w + b  # torch.var, unbiased
    layer.params["w"][...] *= np.sqrt((d - 1) / d)
    y = layer.forward(x, False)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], official, atol=1e-12)


def test_complex_dropout_shares_mask_and_gradient(rng, finite_difference):
    layer = ComplexDropout(0.4, seed=7)
    bind_random(layer, (50, 2), rng)
    x = rng.normal(size=(3, 50, 2))
    y = layer.forward(x, True)
    kept = y != 0
    assert np.array_equal(kept[..., 0], kept[..., 1])  # Re and Im dropped together
    assert 0.3 < 1 - kept[..., 0].mean() < 0.5
    np.testing.assert_allclose(y[kept], x[kept] / 0.6)
    assert layer.forward(x, False) is x
    drop = ComplexDropout(0.3, seed=1)  # the reset reuses one mask across the difference stencil
    fd_check(
        drop, (4, 2), 2, rng, finite_difference, training=True, reset=lambda: setattr(drop, "counter", 0)
    )


@pytest.mark.parametrize("score", ["modulus", "holomorphic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("n", "d", "heads"), [(1, 2, 1), (3, 4, 2), (5, 3, 3)])
def test_complex_attention_gradients(score, causal, n, d, heads, rng, finite_difference):
    fd_check(ComplexMultiHeadAttention(heads, score, causal), (n, d, 2), 2, rng, finite_difference)


def test_holomorphic_softmax_gradient_where_clamped(rng, finite_difference):
    """Large scores saturate the ±20 clamp on Re: only Im still moves the weights, and the gradient must
    follow (the holomorphic chain rule would claim a Re-derivative that does not exist there)."""
    be = _B()
    qkv = rng.normal(size=(1, 3, 6, 2)) * 9.0  # |s|/√E far beyond 20 for most pairs
    s = be.complex_attention_forward(qkv, 1, "holomorphic", False)[1]
    assert (np.abs(s[..., 0]) > 20).any()
    r = rng.normal(size=(1, 3, 2, 2))

    def loss() -> float:
        return float(np.sum(be.complex_attention_forward(qkv, 1, "holomorphic", False)[0] * r))

    _, s, p = be.complex_attention_forward(qkv, 1, "holomorphic", False)
    g = be.complex_attention_backward(qkv, s, p, r, 1, "holomorphic", False)
    np.testing.assert_allclose(g, finite_difference(loss, qkv, h=1e-7), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("score", ["modulus", "holomorphic"])
def test_attention_weight_dropout(score, rng, finite_difference):
    """A mask on the weights: the output is Σ_j p_ij·m_ij·v_j and the gradient follows the mask."""
    be = _B()
    qkv = rng.normal(size=(2, 4, 3 * 2 * 3, 2)) * 0.5
    mask = be.dropout_mask((2, 2, 4, 4), 0.4, 7, 1)
    assert (mask == 0).any() and (mask > 1).any()
    out, s, p = be.complex_attention_forward(qkv, 2, score, False, mask)
    z = qkv[..., 0] + 1j * qkv[..., 1]
    v = z.reshape(2, 4, 3, 2, 3)[:, :, 2].transpose(0, 2, 1, 3)  # (B, H, N, E)
    pc = (p[..., 0] + 1j * p[..., 1]).transpose(0, 1, 3, 2)  # [b, h, i, j]
    want = ((pc * mask.transpose(0, 1, 3, 2)) @ v).transpose(0, 2, 1, 3).reshape(2, 4, 6)
    np.testing.assert_allclose(out[..., 0] + 1j * out[..., 1], want, atol=1e-12)
    r = rng.normal(size=out.shape)

    def loss() -> float:
        return float(np.sum(be.complex_attention_forward(qkv, 2, score, False, mask)[0] * r))

    g = be.complex_attention_backward(qkv, s, p, r, 2, score, False, mask)
    np.testing.assert_allclose(g, finite_difference(loss, qkv), atol=1e-6)


def test_attention_scores_known_values(rng):
    be = _B()
    qkv = rng.normal(size=(2, 4, 3 * 6, 2))
    z = _c(qkv).reshape(2, 4, 3, 2, 3)  # (B, N, qkv, H, E)
    q, k, v = (z[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    s = np.einsum("bhie,bhje->bhij", q, k)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    a = np.where(mask, np.abs(s), -np.inf)
    p = np.exp(a) / np.exp(a).sum(-1, keepdims=True)
    out, _, pp = be.complex_attention_forward(qkv, 2, "modulus", True)
    pp = pp.transpose(0, 1, 3, 2, 4)  # returned key-major [b, h, j, i]
    np.testing.assert_allclose(_c(pp), p, atol=1e-14)
    want = np.einsum("bhij,bhje->bihe", p, v).reshape(2, 4, 6)
    np.testing.assert_allclose(_c(out), want, rtol=1e-12)
    e = np.where(mask, np.exp(s / np.sqrt(3)), 0)
    out, _, pp = be.complex_attention_forward(qkv, 2, "holomorphic", True)
    pp = pp.transpose(0, 1, 3, 2, 4)
    np.testing.assert_allclose(_c(pp), e / e.sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(_c(pp).sum(-1), 1.0, rtol=1e-12)  # complex weights sum to 1 + 0i


def test_heads_equal_d_model_gives_one_attention_map_per_feature(rng):
    """With head width 1 every feature attends across tokens on its own: the whole layer by hand."""
    layer = ComplexMultiHeadAttention(heads=4)
    bind_random(layer, (3, 4, 2), rng)
    x = rng.normal(size=(2, 3, 4, 2))
    qkv = _c(x) @ _c(layer.params["w_qkv"]).T + _c(layer.params["b_qkv"])  # (B, N, 12)
    q, k, v = qkv[..., :4], qkv[..., 4:8], qkv[..., 8:]
    s = np.abs(q[:, :, None, :] * k[:, None, :, :])  # (B, Nq, Nk, d)
    p = np.exp(s) / np.exp(s).sum(axis=2, keepdims=True)
    att = (p * v[:, None, :, :]).sum(axis=2)
    want = att @ _c(layer.params["w_out"]).T + _c(layer.params["b_out"])
    np.testing.assert_allclose(_c(layer.forward(x, False)), want, rtol=1e-12)


@pytest.mark.parametrize("score", ["modulus", "holomorphic"])
def test_complex_encoder_layer_gradients(score, rng, finite_difference):
    fd_check(
        ComplexEncoderLayer(heads=2, d_ff=5, dropout=0.0, score=score), (3, 4, 2), 2, rng, finite_difference
    )


def test_complex_encoder_layer_dropout_gradients(rng, finite_difference):
    layer = ComplexEncoderLayer(heads=1, d_ff=3, dropout=0.3, seed=4)

    def reset():
        layer.counter = 0  # all four masks (three dropouts and the attention weights) repeat

    fd_check(layer, (2, 3, 2), 2, rng, finite_difference, training=True, reset=reset)


@pytest.mark.parametrize(
    "layer",
    [
        ComplexDense(3, use_bias=False),
        ComplexActivation("lrelu", 0.2),
        ComplexDropout(0.2, seed=3),
        ComplexLayerNorm(1e-4),
        ComplexMultiHeadAttention(2, "holomorphic", True),
        ComplexEncoderLayer(2, 8, 0.1, "modulus", False, 1e-5, 9),
    ],
    ids=lambda layer: layer.type_name,
)
def test_config_round_trip(layer):
    again = from_config(layer.config())
    assert type(again) is type(layer) and again.config() == layer.config()
    assert again.build((3, 4, 2)) == layer.build((3, 4, 2))
    assert [s.shape for s in again.param_specs()] == [s.shape for s in layer.param_specs()]


def test_bad_arguments_name_the_layer():
    with pytest.raises(ValueError, match=r"complex_mha.*divisible"):
        ComplexMultiHeadAttention(3).build((2, 4, 2))
    with pytest.raises(ValueError, match="complex_mha: unknown score"):
        ComplexMultiHeadAttention(2, score="softmax")
    with pytest.raises(ValueError, match=r"complex_dense.*not complex"):
        ComplexDense(3).build((4, 3))
    with pytest.raises(ValueError, match="complex_activation: unknown kind"):
        ComplexActivation("gelu")
    with pytest.raises(ValueError, match="rate must be in"):
        ComplexDropout(1.0)


def test_dropout_seeds_and_counters_follow_the_model(rng):
    """Standalone complex dropouts get distinct seeds from the model; an encoder layer exposes one counter
    (what model files save) that drives its three inner dropouts."""
    from nn.model import Sequential

    model = Sequential(
        [ComplexDropout(0.5), ComplexDense(3), ComplexDropout(0.5)], input_shape=(3, 2), backend=_B(), seed=4
    )
    assert model.layers[0].seed is not None and model.layers[0].seed != model.layers[2].seed
    layer = ComplexEncoderLayer(heads=1, d_ff=3, dropout=0.5, seed=2)
    bind_random(layer, (2, 3, 2), rng)
    x = rng.normal(size=(2, 2, 3, 2))
    first = layer.forward(x, True)
    layer.forward(x, True)
    assert layer.counter == 2 and layer.children["drop3"].counter == 2
    layer.counter = 0
    np.testing.assert_array_equal(layer.forward(x, True), first)  # same masks again
