"""ATFNet's frequency block and harmonic weight (``nn.atfnet``, ``nn.spectral``) as ONNX nodes, in float64.

Complex values travel as real pairs: every complex tensor of the block is two real tensors, its real and
imaginary parts (``Pair``), from the DFT on. A complex dense layer ``x·wᵀ + b`` is four real products with
``Re w`` and ``Im w``, each stored once: ``Re y = Re x·Re wᵀ − Im x·Im wᵀ``, ``Im y = Re x·Im wᵀ +
Im x·Re wᵀ``. Split ReLU, layer norm, attention and the spectrum's normalisation work on the parts. The
DFTs are products with the fixed bases of ``nn.spectral`` (the extended DFT of length L+T on the L points,
its inverse's last T points), so no FFT operator is needed: ONNX's ``DFT`` is newer than the opset
MetaTrader runs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nn.atfnet import ComplexFeatureAttention, FeatureAttentionEncoderLayer, FrequencyBlock
from nn.complex import ComplexDense, ComplexLayerNorm
from nn.spectral import extended_dft_basis, inverse_extended_dft_basis
from strategies.errors import ExportError
from strategies.export.graph import DOUBLE, Graph
from strategies.export.transformer import causal_softmax, weights

HARMONIC_EPS = 1e-5  # the energy's denominator offset (nn.spectral.harmonic_weight, as the official code)


class Pair(NamedTuple):
    """A complex tensor as the names of its real and imaginary parts (same shape each)."""

    re: str
    im: str


def complex_dense(g: Graph, x: Pair, w: np.ndarray, b: np.ndarray | None) -> Pair:
    """``x (..., I)`` -> ``(..., O)``: ``x·wᵀ + b`` with ``w (O, I, 2)``, ``b (O, 2)`` (Re, Im last)."""
    wr, wi = g.const(w[..., 0].T), g.const(w[..., 1].T)  # (I, O) each, shared by two products
    re = g.sub(g.matmul(x.re, wr), g.matmul(x.im, wi))
    im = g.add(g.matmul(x.re, wi), g.matmul(x.im, wr))
    if b is None:
        return Pair(re, im)
    return Pair(g.add(re, g.const(b[:, 0])), g.add(im, g.const(b[:, 1])))


def dense_layer(g: Graph, x: Pair, dense: ComplexDense) -> Pair:
    p = weights(dense)
    return complex_dense(g, x, p["w"], p.get("b"))


def _mean(g: Graph, x: str) -> str:
    return g.op("ReduceMean", x, axes=[-1], keepdims=1)


def _abs2(g: Graph, x: Pair) -> str:
    return g.add(g.mul(x.re, x.re), g.mul(x.im, x.im))


def complex_layer_norm(g: Graph, x: Pair, norm: ComplexLayerNorm) -> Pair:
    """``w·(z − μ)/√(mean|z − μ|² + eps) + b`` over the last axis, ``w`` and ``b`` complex."""
    c = Pair(g.sub(x.re, _mean(g, x.re)), g.sub(x.im, _mean(g, x.im)))
    inv = g.div(g.const(1.0), g.op("Sqrt", g.add(_mean(g, _abs2(g, c)), g.const(norm.eps))))
    xr, xi = g.mul(c.re, inv), g.mul(c.im, inv)
    p = weights(norm)
    wr, wi, br, bi = (g.const(v) for v in (p["w"][:, 0], p["w"][:, 1], p["b"][:, 0], p["b"][:, 1]))
    return Pair(
        g.add(g.sub(g.mul(wr, xr), g.mul(wi, xi)), br), g.add(g.add(g.mul(wr, xi), g.mul(wi, xr)), bi)
    )


def feature_attention(g: Graph, x: Pair, attn: ComplexFeatureAttention) -> Pair:
    """``(M, d)`` complex: per head, ``softmax_j |q_i·k_j|`` over the ``d/H`` feature slots, times ``v_j``
    (``ComplexFeatureAttention``: width-1 keys and values, no 1/√E, the ``modulus`` score)."""
    if attn.score != "modulus":
        raise ExportError(
            f"complex attention score {attn.score!r} has no ONNX export (ATFNet uses 'modulus')"
        )
    _, d, _ = attn.input_shape
    h = attn.heads
    slots = d // h
    p = weights(attn)
    qkv = complex_dense(g, x, p["w_qkv"], p["b_qkv"])  # (M, 3d): part·d + slot·H + head

    def split(t: str) -> tuple[str, str, str]:  # (M, 3d) -> q, k, v as (M, H, slot)
        by_part = g.transpose(g.reshape(t, -1, 3, slots, h), 1, 0, 3, 2)  # (3, M, H, slot)
        return g.take(by_part, 0, 0), g.take(by_part, 1, 0), g.take(by_part, 2, 0)

    (qr, kr, vr), (qi, ki, vi) = split(qkv.re), split(qkv.im)
    qr, qi = g.unsqueeze(qr, 3), g.unsqueeze(qi, 3)  # (M, H, slot, 1)
    kr, ki = g.unsqueeze(kr, 2), g.unsqueeze(ki, 2)  # (M, H, 1, slot)
    scores = Pair(g.sub(g.mul(qr, kr), g.mul(qi, ki)), g.add(g.mul(qr, ki), g.mul(qi, kr)))  # (M, H, S, S)
    weight = causal_softmax(g, g.op("Sqrt", _abs2(g, scores)), slots, attn.causal)

    def heads_joined(v: str) -> str:  # weights·v: (M, H, slot) -> (M, d), feature = slot·H + head
        out = g.matmul(weight, g.unsqueeze(v, 3))  # (M, H, slot, 1)
        return g.reshape(g.transpose(g.reshape(out, -1, h, slots), 0, 2, 1), -1, d)

    return complex_dense(g, Pair(heads_joined(vr), heads_joined(vi)), p["w_out"], p["b_out"])


def complex_encoder_layer(g: Graph, x: Pair, enc: FeatureAttentionEncoderLayer) -> Pair:
    """``h = LN1(x + MHA(x))``; ``LN2(h + W2·splitReLU(W1·h))`` (``ComplexEncoderLayer``, post-norm)."""
    c = enc.children
    a = feature_attention(g, x, c["attn"])
    h = complex_layer_norm(g, Pair(g.add(x.re, a.re), g.add(x.im, a.im)), c["norm1"])
    f = dense_layer(g, h, c["ff1"])
    f = dense_layer(g, Pair(g.op("Relu", f.re), g.op("Relu", f.im)), c["ff2"])
    return complex_layer_norm(g, Pair(g.add(h.re, f.re), g.add(h.im, f.im)), c["norm2"])


def frequency_block(g: Graph, rows: str, block: FrequencyBlock) -> str:
    """``rows (M, L)`` -> ``(M, T)``: extended DFT, spectrum normalisation, complex embedding, encoder
    layers and projection, de-normalisation, inverse DFT (``FrequencyBlock``)."""
    length, t = block.input_shape[0], block.pred_len
    norm = block.children["norm"]
    bins = (length + t) // 2 + 1
    basis = extended_dft_basis(length, t).reshape(length, bins, 2)
    spec = Pair(g.matmul(rows, g.const(basis[..., 0])), g.matmul(rows, g.const(basis[..., 1])))  # (M, F)
    mean = Pair(_mean(g, spec.re), _mean(g, spec.im))
    modulus = g.op("Sqrt", _abs2(g, spec))
    dev = g.sub(modulus, _mean(g, modulus))
    var = g.div(g.op("ReduceSum", g.mul(dev, dev), g.ints(-1), keepdims=1), g.const(float(bins - norm.ddof)))
    std = g.op("Sqrt", g.add(var, g.const(norm.eps)))  # (M, 1)
    h = Pair(g.div(g.sub(spec.re, mean.re), std), g.div(g.sub(spec.im, mean.im), std))
    c = block.children
    h = dense_layer(g, h, c["embed"])  # (M, d_model)
    for i in range(block.layers):
        h = complex_encoder_layer(g, h, c[f"enc{i}"])
    y = dense_layer(g, h, c["proj"])  # (M, F)
    y = Pair(g.add(g.mul(y.re, std), mean.re), g.add(g.mul(y.im, std), mean.im))
    inverse = inverse_extended_dft_basis(length, t).reshape(bins, 2, t)  # rows: bin·2 + (Re, Im)
    if block.f_scaling == "official":  # the official code's irfft(X·F): the output times F/N
        inverse = inverse * (bins / (length + t))
    return g.add(g.matmul(y.re, g.const(inverse[:, 0])), g.matmul(y.im, g.const(inverse[:, 1])))  # (M, T)


def harmonic_weight(g: Graph, rows: str, length: int) -> str:
    """``rows (M, L)`` -> ``w (M,)``: the energy of the fundamental (the largest amplitude in bins
    ``[3, F//3)`` of the de-meaned series' real DFT) and its 2nd and 3rd harmonics over the total energy
    (``nn.spectral.harmonic_weight``; a window with no such bin takes bin 0, as ``argmax`` of zeros)."""
    bins = length // 2 + 1
    theta = 2.0 * np.pi * (np.outer(np.arange(length), np.arange(bins)) % length) / length  # (L, F)
    centred = g.sub(rows, _mean(g, rows))
    energy = _abs2(
        g, Pair(g.matmul(centred, g.const(np.cos(theta))), g.matmul(centred, g.const(np.sin(theta))))
    )
    window = np.zeros(bins)
    window[3 : bins // 3] = 1.0
    k0 = g.op("ArgMax", g.mul(energy, g.const(window)), axis=1, keepdims=1)  # (M, 1), the first maximum
    grid = g.const(np.arange(bins)[None, :], np.int64)
    peaks = None
    for harmonic in (1, 2, 3):  # k0, 2·k0, 3·k0 < F; with k0 = 0 bin 0 counts three times, as in nn
        at = g.op("Cast", g.op("Equal", grid, g.mul(k0, g.const(harmonic, np.int64))), to=DOUBLE)
        term = g.op("ReduceSum", g.mul(energy, at), g.ints(1), keepdims=0)
        peaks = term if peaks is None else g.add(peaks, term)
    total = g.add(g.op("ReduceSum", energy, g.ints(1), keepdims=0), g.const(HARMONIC_EPS))
    return g.div(peaks, total)
