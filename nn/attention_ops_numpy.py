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
    """Attention/ATFNet primitives for the NumPy backend, float64 (its ``AttentionOps`` family)."""

    # --- linear maps over the last axis -----------------------------------------------------------
    def linear_forward(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        """``x (..., I)``, ``w (O, I)``, ``b (O,)`` or ``None`` -> ``x·wᵀ + b (..., O)``.

        The N-D form of a dense layer: every leading axis is a batch axis (tokens, patches, channels).
        """
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
        """``gw_out = Σ gyᵀ·x (O, I)``, ``gb_out = Σ gy (O,)`` over all leading axes; returns ``gy·w``."""
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
        """``alpha · op(a) @ op(b)`` for ``a (G, M, K)`` / ``(G, K, M)``, ``b (G, K, N)`` / ``(G, N, K)``."""
        aa = np.swapaxes(a, 1, 2) if trans_a else a
        bb = np.swapaxes(b, 1, 2) if trans_b else b
        return alpha * np.matmul(aa, bb)

    # --- softmax over the last axis ---------------------------------------------------------------
    def softmax_last_forward(self, x: np.ndarray, causal: bool = False) -> np.ndarray:
        """``x (..., S, S)`` (causal) or ``(..., C)`` -> softmax over the last axis.

        With ``causal`` the entry ``[i, j]`` of the last two axes is masked (probability 0) when ``j > i``:
        a query may only attend to itself and to earlier positions.
        """
        z = np.array(x, dtype=np.float64, copy=True)
        if causal:
            s_q, s_k = z.shape[-2], z.shape[-1]
            mask = np.arange(s_k)[None, :] > np.arange(s_q)[:, None]  # (S, S)
            z[..., mask] = -np.inf
        z -= z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    def softmax_last_backward(self, y: np.ndarray, gy: np.ndarray) -> np.ndarray:
        """Jacobian-vector product over the last axis: ``gx = y ⊙ (gy − Σ gy·y)`` (masked entries get 0)."""
        return y * (gy - (gy * y).sum(axis=-1, keepdims=True))

    # --- layer normalisation over the last axis ---------------------------------------------------
    def layernorm_forward(
        self, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``x (..., D)`` -> ``(y, xhat, inv_std (...,))`` with ``xhat = (x − μ)/√(σ² + eps)`` (biased σ²)
        and ``y = gamma·xhat + beta``: Ba, Kiros & Hinton 2016, as ``torch.nn.LayerNorm``."""
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
        """Exact gradient through the per-row statistics; writes ``ggamma``/``gbeta (D,)``, returns gx."""
        d = xhat.shape[-1]
        ggamma_out[...] = (gy * xhat).reshape(-1, d).sum(axis=0)
        gbeta_out[...] = gy.reshape(-1, d).sum(axis=0)
        g = gy * gamma  # (..., D): gradient with respect to xhat
        mean_g = g.mean(axis=-1, keepdims=True)
        mean_gx = (g * xhat).mean(axis=-1, keepdims=True)
        return inv_std[..., None] * (g - mean_g - xhat * mean_gx)

    # --- elementwise helpers ----------------------------------------------------------------------
    def permute(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """A contiguous copy of ``x`` with its axes reordered (``numpy.transpose`` semantics)."""
        return np.ascontiguousarray(np.transpose(x, axes))

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a + b`` (same shape), as a new tensor: residual connections."""
        return a + b

    def scale(self, x: np.ndarray, alpha: float) -> np.ndarray:
        """``alpha · x`` as a new tensor."""
        return alpha * x

    def add_broadcast(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``x (B, *S) + p (*S)``: a positional table added to every sample."""
        return x + p

    def sum_batch(self, g: np.ndarray, out: np.ndarray) -> None:
        """``out (*S) = Σ_B g (B, *S)``: the gradient of a parameter that was broadcast over the batch."""
        out[...] = g.sum(axis=0)

    def mix_forward(self, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``w·a + (1 − w)·b`` for ``a, b (B, T, C)`` and one weight per sample and channel ``w (B, C)``.

        ATFNet's ensemble of the frequency (``a``) and time (``b``) forecasts.
        """
        return w[:, None, :] * a + (1.0 - w[:, None, :]) * b

    def mix_backward(self, gy: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradients of ``mix_forward`` with respect to ``a`` and ``b`` (``w`` carries no gradient)."""
        return w[:, None, :] * gy, (1.0 - w[:, None, :]) * gy

    # --- PatchTST patching ------------------------------------------------------------------------
    def patch_forward(self, x: np.ndarray, patch_len: int, stride: int, pad: int) -> np.ndarray:
        """``x (N, L)`` -> ``(N, P, patch_len)`` with ``P = (L + pad − patch_len)//stride + 1``.

        The series is first extended by ``pad`` copies of its last value (``ReplicationPad1d((0, pad))`` in
        PatchTST), then cut into windows of ``patch_len`` starting every ``stride`` points.
        """
        length = x.shape[1]
        n_patches = (length + pad - patch_len) // stride + 1
        idx = np.minimum(np.arange(n_patches)[:, None] * stride + np.arange(patch_len)[None, :], length - 1)
        return x[:, idx]  # (N, P, patch_len)

    def patch_backward(self, gy: np.ndarray, length: int, stride: int) -> np.ndarray:
        """Scatter-add ``gy (N, P, patch_len)`` back onto ``(N, L)``; padded copies feed the last point."""
        n, n_patches, patch_len = gy.shape
        idx = np.minimum(np.arange(n_patches)[:, None] * stride + np.arange(patch_len)[None, :], length - 1)
        gx = np.zeros((n, length))
        np.add.at(gx, (slice(None), idx.ravel()), gy.reshape(n, -1))
        return gx

    # --- RevIN (Kim et al. 2022) ------------------------------------------------------------------
    def revin_stats(self, x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """``x (N, L)`` -> ``mean (N,)``, ``std = √(biased var + eps) (N,)``, per window (row)."""
        mean = x.mean(axis=1)
        var = ((x - mean[:, None]) ** 2).mean(axis=1)
        return mean, np.sqrt(var + eps)

    def revin_normalize(self, x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        """``(x − mean)/std`` row-wise for ``x (N, L)``; ``revin_norm_backward`` is its exact gradient."""
        return (x - mean[:, None]) / std[:, None]

    def revin_denormalize(self, y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        """``y·std + mean`` row-wise for ``y (N, T)``: the forecast back in the window's units."""
        return y * std[:, None] + mean[:, None]

    def revin_denorm_backward(
        self, gy: np.ndarray, h: np.ndarray, std: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Backward of ``y = h·std + mean`` for ``gy, h (N, T)``: ``(gh = gy·std, Σ_t gy, Σ_t gy·h)``.

        The two row sums are the gradients reaching ``mean`` and ``std``; ``revin_norm_backward`` carries
        them on to the window, whose statistics they are.
        """
        return gy * std[:, None], gy.sum(axis=1), (gy * h).sum(axis=1)

    def revin_norm_backward(
        self, gxn: np.ndarray, xn: np.ndarray, std: np.ndarray, g_mean: np.ndarray, g_std: np.ndarray
    ) -> np.ndarray:
        """Exact input gradient of RevIN for ``gxn, xn (N, L)`` (``xn = (x − mean)/std``).

        ``g_mean``, ``g_std (N,)``: gradients reaching the statistics from the de-normalisation. The
        normalisation adds ``−Σ gxn/std`` and ``−Σ gxn·xn/std``; with ``∂mean/∂x_l = 1/L`` and
        ``∂std/∂x_l = xn_l/L``: ``gx = gxn/std + (G_mean + G_std·xn)/L``.
        """
        length = xn.shape[1]
        s = std[:, None]
        gm = g_mean[:, None] - gxn.sum(axis=1, keepdims=True) / s
        gs = g_std[:, None] - (gxn * xn).sum(axis=1, keepdims=True) / s
        return gxn / s + (gm + gs * xn) / length

    def channel_affine_forward(
        self, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, inverse: bool
    ) -> np.ndarray:
        """``x (B, C, L)``, ``gamma, beta (C,)`` -> ``gamma·x + beta`` (``inverse``: ``(x − beta)/gamma``).

        RevIN's optional learnable affine map: applied after normalising, inverted before de-normalising.
        """
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
        """Gradients of ``channel_affine_forward`` (input ``x``, output ``y``); returns ``gx (B, C, L)``.

        Forward map: ``ggamma = Σ gy·x``, ``gbeta = Σ gy``, ``gx = gamma·gy``. Inverse map ``y = (x − β)/γ``:
        ``ggamma = −Σ gy·y/γ``, ``gbeta = −Σ gy/γ``, ``gx = gy/γ`` (sums over batch and length).
        """
        g = gamma[:, None]
        if inverse:
            ggamma_out[...] = -(gy * y / g).sum(axis=(0, 2))
            gbeta_out[...] = -(gy / g).sum(axis=(0, 2))
            return gy / g
        ggamma_out[...] = (gy * x).sum(axis=(0, 2))
        gbeta_out[...] = gy.sum(axis=(0, 2))
        return gy * g

    def stack(self, parts: list[np.ndarray]) -> np.ndarray:
        """Same-shape tensors ``(*S)`` -> one new ``(n, *S)`` tensor (the q/k/v gradients into one)."""
        return np.stack(parts)
