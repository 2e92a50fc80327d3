"""PatchTST (``nn.atfnet.PatchTST``, ATFNet's time block) and RevIN as ONNX nodes, in float64.

Each function mirrors the NumPy reference of its layer in inference (dropout is the identity): RevIN's
per-series mean and ``√(var + eps)`` (Kim et al. 2022) with its optional per-channel affine map, PatchTST's
patching (end-padded with the last value: one ``Gather`` with a fixed index table), the patch embedding and
sinusoidal positions, post-norm encoder layers (scaled dot-product attention, GELU feed-forward, layer norm)
and the flatten head (Nie et al. 2023). Only GELU's ``erf`` runs in float32 (``networks.activation``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from nn.attention import (
    FeedForward,
    LayerNorm,
    MultiHeadSelfAttention,
    TransformerEncoderLayer,
    sinusoid_table,
)
from nn.backend import Activation
from nn.layer import Layer
from strategies.export.graph import Graph
from strategies.export.networks import activation

F64 = np.float64


def weights(layer: Layer) -> dict[str, np.ndarray]:
    """A layer's parameters as float64 arrays."""
    return {k: layer.backend.to_numpy(v).astype(F64) for k, v in layer.params.items()}


def linear(g: Graph, x: str, w: np.ndarray, b: np.ndarray | None = None) -> str:
    """``x·wᵀ + b`` over the last axis (``TokenLinear``, ``linear_forward``)."""
    y = g.matmul(x, g.const(w.T))
    return y if b is None else g.add(y, g.const(b))


def layer_norm(g: Graph, x: str, norm: LayerNorm) -> str:
    """``gamma·(x − mean)/√(var + eps) + beta`` over the last axis, the variance biased."""
    p = weights(norm)
    centred = g.sub(x, g.op("ReduceMean", x, axes=[-1], keepdims=1))
    var = g.op("ReduceMean", g.mul(centred, centred), axes=[-1], keepdims=1)
    xhat = g.mul(centred, g.div(g.const(1.0), g.op("Sqrt", g.add(var, g.const(norm.eps)))))
    return g.add(g.mul(xhat, g.const(p["gamma"])), g.const(p["beta"]))


def causal_softmax(g: Graph, scores: str, tokens: int, causal: bool) -> str:
    """Softmax over the last axis; with ``causal`` token i sees tokens j <= i only."""
    if causal:
        future = np.triu(np.ones((tokens, tokens), dtype=bool), k=1)
        scores = g.op("Where", g.const(future, np.bool_), g.const(-np.inf), scores)
    return g.op("Softmax", scores, axis=-1)


def self_attention(g: Graph, x: str, attn: MultiHeadSelfAttention) -> str:
    """``(M, S, D)``: ``softmax(q·kᵀ/√d_k)·v`` per head, fused q/k/v and output projections."""
    p = weights(attn)
    tokens, d = attn.input_shape
    h = attn.n_heads
    dk = d // h
    qkv = g.reshape(linear(g, x, p["wqkv"], p["bqkv"]), -1, tokens, 3, h, dk)  # (M, S, 3, H, dk)
    by_token = g.transpose(qkv, 2, 0, 3, 1, 4)  # (3, M, H, S, dk)
    q, v = g.take(by_token, 0, 0), g.take(by_token, 2, 0)  # (M, H, S, dk) each
    k_t = g.take(g.transpose(qkv, 2, 0, 3, 4, 1), 1, 0)  # (M, H, dk, S)
    # The scale is a row of S equal values, not a scalar, and no Transpose feeds a MatMul: ONNX Runtime
    # 1.14/1.15 would fuse either into FusedMatMul, which has no float64 kernel there.
    scale = g.const(np.full(tokens, 1.0 / math.sqrt(dk)))
    scores = g.mul(g.matmul(q, k_t), scale)  # (M, H, S, S)
    o = g.matmul(causal_softmax(g, scores, tokens, attn.causal), v)  # (M, H, S, dk)
    o = g.reshape(g.transpose(o, 0, 2, 1, 3), -1, tokens, d)  # (M, S, D): heads concatenated
    return linear(g, o, p["wo"], p["bo"])


def feed_forward(g: Graph, x: str, ffn: FeedForward) -> str:
    p = weights(ffn)
    hidden = activation(g, linear(g, x, p["w1"], p["b1"]), Activation.of(ffn.activation), F64)
    return linear(g, hidden, p["w2"], p["b2"])


def encoder_layer(g: Graph, x: str, enc: TransformerEncoderLayer) -> str:
    """Post-norm: ``x1 = LN1(x + MHA(x))``, ``LN2(x1 + FFN(x1))``."""
    c = enc.children
    x1 = layer_norm(g, g.add(x, self_attention(g, x, c["attn"])), c["norm1"])
    return layer_norm(g, g.add(x1, feed_forward(g, x1, c["ffn"])), c["norm2"])


def patchtst_backbone(g: Graph, rows: str, backbone: Layer) -> str:
    """``rows (M, L)`` normalised series -> ``(M, T)`` (``PatchTSTBackbone``)."""
    c = backbone.children
    patch = c["patch"]
    length = patch.input_shape[0]
    n_patches, patch_len = patch.output_shape
    idx = np.minimum(np.arange(n_patches)[:, None] * patch.stride + np.arange(patch_len)[None, :], length - 1)
    h = g.op("Gather", rows, g.const(idx, np.int64), axis=1)  # (M, P, patch_len), end-padded
    h = linear(g, h, weights(c["embed"])["w"])  # (M, P, D)
    h = g.add(h, g.const(sinusoid_table(*c["pos"].input_shape)))
    for i in range(backbone.e_layers):
        h = encoder_layer(g, h, c[f"enc{i}"])
    h = layer_norm(g, h, c["norm"])
    d = backbone.d_model
    h = g.reshape(g.transpose(h, 0, 2, 1), -1, d * n_patches)  # (M, D·P), each feature's patches together
    p = weights(c["head"])
    return linear(g, h, p["w"], p["b"])  # (M, T)


def channel_independent(g: Graph, x: str, layer: Layer, inner: Callable[[Graph, str, Layer], str]) -> str:
    """``x (B, L, C)`` -> ``(B, T, C)``: ``inner`` on every channel's series, with RevIN around it when the
    layer has it on (``nn.atfnet.ChannelIndependent``)."""
    length, c = layer.input_shape
    t = layer.output_shape[0]
    rows = g.reshape(g.transpose(x, 0, 2, 1), -1, length)  # (B·C, L): one row per series
    if layer.revin:
        mean = g.op("ReduceMean", rows, axes=[1], keepdims=1)  # (B·C, 1)
        centred = g.sub(rows, mean)
        var = g.op("ReduceMean", g.mul(centred, centred), axes=[1], keepdims=1)
        std = g.op("Sqrt", g.add(var, g.const(layer.eps)))
        rows = g.div(centred, std)
        if layer.affine:
            p = weights(layer)
            gamma, beta = g.const(p["gamma"][:, None]), g.const(p["beta"][:, None])  # (C, 1)
            rows = g.reshape(g.add(g.mul(g.reshape(rows, -1, c, length), gamma), beta), -1, length)
    y = inner(g, rows, layer.children["0"])  # (B·C, T)
    if layer.revin:
        if layer.affine:
            y = g.reshape(g.div(g.sub(g.reshape(y, -1, c, t), beta), gamma), -1, t)
        y = g.add(g.mul(y, std), mean)
    return g.transpose(g.reshape(y, -1, c, t), 0, 2, 1)  # (B, T, C)
