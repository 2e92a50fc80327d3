"""The OpenCL attention ops against the float64 NumPy reference, on awkward sizes, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from nn.ops_numpy import NumpyBackend

cl = pytest.importorskip("pyopencl")
try:
    from nn.ops_opencl import OpenCLBackend
    from opencl import memory

    CLBackend = OpenCLBackend
    _DEVICE = CLBackend(dtype=np.float64)
except Exception as exc:  # no OpenCL device or no fp64: nothing to compare here
    pytest.skip(f"no OpenCL float64 device ({exc})", allow_module_level=True)


Ref = NumpyBackend

REF = Ref()


@pytest.fixture
def dev():
    return _DEVICE


def up(dev, a):
    return dev.asarray(np.asarray(a, dtype=np.float64))


def close(dev, got, want, tol=1e-10):
    np.testing.assert_allclose(dev.to_numpy(got), want, rtol=tol, atol=tol)


def poisoned(dev, shape):
    return memory.poison(dev.empty(shape))


@pytest.mark.parametrize("shape", [(1, 1, 3), (3, 5, 17), (2, 130)])
def test_linear(dev, rng, shape):
    i, o = shape[-1], 5
    x, w, b, gy = rng.normal(size=shape), rng.normal(size=(o, i)), rng.normal(size=o), None
    gy = rng.normal(size=(*shape[:-1], o))
    close(dev, dev.linear_forward(up(dev, x), up(dev, w), up(dev, b)), REF.linear_forward(x, w, b))
    close(dev, dev.linear_forward(up(dev, x), up(dev, w), None), REF.linear_forward(x, w, None))
    gw, gb = poisoned(dev, (o, i)), poisoned(dev, (o,))
    gx = dev.linear_backward(up(dev, x), up(dev, w), up(dev, gy), gw, gb, True)
    rgw, rgb = np.zeros((o, i)), np.zeros(o)
    close(dev, gx, REF.linear_backward(x, w, gy, rgw, rgb, True))
    close(dev, gw, rgw)
    close(dev, gb, rgb)


class _Poisoned(CLBackend):
    """Fresh outputs start as NaN, so that an element a kernel leaves unwritten shows."""

    def empty(self, shape, dtype=None):
        return memory.poison(super().empty(shape, dtype))


@pytest.fixture(params=["cpu", "gpu"])
def dev_layout(request):
    """Both work-group layouts (the GPU one runs on a CPU device too), outputs poisoned."""
    return _Poisoned(dtype=np.float64, layout=request.param)


# CPU layout: 8 columns of C per vector and 4 rows per block (full vectors, tails of both, one column);
# more matrices than items (runs of several matrices per item, a short last run)
@pytest.mark.parametrize(
    ("g", "m", "k", "n"),
    [(1, 1, 1, 1), (3, 5, 17, 3), (130, 3, 5, 1), (2, 13, 7, 19), (67, 12, 16, 16), (5, 4, 3, 8)],
)
@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, False), (False, True), (True, True)])
def test_bmm(dev_layout, rng, g, m, k, n, ta, tb):
    dev = dev_layout
    a = rng.normal(size=(g, k, m) if ta else (g, m, k))
    b = rng.normal(size=(g, n, k) if tb else (g, k, n))
    got = dev.bmm(up(dev, a), up(dev, b), trans_a=ta, trans_b=tb, alpha=0.5)
    close(dev, got, REF.bmm(a, b, trans_a=ta, trans_b=tb, alpha=0.5))


# (samples, tokens, heads, width): one token, odd widths, more tokens than a work-group's loop covers once,
# and heads too wide for the fused kernels' local memory in float64 (the composed ops run instead)
@pytest.mark.parametrize(
    ("b", "s", "h", "e"), [(1, 1, 1, 1), (2, 12, 3, 5), (3, 7, 2, 16), (2, 13, 1, 40), (1, 40, 2, 64)]
)
@pytest.mark.parametrize(("causal", "dropped"), [(False, False), (True, True), (False, True)])
def test_self_attention(dev_layout, rng, b, s, h, e, causal, dropped):
    dev, d, scale = dev_layout, h * e, 1.0 / np.sqrt(e)
    qkv, go = rng.normal(size=(b, s, 3 * d)), rng.normal(size=(b, s, d))
    mask = REF.dropout_mask((b * h, s, s), 0.4, 3, 2) if dropped else None
    ro, ra = REF.self_attention_forward(qkv, h, scale, causal, mask)
    rg = REF.self_attention_backward(qkv, ra, mask, go, h, scale)
    m = None if mask is None else up(dev, mask)
    o, a = dev.self_attention_forward(up(dev, qkv), h, scale, causal, m)
    close(dev, o, ro)
    close(dev, a, ra)
    g = dev.self_attention_backward(up(dev, qkv), a, m, up(dev, go), h, scale)
    close(dev, g, rg)
    again = dev.self_attention_backward(up(dev, qkv), a, m, up(dev, go), h, scale)
    np.testing.assert_array_equal(dev.to_numpy(again), dev.to_numpy(g))  # deterministic: no atomics


# float32 is the GPUs' default and has twice the fused kernels' room: (3, 40, 4, 16) runs fused only there
# (7520 elements of local memory), (1, 60, 2, 8) is composed in both precisions
@pytest.mark.parametrize(("b", "s", "h", "e"), [(2, 12, 3, 5), (3, 40, 4, 16), (1, 60, 2, 8)])
@pytest.mark.parametrize("layout", ["cpu", "gpu"])
def test_self_attention_in_float32(rng, layout, b, s, h, e):
    dev, d, scale = _Poisoned(dtype=np.float32, layout=layout), h * e, 1.0 / np.sqrt(e)
    qkv, go = rng.normal(size=(b, s, 3 * d)), rng.normal(size=(b, s, d))
    mask = REF.dropout_mask((b * h, s, s), 0.4, 3, 2)
    ro, ra = REF.self_attention_forward(qkv, h, scale, True, mask)
    rg = REF.self_attention_backward(qkv, ra, mask, go, h, scale)
    q32, m32 = dev.asarray(qkv.astype(np.float32)), dev.asarray(mask.astype(np.float32))
    o, a = dev.self_attention_forward(q32, h, scale, True, m32)
    g = dev.self_attention_backward(q32, a, m32, dev.asarray(go.astype(np.float32)), h, scale)
    for got, want in ((o, ro), (a, ra), (g, rg)):
        np.testing.assert_allclose(dev.to_numpy(got), want, rtol=1e-4, atol=1e-5 * (1 + np.abs(want).max()))


def test_self_attention_reference_is_the_per_head_formula(rng):
    """The reference against the textbook per-head loop: softmax(q·kᵀ·scale) with the causal mask, the
    dropped weights times v, heads side by side; gradients by central differences of ``Σ o·go``."""
    b, s, h, e = 2, 4, 2, 3
    d = h * e
    qkv, go = rng.normal(size=(b, s, 3 * d)), rng.normal(size=(b, s, d))
    mask = REF.dropout_mask((b * h, s, s), 0.3, 1, 1)
    o, a = REF.self_attention_forward(qkv, h, 0.7, True, mask)
    for i in range(b):
        for j in range(h):
            q, k, v = (qkv[i, :, p * d + j * e : p * d + (j + 1) * e] for p in range(3))
            z = 0.7 * q @ k.T + np.triu(np.full((s, s), -np.inf), 1)
            w = np.exp(z - z.max(1, keepdims=True))
            w /= w.sum(1, keepdims=True)
            np.testing.assert_allclose(a[i * h + j], w, atol=1e-14)
            np.testing.assert_allclose(o[i, :, j * e : (j + 1) * e], (w * mask[i * h + j]) @ v, atol=1e-14)
    g = REF.self_attention_backward(qkv, a, mask, go, h, 0.7)
    num, step = np.zeros_like(qkv), 1e-6
    for idx in np.ndindex(qkv.shape):
        plus, minus = qkv.copy(), qkv.copy()
        plus[idx] += step
        minus[idx] -= step
        f = (REF.self_attention_forward(plus, h, 0.7, True, mask)[0] * go).sum()
        num[idx] = (f - (REF.self_attention_forward(minus, h, 0.7, True, mask)[0] * go).sum()) / (2 * step)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_and_composed_attention_weights_agree_to_the_bit(rng, dtype, causal):
    """The fused kernel's row softmax (rows in local memory) and the composed path's row softmax kernel
    (rows in global memory) are one definition: the same scores give the same weights to the last bit,
    and a causal row gives exactly 0 to every later token."""
    dev = CLBackend(dtype=dtype, layout="gpu")  # the fused kernels run in the GPU layout on any device
    ops = dev.self_attention_forward.__self__
    b, s, h, e = 2, 13, 3, 5
    qkv = dev.asarray(rng.normal(size=(b, s, 3 * h * e)).astype(dtype) * 3)
    fused = ops._fused.forward(qkv, h, 0.7, causal, None)
    assert fused is not None
    _, composed = ops._composed_attention_forward(qkv, h, 0.7, causal, None)
    w = dev.to_numpy(fused[1])
    np.testing.assert_array_equal(w, dev.to_numpy(composed))
    if causal:
        assert (w[:, np.triu_indices(s, 1)[0], np.triu_indices(s, 1)[1]] == 0).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("s", [1, 3, 17])
def test_softmax(dev, rng, s, causal):
    x, gy = rng.normal(size=(5, s, s)) * 3, rng.normal(size=(5, s, s))
    y = dev.softmax_last_forward(up(dev, x), causal)
    ry = REF.softmax_last_forward(x, causal)
    close(dev, y, ry)
    close(dev, dev.softmax_last_backward(y, up(dev, gy)), REF.softmax_last_backward(ry, gy))


@pytest.mark.parametrize("layout", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_causal_weights_ignore_later_tokens_however_large(rng, layout, dtype):
    """A peek at the future: with the causal mask, the weights of token i depend on tokens <= i only, so
    later keys with huge scores (or NaN) change no earlier weight, not even in its last bit; the fused
    kernel (GPU layout) and the composed ops (CPU layout) alike."""
    dev = CLBackend(dtype=dtype, layout=layout)
    b, s, h, e, t0 = 2, 9, 2, 4, 5
    d = h * e
    qkv = rng.normal(size=(b, s, 3 * d)).astype(dtype)
    later = qkv.copy()
    later[:, t0:, d : 2 * d] = 1e15  # keys of tokens t0.. only: scores far above every earlier one
    later[:, -1, d] = np.nan
    _, a = dev.self_attention_forward(dev.asarray(qkv), h, 0.5, True, None)
    _, a_later = dev.self_attention_forward(dev.asarray(later), h, 0.5, True, None)
    w, w_later = dev.to_numpy(a), dev.to_numpy(a_later)
    np.testing.assert_array_equal(w_later[:, :t0], w[:, :t0])
    assert np.isfinite(w).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_and_attention_softmax_agree_to_the_bit(rng, dtype):
    """The dense output layer's softmax and attention's row softmax (two programs) are one definition,
    forward and backward."""
    dev = CLBackend(dtype=dtype)
    x, gy = (dev.asarray(rng.normal(size=(37, 19)).astype(dtype) * 4) for _ in range(2))
    y = dev.softmax_forward(x)
    np.testing.assert_array_equal(dev.to_numpy(y), dev.to_numpy(dev.softmax_last_forward(x, False)))
    got, want = dev.softmax_backward(y, gy), dev.softmax_last_backward(y, gy)
    np.testing.assert_array_equal(dev.to_numpy(got), dev.to_numpy(want))


@pytest.mark.parametrize("layout", ["cpu", "gpu"])
@pytest.mark.parametrize("d", [1, 5, 130])
def test_layernorm(rng, d, layout):
    dev = CLBackend(dtype=np.float64, layout=layout)  # both work-group layouts on any device
    x, gy = rng.normal(size=(3, 17, d)) * 2 + 1, rng.normal(size=(3, 17, d))
    gamma, beta = rng.normal(size=d), rng.normal(size=d)
    y, xhat, inv = dev.layernorm_forward(up(dev, x), up(dev, gamma), up(dev, beta), 1e-5)
    ry, rxhat, rinv = REF.layernorm_forward(x, gamma, beta, 1e-5)
    for got, want in ((y, ry), (xhat, rxhat), (inv, rinv)):
        close(dev, got, want)
    gg, gb = poisoned(dev, (d,)), poisoned(dev, (d,))
    rgg, rgb = np.zeros(d), np.zeros(d)
    gx = dev.layernorm_backward(up(dev, gy), xhat, inv, up(dev, gamma), gg, gb)
    close(dev, gx, REF.layernorm_backward(gy, rxhat, rinv, gamma, rgg, rgb))
    close(dev, gg, rgg)
    close(dev, gb, rgb)


@pytest.mark.parametrize(
    ("shape", "axes"), [((3, 5), (1, 0)), ((2, 3, 5, 17), (0, 2, 1, 3)), ((2, 3, 1, 5, 4), (2, 0, 3, 1, 4))]
)
def test_permute(dev, rng, shape, axes):
    x = rng.normal(size=shape)
    close(dev, dev.permute(up(dev, x), axes), REF.permute(x, axes), 0)


def test_elementwise_helpers(dev_layout, rng):
    """Both layouts, outputs poisoned, several work-groups and a partial last one (1950 elements)."""
    dev = dev_layout
    a, b, p = rng.normal(size=(3, 5, 130)), rng.normal(size=(3, 5, 130)), rng.normal(size=(5, 130))
    close(dev, dev.add(up(dev, a), up(dev, b)), a + b)
    close(dev, dev.scale(up(dev, a), -1.5), -1.5 * a)
    close(dev, dev.add_broadcast(up(dev, a), up(dev, p)), a + p)
    out = poisoned(dev, (5, 130))
    dev.sum_batch(up(dev, a), out)
    close(dev, out, a.sum(axis=0))
    w = rng.uniform(size=(3, 130))
    close(dev, dev.mix_forward(up(dev, a), up(dev, b), up(dev, w)), REF.mix_forward(a, b, w))
    ga, gb = dev.mix_backward(up(dev, a), up(dev, w))
    rga, rgb = REF.mix_backward(a, w)
    close(dev, ga, rga)
    close(dev, gb, rgb)
    close(dev, dev.stack([up(dev, a), up(dev, b)]), np.stack([a, b]), 0)


@pytest.mark.parametrize(("length", "patch", "stride", "pad"), [(96, 16, 8, 8), (17, 4, 3, 3), (5, 5, 1, 0)])
def test_patching(dev, rng, length, patch, stride, pad):
    x = rng.normal(size=(3, length))
    y = dev.patch_forward(up(dev, x), patch, stride, pad)
    ry = REF.patch_forward(x, patch, stride, pad)
    close(dev, y, ry, 0)
    gy = rng.normal(size=ry.shape)
    close(dev, dev.patch_backward(up(dev, gy), length, stride), REF.patch_backward(gy, length, stride))


@pytest.mark.parametrize("inverse", [False, True])
def test_revin_ops(dev, rng, inverse):
    x = rng.normal(size=(6, 17)) * 3 + 2
    mean, std = dev.revin_stats(up(dev, x), 1e-5)
    rmean, rstd = REF.revin_stats(x, 1e-5)
    close(dev, mean, rmean)
    close(dev, std, rstd)
    close(dev, dev.revin_normalize(up(dev, x), mean, std), REF.revin_normalize(x, rmean, rstd))
    close(dev, dev.revin_denormalize(up(dev, x), mean, std), REF.revin_denormalize(x, rmean, rstd))
    h, gy2, gxn = (rng.normal(size=x.shape) for _ in range(3))
    got = dev.revin_denorm_backward(up(dev, gy2), up(dev, h), std)
    want = REF.revin_denorm_backward(gy2, h, rstd)
    for g, w in zip(got, want, strict=True):
        close(dev, g, w)
    xn = REF.revin_normalize(x, rmean, rstd)
    gx = dev.revin_norm_backward(up(dev, gxn), up(dev, xn), std, got[1], got[2])
    close(dev, gx, REF.revin_norm_backward(gxn, xn, rstd, want[1], want[2]))
    x3, gy = x.reshape(2, 3, 17), rng.normal(size=(2, 3, 17))
    gamma, beta = rng.uniform(0.5, 2, size=3), rng.normal(size=3)
    y = dev.channel_affine_forward(up(dev, x3), up(dev, gamma), up(dev, beta), inverse)
    ry = REF.channel_affine_forward(x3, gamma, beta, inverse)
    close(dev, y, ry)
    gg, gb = poisoned(dev, (3,)), poisoned(dev, (3,))
    rgg, rgb = np.zeros(3), np.zeros(3)
    gx = dev.channel_affine_backward(up(dev, gy), up(dev, x3), y, up(dev, gamma), inverse, gg, gb)
    close(dev, gx, REF.channel_affine_backward(gy, x3, ry, gamma, inverse, rgg, rgb))
    close(dev, gg, rgg)
    close(dev, gb, rgb)


@pytest.mark.parametrize("model", ["patchtst", "atfnet"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_models_train_like_the_reference(rng, dtype, model):
    """A whole PatchTST / ATFNet trains identically on both backends: same losses, weights and forecasts
    after two epochs with dropout in both blocks (the counter-based masks match)."""
    from nn.atfnet import ATFNet, PatchTST
    from nn.model import Sequential

    FullRef = NumpyBackend
    FullCL = OpenCLBackend
    sizes = dict(d_model=8, n_heads=2, e_layers=2, d_ff=12, dropout=0.2, patch_len=4, stride=2, seed=5)
    if model == "atfnet":
        sizes |= dict(fnet_d_model=4, fnet_d_ff=6, fnet_layers=1, complex_dropout=0.2)
    kind = ATFNet if model == "atfnet" else PatchTST
    t = np.arange(24)[None, :, None]
    x = np.sin(2 * np.pi * t / 8) + 0.3 * rng.normal(size=(12, 24, 3))  # periodic: the F block has weight
    y = rng.normal(size=(12, 6, 3))
    runs = []
    for backend in (FullRef(), FullCL(dtype=dtype)):
        net = Sequential([kind(6, **sizes)], (24, 3), "mse", {"type": "sgd", "lr": 0.05}, backend, seed=1)
        params = net.layers[0].params
        before = {k: backend.to_numpy(v).copy() for k, v in params.items()}
        history = net.fit(x, y, epochs=2, batch_size=5, shuffle=False, progress=False)
        runs.append((history.loss, net.export_arrays(), net.predict(x)))
        still = [k for k, v in params.items() if np.array_equal(backend.to_numpy(v), before[k])]
        assert not still, f"parameters that did not train: {still}"
    tol = 1e-9 if dtype == np.float64 else 3e-4
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=tol)
    for key, want in runs[0][1].items():
        np.testing.assert_allclose(runs[1][1][key], want, rtol=tol, atol=tol)
    np.testing.assert_allclose(runs[1][2], runs[0][2], rtol=tol, atol=tol)


def test_two_stage_column_sums(rng):
    """The GPU path of the bias and layer-norm parameter sums (row slices, then their sum), forced."""

    class Sliced(CLBackend):
        def _attn_chunks(self, rows):
            return 3

    dev = Sliced(dtype=np.float64)
    x, w, gy = rng.normal(size=(17, 5)), rng.normal(size=(4, 5)), rng.normal(size=(17, 4))
    gw, gb = poisoned(dev, (4, 5)), poisoned(dev, (4,))
    dev.linear_backward(up(dev, x), up(dev, w), up(dev, gy), gw, gb, False)
    close(dev, gb, gy.sum(axis=0))
    xhat, inv, gamma = rng.normal(size=(17, 5)), rng.uniform(size=17), rng.normal(size=5)
    gg, gbeta = poisoned(dev, (5,)), poisoned(dev, (5,))
    dev.layernorm_backward(up(dev, x), up(dev, xhat), up(dev, inv), up(dev, gamma), gg, gbeta)
    close(dev, gg, (x * xhat).sum(axis=0))
    close(dev, gbeta, x.sum(axis=0))


@pytest.mark.parametrize("affine", [False, True])
def test_input_gradients_match_the_reference(rng, affine):
    """ATFNet's input gradient (RevIN and spectrum statistics included) on the device equals the reference."""
    from nn.atfnet import ATFNet
    from nn.model import Sequential

    FullRef = NumpyBackend
    FullCL = OpenCLBackend
    sizes = dict(d_model=4, n_heads=2, e_layers=1, d_ff=6, dropout=0.0, patch_len=4, stride=2, affine=affine)
    t = np.arange(24)[None, :, None]
    x = np.sin(2 * np.pi * t / 8) * 2 + 1 + rng.normal(size=(3, 24, 2)) * 0.5  # periodic: w > 0.3
    gy = rng.normal(size=(3, 5, 2))
    grads, weights = [], {}
    for be in (FullRef(), FullCL(dtype=np.float64)):
        layer = ATFNet(5, **sizes, fnet_d_model=4, fnet_d_ff=6, fnet_layers=1, complex_dropout=0.0)
        net = Sequential([layer], (24, 2), "mse", {"type": "sgd", "lr": 0.1}, be, seed=3)
        if weights:  # the reference's weights, so that only the backends differ
            net.import_arrays(weights)
        weights = net.export_arrays()
        layer.forward(be.asarray(x), False)
        assert be.to_numpy(layer.last_weight).min() > 0.3
        grads.append(be.to_numpy(layer.backward(be.asarray(gy), True)))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-9, atol=1e-10)
