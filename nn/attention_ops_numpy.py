"""Float64 reference of the extra primitive ops the attention layers and ATFNet need.

``AttentionNumpyOps`` is the ``AttentionOps`` family of ``NumpyBackend``: N-D linear maps, batched matrix
products, softmax over the last axis (with an optional causal mask), layer normalisation, transposes,
PatchTST patching and RevIN statistics. Every formula is written out directly from its textbook definition
so that the OpenCL versions (``AttentionOpenCLOps``) have an independent reference to be tested against;
the reference itself is checked by central finite differences in ``tests/test_nn/test_attention_ops.py``.

Conventions follow ``nn.backend``: batch-first shapes, descent-convention gradients, parameter gradients are
written (overwritten) into caller-given ``out`` views, everything else returns a fresh array.
"""

from __future__ import annotations

import numpy as np


class AttentionNumpyOps:
    """Attention/ATFNet primitives for the NumPy backend, float64 (its ``AttentionOps`` family).

    Each op's shapes and formula are documented once, on ``nn.attention_ops.AttentionOps``."""

    # --- linear maps over the last axis -----------------------------------------------------------
    def linear_forward(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        y = np.matmul(x, w.T)
        if b is not None:
            y = y + b
        return y

    def linear_backward(
        self,
        x: np.ndarray,
        w: np.ndarray,
        gy: np.ndarray,
        gw_out: np.ndarray,
        gb_out: np.ndarray | None,
        need_input_grad: bool,
    ) -> np.ndarray | None:
        x2 = x.reshape(-1, x.shape[-1])  # (M, I)
        g2 = gy.reshape(-1, gy.shape[-1])  # (M, O)
        gw_out[...] = g2.T @ x2
        if gb_out is not None:
            gb_out[...] = g2.sum(axis=0)
        return np.matmul(gy, w) if need_input_grad else None

    # --- batched matrix products ------------------------------------------------------------------
    def bmm(
        self,
        a: np.ndarray,
        b: np.ndarray,
        *,
        trans_a: bool = False,
        trans_b: bool = False,
        alpha: float = 1.0,
    ) -> np.ndarray:
        aa = np.swapaxes(a, 1, 2) if trans_a else a
        bb = np.swapaxes(b, 1, 2) if trans_b else b
        return alpha * np.matmul(aa, bb)

    # --- softmax over the last axis ---------------------------------------------------------------
    def self_attention_forward(
        self, qkv: np.ndarray, heads: int, scale: float, causal: bool, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        b, s, width = qkv.shape
        d = width // 3
        q, k, v = np.transpose(qkv.reshape(b, s, 3, heads, d // heads), (2, 0, 3, 1, 4))  # (B, H, S, E)
        a = self.softmax_last_forward(scale * np.matmul(q, np.swapaxes(k, -1, -2)), causal)  # (B, H, S, S)
        ad = a if mask is None else a * mask.reshape(a.shape)
        o = np.transpose(np.matmul(ad, v), (0, 2, 1, 3)).reshape(b, s, d)
        return o, a.reshape(b * heads, s, s)

    def self_attention_backward(
        self,
        qkv: np.ndarray,
        a: np.ndarray,
        mask: np.ndarray | None,
        go: np.ndarray,
        heads: int,
        scale: float,
    ) -> np.ndarray:
        b, s, width = qkv.shape
        d = width // 3
        e = d // heads
        q, k, v = np.transpose(qkv.reshape(b, s, 3, heads, e), (2, 0, 3, 1, 4))  # (B, H, S, E)
        a4 = a.reshape(b, heads, s, s)
        m4 = np.ones_like(a4) if mask is None else mask.reshape(a4.shape)
        g4 = np.transpose(go.reshape(b, s, heads, e), (0, 2, 1, 3))  # (B, H, S, E)
        gv = np.matmul(np.swapaxes(a4 * m4, -1, -2), g4)
        gs = self.softmax_last_backward(a4, np.matmul(g4, np.swapaxes(v, -1, -2)) * m4)
        gq = scale * np.matmul(gs, k)
        gk = scale * np.matmul(np.swapaxes(gs, -1, -2), q)
        return np.transpose(np.stack([gq, gk, gv]), (1, 3, 0, 2, 4)).reshape(b, s, width)

    def softmax_last_forward(self, x: np.ndarray, causal: bool = False) -> np.ndarray:
        z = np.array(x, dtype=np.float64, copy=True)
        if causal:
            s_q, s_k = z.shape[-2], z.shape[-1]
            mask = np.arange(s_k)[None, :] > np.arange(s_q)[:, None]  # (S, S)
            z[..., mask] = -np.inf
        z -= z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    def softmax_last_backward(self, y: np.ndarray, gy: np.ndarray) -> np.ndarray:
        return y * (gy - (gy * y).sum(axis=-1, keepdims=True))

    # --- layer normalisation over the last axis ---------------------------------------------------
    def layernorm_forward(
        self, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        inv_std = 1.0 / np.sqrt(var + eps)
        xhat = (x - mu) * inv_std
        return gamma * xhat + beta, xhat, inv_std[..., 0]

    def layernorm_backward(
        self,
        gy: np.ndarray,
        xhat: np.ndarray,
        inv_std: np.ndarray,
        gamma: np.ndarray,
        ggamma_out: np.ndarray,
        gbeta_out: np.ndarray,
    ) -> np.ndarray:
        d = xhat.shape[-1]
        ggamma_out[...] = (gy * xhat).reshape(-1, d).sum(axis=0)
        gbeta_out[...] = gy.reshape(-1, d).sum(axis=0)
        g = gy * gamma  # (..., D): gradient with respect to xhat
        mean_g = g.mean(axis=-1, keepdims=True)
        mean_gx = (g * xhat).mean(axis=-1, keepdims=True)
        return inv_std[..., None] * (g - mean_g - xhat * mean_gx)

    # --- elementwise helpers ----------------------------------------------------------------------
    def permute(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(x, axes))

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def scale(self, x: np.ndarray, alpha: float) -> np.ndarray:
        return alpha * x

    def add_broadcast(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        return x + p

    def sum_batch(self, g: np.ndarray, out: np.ndarray) -> None:
        out[...] = g.sum(axis=0)

    def mix_forward(self, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
        return w[:, None, :] * a + (1.0 - w[:, None, :]) * b

    def mix_backward(self, gy: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return w[:, None, :] * gy, (1.0 - w[:, None, :]) * gy

    # --- PatchTST patching ------------------------------------------------------------------------
    def patch_forward(self, x: np.ndarray, patch_len: int, stride: int, pad: int) -> np.ndarray:
        length = x.shape[1]
        n_patches = (length + pad - patch_len) // stride + 1
        idx = np.minimum(np.arange(n_patches)[:, None] * stride + np.arange(patch_len)[None, :], length - 1)
        return x[:, idx]  # (N, P, patch_len)

    def patch_backward(self, gy: np.ndarray, length: int, stride: int) -> np.ndarray:
        n, n_patches, patch_len = gy.shape
        idx = np.minimum(np.arange(n_patches)[:, None] * stride + np.arange(patch_len)[None, :], length - 1)
        gx = np.zeros((n, length))
        np.add.at(gx, (slice(None), idx.ravel()), gy.reshape(n, -1))
        return gx

    # --- RevIN (Kim et al. 2022) ------------------------------------------------------------------
    def revin_stats(self, x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
        mean = x.mean(axis=1)
        var = ((x - mean[:, None]) ** 2).mean(axis=1)
        return mean, np.sqrt(var + eps)

    def revin_normalize(self, x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        return (x - mean[:, None]) / std[:, None]

    def revin_denormalize(self, y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        return y * std[:, None] + mean[:, None]

    def revin_denorm_backward(
        self, gy: np.ndarray, h: np.ndarray, std: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return gy * std[:, None], gy.sum(axis=1), (gy * h).sum(axis=1)

    def revin_norm_backward(
        self, gxn: np.ndarray, xn: np.ndarray, std: np.ndarray, g_mean: np.ndarray, g_std: np.ndarray
    ) -> np.ndarray:
        length = xn.shape[1]
        s = std[:, None]
        gm = g_mean[:, None] - gxn.sum(axis=1, keepdims=True) / s
        gs = g_std[:, None] - (gxn * xn).sum(axis=1, keepdims=True) / s
        return gxn / s + (gm + gs * xn) / length

    def channel_affine_forward(
        self, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, inverse: bool
    ) -> np.ndarray:
        g, b = gamma[:, None], beta[:, None]
        return (x - b) / g if inverse else g * x + b

    def channel_affine_backward(
        self,
        gy: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        gamma: np.ndarray,
        inverse: bool,
        ggamma_out: np.ndarray,
        gbeta_out: np.ndarray,
    ) -> np.ndarray:
        g = gamma[:, None]
        if inverse:
            ggamma_out[...] = -(gy * y / g).sum(axis=(0, 2))
            gbeta_out[...] = -(gy / g).sum(axis=(0, 2))
            return gy / g
        ggamma_out[...] = (gy * x).sum(axis=(0, 2))
        gbeta_out[...] = gy.sum(axis=(0, 2))
        return gy * g

    def stack(self, parts: list[np.ndarray]) -> np.ndarray:
        return np.stack(parts)
