"""OpenCL complex and spectral ops against the float64 NumPy reference: awkward sizes, poisoned outputs,
float32 and float64 (where the device has cl_khr_fp64), then whole layers end to end."""

from __future__ import annotations

import numpy as np
import pytest

from nn.complex import ComplexEncoderLayer
from nn.ops_numpy import NumpyBackend
from nn.spectral import (
    ExtendedDFT,
    InverseExtendedDFT,
    SpectrumNorm,
    extended_dft_basis,
    inverse_extended_dft_basis,
)


def _dtypes() -> list[str]:
    try:
        import opencl

        rt = opencl.get_runtime(dtype="float32")
    except Exception:  # no OpenCL device here: the reference tests still run
        return []
    return ["float32", "float64"] if rt.info.fp64 else ["float32"]


DTYPES = _dtypes()
pytestmark = pytest.mark.skipif(not DTYPES, reason="no OpenCL device")


_Ref = NumpyBackend


def _cl_backend_class():
    from nn.ops_opencl import OpenCLBackend
    from opencl import memory

    class _CL(OpenCLBackend):
        """The OpenCL backend; fresh outputs start as NaN (unwritten ones show)."""

        def empty(self, shape, dtype=None):
            return memory.poison(super().empty(shape, dtype))

        def to_numpy(self, t):
            return t.get().astype(np.float64)

    return _CL


@pytest.fixture(params=DTYPES)
def cl(request):
    return _cl_backend_class()(dtype=request.param)


@pytest.fixture(params=[(dt, layout) for dt in DTYPES for layout in ("cpu", "gpu")], ids=str)
def cl_layout(request):
    """Every dtype in both work-group layouts (the GPU one runs on a CPU device too)."""
    dtype, layout = request.param
    return _cl_backend_class()(dtype=dtype, layout=layout)


def _tol(cl) -> dict:
    return {"rtol": 1e-4, "atol": 2e-5} if cl.dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def _poisoned(cl, shape):
    return cl.empty(shape)


def _close(cl, got, want, scale=1.0):
    tol = _tol(cl)
    np.testing.assert_allclose(cl.to_numpy(got), want, rtol=tol["rtol"], atol=tol["atol"] * scale)


@pytest.mark.parametrize(("m", "n_in", "n_out"), [(1, 1, 1), (3, 5, 17), (130, 17, 3)])
def test_complex_dense(cl, m, n_in, n_out, rng):
    ref = _Ref()
    x, w, b = rng.normal(size=(m, n_in, 2)), rng.normal(size=(n_out, n_in, 2)), rng.normal(size=(n_out, 2))
    gy = rng.normal(size=(m, n_out, 2))
    xd, wd, bd = cl.asarray(x), cl.asarray(w), cl.asarray(b)
    _close(cl, cl.complex_dense_forward(xd, wd, bd), ref.complex_dense_forward(x, w, b), n_in)
    _close(cl, cl.complex_dense_forward(xd, wd, None), ref.complex_dense_forward(x, w, None), n_in)
    gw, gb = np.empty_like(w), np.empty_like(b)
    gx = ref.complex_dense_backward(x, w, gy, gw, gb, True)
    gwd, gbd = _poisoned(cl, w.shape), _poisoned(cl, b.shape)
    gxd = cl.complex_dense_backward(xd, wd, cl.asarray(gy), gwd, gbd, True)
    _close(cl, gxd, gx, n_out)
    _close(cl, gwd, gw, m)
    _close(cl, gbd, gb, m)
    assert cl.complex_dense_backward(xd, wd, cl.asarray(gy), gwd, None, False) is None


@pytest.mark.parametrize("kind", ["relu", "lrelu", "tanh", "sigmoid"])
@pytest.mark.parametrize("n", [1, 17, 130])
def test_complex_activation(cl, kind, n, rng):
    ref = _Ref()
    x, gy = rng.normal(size=(n, 2)) * 2, rng.normal(size=(n, 2))
    y = ref.complex_activation_forward(x, kind, 0.2)
    yd = cl.complex_activation_forward(cl.asarray(x), kind, 0.2)
    _close(cl, yd, y)
    gxd = cl.complex_activation_backward(cl.asarray(x), yd, cl.asarray(gy), kind, 0.2)
    _close(cl, gxd, ref.complex_activation_backward(x, y, gy, kind, 0.2), 10)


def test_complex_tanh_sigmoid_do_not_overflow(cl):
    x = np.array([[60.0, 1.0], [-60.0, 2.0], [-300.0, 0.5], [0.0, 0.3]])
    for kind in ("tanh", "sigmoid"):
        got = cl.to_numpy(cl.complex_activation_forward(cl.asarray(x), kind))
        assert np.all(np.isfinite(got))
        _close(cl, cl.asarray(got), _Ref().complex_activation_forward(x, kind))


@pytest.mark.parametrize("shape", [(1,), (3, 5), (17, 130)])
def test_complex_dropout_scale_and_add(cl, shape, rng):
    """A complex layer's dropout: the real mask of the logical shape scales Re and Im together."""
    ref = _Ref()
    want = ref.dropout_mask(shape, 0.3, 11, 5)
    got = cl.to_numpy(cl.dropout_mask(shape, 0.3, 11, 5))
    assert np.array_equal(got == 0, want == 0)
    _close(cl, cl.asarray(got), want)
    x = rng.normal(size=(*shape, 2))
    _close(cl, cl.complex_scale(cl.asarray(x), cl.asarray(want)), ref.complex_scale(x, want))
    _close(cl, cl.complex_add(cl.asarray(x), cl.asarray(x)), 2 * x)


@pytest.mark.parametrize(("m", "d"), [(1, 1), (3, 5), (17, 130), (130, 17)])
def test_complex_layernorm(cl, m, d, rng):
    ref = _Ref()
    x, w, b = rng.normal(size=(m, d, 2)) + 0.5, rng.normal(size=(d, 2)), rng.normal(size=(d, 2))
    gy = rng.normal(size=(m, d, 2))
    y, xhat, inv_std = ref.complex_layernorm_forward(x, w, b, 1e-5)
    yd, xhatd, invd = cl.complex_layernorm_forward(cl.asarray(x), cl.asarray(w), cl.asarray(b), 1e-5)
    for got, want in ((yd, y), (xhatd, xhat), (invd, inv_std)):
        _close(cl, got, want)
    gw, gb = np.empty_like(w), np.empty_like(b)
    gx = ref.complex_layernorm_backward(gy, xhat, inv_std, w, gw, gb)
    gwd, gbd = _poisoned(cl, w.shape), _poisoned(cl, b.shape)
    gxd = cl.complex_layernorm_backward(cl.asarray(gy), xhatd, invd, cl.asarray(w), gwd, gbd)
    _close(cl, gxd, gx, 10)
    _close(cl, gwd, gw, m)
    _close(cl, gbd, gb, m)


@pytest.mark.parametrize("mode", ["modulus", "holomorphic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    ("b", "n", "h", "e"),
    # the CPU layout's 8 query rows per vector: tails only, full vectors (ATFNet's 16 slots), a tail of 1;
    # more (b, h) matrices than its 64 items (runs of several per item)
    [(1, 1, 1, 1), (2, 5, 3, 1), (3, 17, 2, 5), (1, 3, 1, 130), (2, 70, 2, 1), (2, 16, 8, 1), (33, 9, 3, 2)],
)
def test_complex_attention(cl_layout, mode, causal, b, n, h, e, rng):
    cl = cl_layout
    ref = _Ref()
    qkv = rng.normal(size=(b, n, 3 * h * e, 2)) / np.sqrt(e)
    if mode == "holomorphic" and n > 1:
        qkv[0, 0] *= 12.0  # push some scores past the ±20 clamp
    if mode == "modulus" and n > 1:
        qkv[-1, -1, : h * e] = 0.0  # a query of zeros: |s| = 0, whose gradient is defined as 0
    gout = rng.normal(size=(b, n, h * e, 2))
    out, s, p = ref.complex_attention_forward(qkv, h, mode, causal)
    outd, sd, pd = cl.complex_attention_forward(cl.asarray(qkv), h, mode, causal)
    scale = 1.0 + np.abs(s).max()
    _close(cl, sd, s, scale)
    _close(cl, pd, p, scale)
    _close(cl, outd, out, scale)
    g = ref.complex_attention_backward(qkv, s, p, gout, h, mode, causal)
    gd = cl.complex_attention_backward(cl.asarray(qkv), sd, pd, cl.asarray(gout), h, mode, causal)
    _close(cl, gd, g, 10 * scale**2)


@pytest.mark.parametrize("mode", ["modulus", "holomorphic"])
@pytest.mark.parametrize(("b", "n", "h", "e"), [(2, 5, 3, 1), (3, 17, 2, 5), (3, 16, 4, 1)])
def test_complex_attention_with_weight_dropout(cl_layout, mode, b, n, h, e, rng):
    cl = cl_layout
    ref = _Ref()
    qkv, gout = rng.normal(size=(b, n, 3 * h * e, 2)) / np.sqrt(e), rng.normal(size=(b, n, h * e, 2))
    mask = ref.dropout_mask((b, h, n, n), 0.3, 5, 2)
    maskd = cl.dropout_mask((b, h, n, n), 0.3, 5, 2)
    _close(cl, maskd, mask, 1)
    out, s, p = ref.complex_attention_forward(qkv, h, mode, False, mask)
    outd, sd, pd = cl.complex_attention_forward(cl.asarray(qkv), h, mode, False, maskd)
    scale = 1.0 + np.abs(s).max()
    _close(cl, outd, out, scale)
    g = ref.complex_attention_backward(qkv, s, p, gout, h, mode, False, mask)
    gd = cl.complex_attention_backward(cl.asarray(qkv), sd, pd, cl.asarray(gout), h, mode, False, maskd)
    _close(cl, gd, g, 10 * scale**2)


@pytest.mark.parametrize("mode", ["modulus", "holomorphic"])
@pytest.mark.parametrize(
    ("b", "n", "h", "e", "dropped"),
    [(1, 1, 1, 1, False), (2, 9, 3, 2, True), (3, 16, 8, 1, True), (2, 17, 2, 5, False)],
)
def test_complex_attention_reads_q_k_v_as_three_blocks(cl_layout, mode, b, n, h, e, dropped, rng):
    """``qkv (B, 3, N, H·E, 2)`` (the feature-slot attention's projection, read in place) gives what the
    same values regrouped token by token give, on the device and in the reference; the gradient comes back
    in the blocks' layout."""
    cl = cl_layout
    ref = _Ref()
    blocks, gout = rng.normal(size=(b, 3, n, h * e, 2)), rng.normal(size=(b, n, h * e, 2))
    tokens = np.ascontiguousarray(blocks.transpose(0, 2, 1, 3, 4)).reshape(b, n, 3 * h * e, 2)
    mask = ref.dropout_mask((b, h, n, n), 0.3, 5, 2) if dropped else None
    maskd = None if mask is None else cl.asarray(mask)
    out, s, p = ref.complex_attention_forward(tokens, h, mode, False, mask)
    g = ref.complex_attention_backward(tokens, s, p, gout, h, mode, False, mask)
    g_blocks = np.ascontiguousarray(g.reshape(b, n, 3, h * e, 2).transpose(0, 2, 1, 3, 4))
    rout, rs, rp = ref.complex_attention_forward(blocks, h, mode, False, mask)
    np.testing.assert_allclose(rout, out, atol=1e-14)
    np.testing.assert_allclose(ref.complex_attention_backward(blocks, rs, rp, gout, h, mode, False, mask),
                               g_blocks, atol=1e-14)  # fmt: skip
    outd, sd, pd = cl.complex_attention_forward(cl.asarray(blocks), h, mode, False, maskd)
    scale = 1.0 + np.abs(s).max()
    _close(cl, outd, out, scale)
    _close(cl, sd, s, scale)
    gd = cl.complex_attention_backward(cl.asarray(blocks), sd, pd, cl.asarray(gout), h, mode, False, maskd)
    assert gd.shape == blocks.shape
    _close(cl, gd, g_blocks, 10 * scale**2)


@pytest.mark.parametrize(("seq_len", "pred_len", "rows"), [(7, 4, 1), (96, 96, 5), (17, 130, 3)])
def test_spectral_products(cl, seq_len, pred_len, rows, rng):
    ref = _Ref()
    for basis in (extended_dft_basis(seq_len, pred_len), inverse_extended_dft_basis(seq_len, pred_len)):
        x, gy = rng.normal(size=(rows, basis.shape[0])), rng.normal(size=(rows, basis.shape[1]))
        bd = cl.asarray(basis)
        _close(cl, cl.spectral_forward(cl.asarray(x), bd), ref.spectral_forward(x, basis), 10)
        _close(cl, cl.spectral_backward(cl.asarray(gy), bd), ref.spectral_backward(gy, basis), 10)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize(("m", "f"), [(1, 3), (5, 17), (3, 130)])
def test_spectrum_norm(cl, ddof, m, f, rng):
    ref = _Ref()
    x, gy = rng.normal(size=(m, f, 2)), rng.normal(size=(m, f, 2))
    y, mean, std = ref.spectrum_norm_forward(x, 1e-10, ddof)
    yd, meand, stdd = cl.spectrum_norm_forward(cl.asarray(x), 1e-10, ddof)
    for got, want in ((yd, y), (meand, mean), (stdd, std)):
        _close(cl, got, want)
    gx = ref.spectrum_norm_backward(x, y, std, gy, ddof)
    _close(cl, cl.spectrum_norm_backward(cl.asarray(x), yd, stdd, cl.asarray(gy), ddof), gx, 10)
    _close(cl, cl.spectrum_denorm_forward(yd, meand, stdd), ref.spectrum_denorm_forward(y, mean, std))
    u = rng.normal(size=(m, f, 2))  # what the model hands to de-normalisation
    got = cl.spectrum_denorm_backward(cl.asarray(gy), cl.asarray(u), stdd)
    want = ref.spectrum_denorm_backward(gy, u, std)
    for g, w in zip(got, want, strict=True):
        _close(cl, g, w, 10)
    gx = ref.spectrum_norm_backward(x, y, std, gy, ddof, want[1], want[2])
    gxd = cl.spectrum_norm_backward(cl.asarray(x), yd, stdd, cl.asarray(gy), ddof, got[1], got[2])
    _close(cl, gxd, gx, 10)


@pytest.mark.parametrize("length", [2, 7, 17, 30, 96, 130])
def test_harmonic_weight(cl_layout, length, rng):
    cl = cl_layout
    t = np.arange(length)
    k = max(3, length // 8)
    rows = [
        np.sin(2 * np.pi * k * t / length) + 0.3 * rng.normal(size=length),  # one clear fundamental
        np.full(length, 2.5),  # no energy at all
        rng.normal(size=length),
    ]
    x = np.vstack(rows + [rng.normal(size=length) for _ in range(3)])  # 6 rows: the CPU layout's 4 per item
    want = _Ref().harmonic_weight(x)
    got = cl.to_numpy(cl.harmonic_weight(cl.asarray(x)))
    if cl.dtype == np.float64:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    else:  # float32 may pick another fundamental on a near tie of pure noise: compare the structured rows
        np.testing.assert_allclose(got[:2], want[:2], rtol=1e-4, atol=1e-5)


def _bind_both(layer_ref, layer_cl, cl, input_shape, rng):
    """Bind the same random parameters to a reference layer and an OpenCL layer; return their grad dicts."""
    layer_ref.build(input_shape)
    layer_cl.build(input_shape)
    p_ref, g_ref, p_cl, g_cl = {}, {}, {}, {}
    for s in layer_ref.param_specs():
        value = rng.normal(scale=0.5, size=s.shape)
        p_ref[s.name], g_ref[s.name] = value, np.zeros(s.shape)
        p_cl[s.name], g_cl[s.name] = cl.asarray(value), _poisoned(cl, s.shape)
    layer_ref.bind(_Ref(), p_ref, g_ref, {})
    layer_cl.bind(cl, p_cl, g_cl, {})
    return g_ref, g_cl


@pytest.mark.parametrize("score", ["modulus", "holomorphic"])
def test_complex_encoder_layer_end_to_end(cl, score, rng):
    """Forward, input gradient and every parameter gradient of a whole layer, dropout included (the masks
    come from the shared counter-based hash, so both backends drop the same elements)."""
    make = lambda: ComplexEncoderLayer(heads=2, d_ff=10, dropout=0.2, score=score, seed=3)  # noqa: E731
    ref, dev = make(), make()
    g_ref, g_cl = _bind_both(ref, dev, cl, (5, 6, 2), rng)
    x, gy = rng.normal(size=(3, 5, 6, 2)), rng.normal(size=(3, 5, 6, 2))
    _close(cl, dev.forward(cl.asarray(x), True), ref.forward(x, True), 10)
    _close(cl, dev.backward(cl.asarray(gy)), ref.backward(gy), 100)
    for name, want in g_ref.items():
        _close(cl, g_cl[name], want, 100)


def test_frequency_pipeline_end_to_end(cl, rng):
    """Extended DFT -> spectrum norm -> denormalise -> inverse DFT, forward and backward, on both backends."""
    seq_len, pred_len = 24, 12
    pipes = []
    for be in (_Ref(), cl):
        layers = [ExtendedDFT(pred_len), SpectrumNorm(), InverseExtendedDFT(seq_len, pred_len)]
        shape = (2, seq_len)
        for layer in layers:
            shape = layer.build(shape)
            layer.bind(be, {}, {}, {})
        pipes.append(layers)
    x, gy = rng.normal(size=(4, 2, seq_len)), rng.normal(size=(4, 2, pred_len))
    results = []
    for (dft, norm, inv), conv in zip(pipes, (np.asarray, cl.asarray), strict=True):
        y = inv.forward(norm.denormalize(norm.forward(dft.forward(conv(x), True), True)), True)
        g = dft.backward(norm.backward(norm.denormalize_backward(inv.backward(conv(gy)))))
        results.append((y, g))
    (y_ref, g_ref), (y_cl, g_cl) = results
    np.testing.assert_allclose(y_ref, 0.0, atol=1e-12)  # spectrum of the padded input: the padding comes back
    _close(cl, y_cl, y_ref, 10)
    _close(cl, g_cl, g_ref, 10)
    # normalise then de-normalise is the identity, so the gradient is that of inverse(DFT(x)) alone
    dft, _, inv = pipes[0]
    np.testing.assert_allclose(g_ref, dft.backward(inv.backward(gy)), atol=1e-12)
