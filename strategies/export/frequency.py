"""ATFNet's frequency block and harmonic weight (``nn.atfnet``, ``nn.spectral``) as ONNX nodes, in float64.

Complex values travel as real pairs, as in ``nn``: a complex ``(M, K)`` is a real ``(M, 2K)`` with Re and Im
interleaved. A complex dense layer is then one real ``MatMul`` by the ``(2I, 2O)`` matrix of
``[[Re w, Im w], [−Im w, Re w]]`` blocks (``complex_matrix``) plus the interleaved bias; everything else
splits the pairs (``parts``), works on Re and Im, and joins them again (``joined``). The DFTs are products
with the fixed bases of ``nn.spectral`` (the extended DFT of length L+T on the L points, its inverse's last
T points), so no FFT operator is needed: ONNX's ``DFT`` is newer than the opset MetaTrader runs.
"""

from __future__ import annotations

import numpy as np

from nn.atfnet import ComplexFeatureAttention, FeatureAttentionEncoderLayer, FrequencyBlock
from nn.complex import ComplexDense, ComplexLayerNorm
from nn.spectral import extended_dft_basis, inverse_extended_dft_basis
from strategies.errors import ExportError
from strategies.export.graph import Graph
from strategies.export.transformer import causal_softmax, weights

F64 = np.float64
HARMONIC_EPS = 1e-5  # the energy's denominator offset (nn.spectral.harmonic_weight, as the official code)


def complex_matrix(w: np.ndarray) -> np.ndarray:
    """``w (O, I, 2)`` complex weights -> the ``(2I, 2O)`` real matrix of ``x·wᵀ`` on interleaved pairs."""
    out, inp = w.shape[:2]
    wr, wi = w[..., 0].T, w[..., 1].T  # (I, O)
    m = np.zeros((inp, 2, out, 2))
    m[:, 0, :, 0], m[:, 1, :, 0] = wr, -wi  # Re y = Re x·Re w − Im x·Im w
    m[:, 0, :, 1], m[:, 1, :, 1] = wi, wr  # Im y = Re x·Im w + Im x·Re w
    return m.reshape(2 * inp, 2 * out)


def complex_dense(g: Graph, x: str, w: np.ndarray, b: np.ndarray | None) -> str:
    """``(M, 2I)`` -> ``(M, 2O)``: ``x·wᵀ + b`` in complex arithmetic, ``w (O, I, 2)``, ``b (O, 2)``."""
    y = g.matmul(x, g.const(complex_matrix(w)))
    return y if b is None else g.add(y, g.const(b.reshape(-1)))


def dense_layer(g: Graph, x: str, dense: ComplexDense) -> str:
    p = weights(dense)
    return complex_dense(g, x, p["w"], p.get("b"))


def parts(g: Graph, x: str, k: int) -> tuple[str, str]:
    """Interleaved ``(M, 2K)`` -> Re and Im, ``(M, K)`` each."""
    pairs = g.reshape(x, -1, k, 2)
    return g.take(pairs, 0, 2), g.take(pairs, 1, 2)


def joined(g: Graph, re: str, im: str, k: int) -> str:
    """Re and Im ``(M, K)`` -> interleaved ``(M, 2K)``."""
    return g.reshape(g.op("Concat", g.unsqueeze(re, 2), g.unsqueeze(im, 2), axis=2), -1, 2 * k)


def _mean(g: Graph, x: str) -> str:
    return g.op("ReduceMean", x, axes=[-1], keepdims=1)


def complex_layer_norm(g: Graph, x: str, norm: ComplexLayerNorm) -> str:
    """``w·(z − μ)/√(mean|z − μ|² + eps) + b`` over the last complex axis, ``w`` and ``b`` complex."""
    d = norm.input_shape[-2]
    re, im = parts(g, x, d)
    cr, ci = g.sub(re, _mean(g, re)), g.sub(im, _mean(g, im))
    var = _mean(g, g.add(g.mul(cr, cr), g.mul(ci, ci)))
    inv = g.div(g.const(1.0), g.op("Sqrt", g.add(var, g.const(norm.eps))))
    xr, xi = g.mul(cr, inv), g.mul(ci, inv)
    p = weights(norm)
    wr, wi, br, bi = (g.const(v) for v in (p["w"][:, 0], p["w"][:, 1], p["b"][:, 0], p["b"][:, 1]))
    yr = g.add(g.sub(g.mul(wr, xr), g.mul(wi, xi)), br)
    yi = g.add(g.add(g.mul(wr, xi), g.mul(wi, xr)), bi)
    return joined(g, yr, yi, d)


def feature_attention(g: Graph, x: str, attn: ComplexFeatureAttention) -> str:
    """``(M, 2d)``: per head, ``softmax_j |q_i·k_j|`` over the ``d/H`` feature slots, times ``v_j``
    (``ComplexFeatureAttention``: width-1 keys and values, no 1/√E, the ``modulus`` score)."""
    if attn.score != "modulus":
        raise ExportError(
            f"complex attention score {attn.score!r} has no ONNX export (ATFNet uses 'modulus')"
        )
    _, d, _ = attn.input_shape
    h = attn.heads
    slots = d // h
    p = weights(attn)
    qkv = g.reshape(
        complex_dense(g, x, p["w_qkv"], p["b_qkv"]), -1, 3, slots, h, 2
    )  # (M, 3, slot, head, Re/Im)
    qkv = g.transpose(qkv, 4, 1, 0, 3, 2)  # (Re/Im, 3, M, H, slot)
    (qr, qi), (kr, ki), (vr, vi) = ((g.take(g.take(qkv, 0, 0), i, 0), g.take(g.take(qkv, 1, 0), i, 0))
                                    for i in range(3))  # fmt: skip
    col = {name: g.unsqueeze(t, 3) for name, t in (("qr", qr), ("qi", qi), ("vr", vr), ("vi", vi))}
    kr, ki = g.unsqueeze(kr, 2), g.unsqueeze(ki, 2)  # (M, H, 1, slot)
    s_re = g.sub(g.mul(col["qr"], kr), g.mul(col["qi"], ki))  # (M, H, slot, slot)
    s_im = g.add(g.mul(col["qr"], ki), g.mul(col["qi"], kr))
    modulus = g.op("Sqrt", g.add(g.mul(s_re, s_re), g.mul(s_im, s_im)))
    weight = causal_softmax(g, modulus, slots, attn.causal)

    def heads_joined(v: str) -> str:  # (M, H, slot, 1) -> (M, d), feature = slot·H + head
        return g.reshape(g.transpose(g.reshape(v, -1, h, slots), 0, 2, 1), -1, d)

    out_re = heads_joined(g.matmul(weight, col["vr"]))
    out_im = heads_joined(g.matmul(weight, col["vi"]))
    return complex_dense(g, joined(g, out_re, out_im, d), p["w_out"], p["b_out"])


def complex_encoder_layer(g: Graph, x: str, enc: FeatureAttentionEncoderLayer) -> str:
    """``h = LN1(x + MHA(x))``; ``LN2(h + W2·splitReLU(W1·h))`` (``ComplexEncoderLayer``, post-norm)."""
    c = enc.children
    h = complex_layer_norm(g, g.add(x, feature_attention(g, x, c["attn"])), c["norm1"])
    f = dense_layer(g, g.op("Relu", dense_layer(g, h, c["ff1"])), c["ff2"])
    return complex_layer_norm(g, g.add(h, f), c["norm2"])


def frequency_block(g: Graph, rows: str, block: FrequencyBlock) -> str:
    """``rows (M, L)`` -> ``(M, T)``: extended DFT, spectrum normalisation, complex embedding, encoder
    layers and projection, de-normalisation, inverse DFT (``FrequencyBlock``)."""
    length, t = block.input_shape[0], block.pred_len
    norm = block.children["norm"]
    bins = (length + t) // 2 + 1
    spec = g.matmul(rows, g.const(extended_dft_basis(length, t)))  # (M, 2F)
    re, im = parts(g, spec, bins)
    mr, mi = _mean(g, re), _mean(g, im)
    modulus = g.op("Sqrt", g.add(g.mul(re, re), g.mul(im, im)))
    dev = g.sub(modulus, _mean(g, modulus))
    var = g.div(g.op("ReduceSum", g.mul(dev, dev), g.ints(-1), keepdims=1), g.const(float(bins - norm.ddof)))
    std = g.op("Sqrt", g.add(var, g.const(norm.eps)))  # (M, 1)
    h = joined(g, g.div(g.sub(re, mr), std), g.div(g.sub(im, mi), std), bins)
    c = block.children
    h = dense_layer(g, h, c["embed"])  # (M, 2·d_model)
    for i in range(block.layers):
        h = complex_encoder_layer(g, h, c[f"enc{i}"])
    yr, yi = parts(g, dense_layer(g, h, c["proj"]), bins)
    h = joined(g, g.add(g.mul(yr, std), mr), g.add(g.mul(yi, std), mi), bins)
    basis = inverse_extended_dft_basis(length, t)
    if block.f_scaling == "official":  # the official code's irfft(X·F): the output times F/N
        basis = basis * (bins / (length + t))
    return g.matmul(h, g.const(basis))  # (M, T)


def harmonic_weight(g: Graph, rows: str, length: int) -> str:
    """``rows (M, L)`` -> ``w (M,)``: the energy of the fundamental (the largest amplitude in bins
    ``[3, F//3)`` of the de-meaned series' real DFT) and its 2nd and 3rd harmonics over the total energy
    (``nn.spectral.harmonic_weight``; a window with no such bin takes bin 0, as ``argmax`` of zeros)."""
    bins = length // 2 + 1
    theta = 2.0 * np.pi * (np.outer(np.arange(length), np.arange(bins)) % length) / length  # (L, F)
    centred = g.sub(rows, _mean(g, rows))
    re, im = g.matmul(centred, g.const(np.cos(theta))), g.matmul(centred, g.const(np.sin(theta)))
    energy = g.add(g.mul(re, re), g.mul(im, im))  # |X_k|², (M, F)
    window = np.zeros(bins)
    window[3 : bins // 3] = 1.0
    k0 = g.op("ArgMax", g.mul(energy, g.const(window)), axis=1, keepdims=1)  # (M, 1), the first maximum
    grid = g.const(np.arange(bins)[None, :], np.int64)
    peaks = None
    for harmonic in (1, 2, 3):  # k0, 2·k0, 3·k0 < F; with k0 = 0 bin 0 counts three times, as in nn
        at = g.op("Cast", g.op("Equal", grid, g.mul(k0, g.const(harmonic, np.int64))), to=11)
        term = g.op("ReduceSum", g.mul(energy, at), g.ints(1), keepdims=0)
        peaks = term if peaks is None else g.add(peaks, term)
    total = g.add(g.op("ReduceSum", energy, g.ints(1), keepdims=0), g.const(HARMONIC_EPS))
    return g.div(peaks, total)
