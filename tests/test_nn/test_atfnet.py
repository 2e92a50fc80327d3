"""ATFNet and its parts on the NumPy float64 reference: gradients, the official formulas, configs."""

from __future__ import annotations

import numpy as np
import pytest
from layer_check import bind_random

from nn.atfnet import (
    ATFNet,
    ChannelIndependent,
    ComplexFeatureAttention,
    FeatureAttentionEncoderLayer,
    FrequencyBlock,
    PatchTST,
    PatchTSTBackbone,
    RevIN,
)
from nn.attention import TokenLinear
from nn.layers import from_config
from nn.ops_numpy import NumpyBackend

RefBackend = NumpyBackend


def fd_check(layer, input_shape, batch, rng, fd, *, backend=None, check_input=True, x=None, params_every=1):
    """backward() against central differences of ``L = Σ forward(x)·R`` (eval mode, no dropout)."""
    flat_p, flat_g = bind_random(layer, input_shape, rng, backend)
    x = rng.normal(size=(batch, *input_shape)) if x is None else x
    r = rng.normal(size=layer.forward(x, False).shape)

    def loss() -> float:
        return float(np.sum(layer.forward(x, False) * r))

    layer.forward(x, False)
    gx = layer.backward(r, check_input)
    gp = flat_g.copy()
    if check_input:
        num_x = fd(loss, x)
        np.testing.assert_allclose(gx, num_x, atol=1e-6 * max(1.0, np.abs(num_x).max()), rtol=1e-5)
    else:
        assert gx is None
    idx = np.arange(0, flat_p.size, params_every)
    sub = flat_p[idx].copy()

    def loss_sub() -> float:
        flat_p[idx] = sub
        return loss()

    num_p = fd(loss_sub, sub)
    flat_p[idx] = sub
    np.testing.assert_allclose(gp[idx], num_p, atol=1e-6 * max(1.0, np.abs(num_p).max()), rtol=1e-5)


SMALL = dict(d_model=4, n_heads=2, e_layers=1, d_ff=6, dropout=0.0, patch_len=4, stride=2)


def test_channel_independent_gradients(rng, finite_difference):
    fd_check(ChannelIndependent([TokenLinear(3), TokenLinear(2)]), (5, 3), 2, rng, finite_difference)


@pytest.mark.parametrize("affine", [False, True])
def test_revin_gradients_through_the_window_statistics(affine, rng, finite_difference):
    """The differences move the window and so its mean and std: the input gradient must follow both."""
    layer = RevIN([TokenLinear(4)], affine=affine)
    x = rng.normal(size=(2, 6, 3)) * 3.0 + 1.5
    fd_check(layer, (6, 3), 2, rng, finite_difference, x=x)


def test_revin_input_gradient_of_a_shift_is_the_output_shift(rng):
    """RevIN output moves by exactly c when the window moves by c: Σ_l ∂y_t/∂x_l = 1 for every t, which a
    gradient that holds the statistics fixed gets wrong."""
    layer = RevIN([TokenLinear(4)])
    bind_random(layer, (6, 1), rng)
    x = rng.normal(size=(1, 6, 1))
    layer.forward(x, False)
    for t in range(4):
        gy = np.zeros((1, 4, 1))
        gy[0, t, 0] = 1.0
        np.testing.assert_allclose(layer.backward(gy).sum(), 1.0, atol=1e-12)


def test_revin_makes_the_inner_model_scale_free(rng):
    layer = RevIN([TokenLinear(4)], eps=0.0)
    bind_random(layer, (6, 2), rng)
    x = rng.normal(size=(3, 6, 2))
    y = layer.forward(x, False)
    np.testing.assert_allclose(layer.forward(x * 7.0 + 100.0, False), y * 7.0 + 100.0, atol=1e-9)


def test_patchtst_backbone_gradients(rng, finite_difference):
    fd_check(PatchTSTBackbone(5, **SMALL), (11,), 2, rng, finite_difference)


def test_patchtst_head_sees_features_major(rng):
    """The flatten head reads (d_model, patches) flattened d_model-major, as the official code."""
    layer = PatchTSTBackbone(3, **SMALL)
    bind_random(layer, (10,), rng)
    x = rng.normal(size=(2, 10))
    y = layer.forward(x, False)
    c = layer.children
    h = c["pos"].forward(c["embed"].forward(c["patch"].forward(x, False), False), False)
    h = c["norm"].forward(c["enc0"].forward(h, False), False)  # (N, P, D)
    flat = np.transpose(h, (0, 2, 1)).reshape(2, -1)
    np.testing.assert_allclose(y, flat @ c["head"].params["w"].T + c["head"].params["b"], atol=1e-12)


def _official_feature_attention(x, w_qkv, b_qkv, w_out, b_out, heads, mask=None):
    """The official ComplexAttentionLayer written out with complex einsums (softmax over |s|, no scaling);
    ``mask`` (B·N, H, slot j, slot i): the dropout applied to the weights."""
    c = lambda a: a[..., 0] + 1j * a[..., 1]  # noqa: E731
    xs = c(x)  # (B, N, d)
    b, n, d = xs.shape
    qkv = xs @ c(w_qkv).T + c(b_qkv)
    q, k, v = (t.reshape(b, n, d // heads, heads) for t in np.split(qkv, 3, axis=-1))  # (B, N, slot, H)
    s = np.einsum("bnlh,bnsh->bnhls", q, k)
    p = np.exp(np.abs(s) - np.abs(s).max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if mask is not None:
        p = p * mask.reshape(b, n, heads, d // heads, d // heads).transpose(0, 1, 2, 4, 3)
    out = np.einsum("bnhls,bnsh->bnlh", p, v).reshape(b, n, d)
    y = out @ c(w_out).T + c(b_out)
    return np.stack([y.real, y.imag], axis=-1)


def test_feature_attention_matches_official_formula(rng):
    layer = ComplexFeatureAttention(heads=2)
    bind_random(layer, (3, 6, 2), rng)
    x = rng.normal(size=(2, 3, 6, 2))
    p = layer.params
    want = _official_feature_attention(x, p["w_qkv"], p["b_qkv"], p["w_out"], p["b_out"], 2)
    np.testing.assert_allclose(layer.forward(x, False), want, atol=1e-12)


def test_feature_attention_drops_weights_in_training_only(rng):
    """The official ComplexAttention applies dropout to softmax(|s|): with a mask m the output is the
    official formula with p·m; evaluation uses p."""
    layer = ComplexFeatureAttention(heads=2, dropout=0.5, seed=3)
    bind_random(layer, (3, 6, 2), rng)
    x = rng.normal(size=(2, 3, 6, 2))
    p = layer.params
    want = _official_feature_attention(x, p["w_qkv"], p["b_qkv"], p["w_out"], p["b_out"], 2)
    np.testing.assert_allclose(layer.forward(x, False), want, atol=1e-12)
    dropped = layer.forward(x, True)
    mask = layer._cache[-1]  # (tokens, heads, slots, slots), key-major like p
    assert mask is not None and (mask == 0).any()
    want = _official_feature_attention(x, p["w_qkv"], p["b_qkv"], p["w_out"], p["b_out"], 2, mask)
    np.testing.assert_allclose(dropped, want, atol=1e-12)


def test_frequency_block_drops_attention_weights_by_default():
    block = FrequencyBlock(4, d_model=4, n_heads=2, layers=1, d_ff=6)
    assert block.children["enc0"].children["attn"].dropout == 0.1
    assert FrequencyBlock(4, dropout=0.2).children["enc0"].children["attn"].dropout == 0.2
    assert FrequencyBlock(4, dropout=0.2, attn_dropout=0.1).children["enc0"].children["attn"].dropout == 0.1
    model = ATFNet(8, **SMALL, fnet_layers=1, complex_dropout=0.3, fnet_attn_dropout=0.0)
    assert model.children["f"].children["0"].children["enc0"].children["attn"].dropout == 0.0


@pytest.mark.parametrize("score", ["modulus", "holomorphic"])
def test_feature_attention_gradients(score, rng, finite_difference):
    fd_check(ComplexFeatureAttention(2, score), (2, 4, 2), 2, rng, finite_difference)


def test_feature_encoder_layer_gradients(rng, finite_difference):
    fd_check(FeatureAttentionEncoderLayer(2, 5, dropout=0.0), (1, 4, 2), 3, rng, finite_difference)


@pytest.mark.parametrize(("length", "horizon"), [(8, 4), (9, 4)])  # L + T even and odd
def test_frequency_block_gradients(length, horizon, rng, finite_difference):
    """Parameters and the input: the input gradient follows the spectrum statistics through both the
    normalisation and the de-normalisation."""
    layer = FrequencyBlock(horizon, d_model=4, n_heads=2, layers=1, d_ff=6, dropout=0.0)
    fd_check(layer, (length,), 2, rng, finite_difference)


def test_atfnet_parameter_gradients(rng, finite_difference):
    """On periodic windows (w well above 0), so that the F block's parameters are checked too; the input
    gradient is left out: w has no gradient by design."""
    model = ATFNet(4, **SMALL, fnet_d_model=4, fnet_d_ff=6, fnet_layers=1, complex_dropout=0.0)
    t = np.arange(24)[None, :, None]
    x = np.sin(2 * np.pi * t / 8) + 0.3 * rng.normal(size=(2, 24, 2))
    fd_check(model, (24, 2), 2, rng, finite_difference, check_input=False, x=x, params_every=3)
    assert model.last_weight.min() > 0.3


def test_atfnet_mixes_blocks_by_the_harmonic_weight(rng):
    model = ATFNet(4, **SMALL, fnet_d_model=4, fnet_d_ff=6, fnet_layers=1)
    bind_random(model, (24, 2), rng)
    t = np.arange(24)
    x = np.stack([np.sin(2 * np.pi * t / 8), rng.normal(size=24)], axis=-1)[None]  # periodic vs noise
    y = model.forward(x, False)
    w = model.last_weight
    assert w.shape == (1, 2) and w[0, 0] > 0.9 > 0.5 > w[0, 1]
    y_t = model.children["t"].forward(x, False)
    y_f = model.children["f"].forward(x, False)
    np.testing.assert_allclose(y, w[:, None, :] * y_f + (1 - w[:, None, :]) * y_t, atol=1e-12)


def test_official_sizes():
    model = ATFNet(96)
    assert model.build((96, 7)) == (96, 7)
    names = {s.name: s.shape for s in model.param_specs()}
    assert names["t.0.head.w"] == (96, 512 * 12)  # d_model × 12 patches -> horizon
    assert names["f.0.embed.w"] == (512, 97, 2)  # (96 + 96)//2 + 1 bins -> fnet d_model
    assert names["f.0.enc1.ff1.w"] == (2048, 512, 2)


@pytest.mark.parametrize(
    "layer",
    [
        ATFNet(8, **SMALL, fnet_layers=1, score="holomorphic", seed=3),
        PatchTST(8, **SMALL, affine=True),
        RevIN([TokenLinear(3)], affine=True),
        FrequencyBlock(4, d_model=4, n_heads=2),
    ],
    ids=lambda la: la.type_name,
)
def test_config_round_trip(layer):
    clone = from_config(layer.config())
    assert type(clone) is type(layer) and clone.config() == layer.config()


def test_model_files_keep_the_dropout_counters_of_every_nested_part(rng, tmp_path):
    """ATFNet draws masks in a dozen nested parts; the one counter a model file saves must restore them all,
    so a resumed training continues with fresh masks (and one restored to an earlier count repeats them)."""
    from nn.io import load, save
    from nn.model import Sequential

    sizes = {**SMALL, "dropout": 0.2, "fnet_d_model": 4, "fnet_d_ff": 6, "fnet_layers": 1}
    model = ATFNet(4, **sizes, complex_dropout=0.0, fnet_attn_dropout=0.3)
    net = Sequential([model], (12, 2), "mse", {"type": "adam", "lr": 1e-3}, RefBackend(), seed=1)
    x, y = rng.normal(size=(4, 12, 2)), rng.normal(size=(4, 4, 2))
    net.fit(x, y, epochs=2, batch_size=2)
    assert model.counter == 4
    attn = model.children["f"].children["0"].children["enc0"].children["attn"]
    t_attn = model.children["t"].children["0"].children["enc0"].children["attn"]
    assert attn.counter == 4 and t_attn.counter == 4
    save(net, tmp_path / "m")
    again = load(tmp_path / "m", backend=RefBackend())
    layer = again.layers[0]
    assert layer.counter == 4
    assert layer.children["f"].children["0"].children["enc0"].children["attn"].counter == 4
    first = layer.forward(x, True)
    layer.counter = 4
    np.testing.assert_array_equal(layer.forward(x, True), first)
    assert not np.allclose(layer.forward(x, True), first)
