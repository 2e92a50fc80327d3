"""The float64 reference of the RBM ops (``nn.rbm_ops.RBMOps``), written straight from spec dbn.md §3.

Shares no code with ``rbm_ops_opencl``; the OpenCL kernels are tested against it. Tensors are host arrays.
"""

from __future__ import annotations

import math

import numpy as np

from nn.random import uniform01
from nn.rbm_ops import (
    ADAPT_LR_MAX,
    ADAPT_LR_MIN,
    COSINE,
    LEN2,
    LR,
    MAX_INC,
    MOMENTUM,
    PREV_LEN2,
    RECON_KINDS,
    RBMState,
)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function without overflow."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _check_kind(kind: str) -> None:
    if kind not in RECON_KINDS:
        raise ValueError(f"reconstruction error kind must be one of {', '.join(RECON_KINDS)}, got {kind!r}")


def recon_terms(x: np.ndarray, p: np.ndarray, kind: str) -> np.ndarray:
    """Elementwise reconstruction error (spec §3.2)."""
    _check_kind(kind)
    if kind == "mse":
        return (p - x) ** 2
    return -(x * np.log(p + 1e-10) + (1.0 - x) * np.log(1.0 - p + 1e-10))


class RBMNumpyOps:
    """``RBMOps`` on host float64 arrays (``NumpyBackend.FAMILY_OPS``)."""

    def rbm_hidden_probs(self, v: np.ndarray, w: np.ndarray, c: np.ndarray) -> np.ndarray:
        return sigmoid(v @ w.T + c)

    def rbm_visible_probs(self, h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        return sigmoid(h @ w + b)

    def rbm_sample(self, p: np.ndarray, seed: int, counter: int) -> np.ndarray:
        u = uniform01(seed, counter, np.arange(p.size, dtype=np.uint32)).reshape(p.shape)
        return (u < p).astype(np.float64)

    def rbm_recon_error(self, x: np.ndarray, p: np.ndarray, kind: str) -> np.ndarray:
        return np.array([recon_terms(x, p, kind).sum()])

    def rbm_max_abs(self, t: np.ndarray) -> np.ndarray:
        return np.array([np.abs(t).max() if t.size else 0.0])

    def rbm_try_errors(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        # batched matmuls (BLAS), not einsum (a loop without BLAS: 3x slower on the initial weight search)
        h = sigmoid(x @ w.transpose(0, 2, 1) + c[:, None, :])  # (N, V)·(T, V, H) -> (T, N, H)
        p = sigmoid(h @ w + b[:, None, :])  # (T, N, H)·(T, H, V) -> (T, N, V)
        return ((p - x[None]) ** 2).sum(axis=(1, 2))

    def rbm_update(
        self,
        state: RBMState,
        v1,
        h_data,
        q1,
        v2,
        q2,
        x_mean,
        *,
        weight_penalty,
        sparsity_penalty,
        sparsity_target,
    ) -> None:
        n = v1.shape[0]
        hy = state.hyper
        lr, mom = hy[LR], hy[MOMENTUM]
        # 1. hidden bias, with the smoothed on-fraction and the sparsity/saturation term
        frac = q1.sum(axis=0) / n
        s = state.on_frac
        s[:] = 0.95 * s + 0.05 * frac
        sp = sparsity_penalty * (s - sparsity_target)
        sp += np.where(s < 0.01, 0.5 * (s - 0.01), 0.0) + np.where(s > 0.99, 0.5 * (s - 0.99), 0.0)
        state.c_inc[:] = mom * state.c_inc + lr * ((h_data - q2).sum(axis=0) / n - sp)
        state.c += state.c_inc
        # 2. weights
        g = (h_data.T @ v1 - q2.T @ v2) / n - weight_penalty * state.w - np.outer(sp, x_mean)
        state.w_inc[:] = mom * state.w_inc + lr * g
        state.w += state.w_inc
        hy[MAX_INC] = max(hy[MAX_INC], np.abs(state.w_inc).max() if g.size else 0.0)
        # 3. visible bias
        state.b_inc[:] = mom * state.b_inc + lr * (v1 - v2).sum(axis=0) / n
        state.b += state.b_inc
        # 4. learning rate / momentum from the cosine of successive weight gradients
        len2, dot = float((g * g).sum()), float((g * state.g_prev).sum())
        if hy[PREV_LEN2] > 0.0 and len2 > 0.0:
            cos = dot / math.sqrt(len2 * hy[PREV_LEN2])
            hy[COSINE] = cos
            hy[LR] = adapt_lr(hy[LR], cos)
            if abs(cos) > 0.3:
                hy[MOMENTUM] /= 1.5
        hy[PREV_LEN2] = len2
        hy[LEN2] = len2
        state.g_prev[:] = g

    def dbn_dot(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([float(np.vdot(a, b))])

    def dbn_axpby(self, alpha: float, x: np.ndarray, beta: float, y: np.ndarray) -> np.ndarray:
        return alpha * x + beta * y

    def dbn_weight_penalty(
        self, theta: np.ndarray, mask: np.ndarray, coef: float, grad: np.ndarray | None
    ) -> np.ndarray:
        if grad is not None:
            grad += 2.0 * coef * mask * theta
        return np.array([coef * float((mask * theta * theta).sum())])


def adapt_lr(lr: float, cos: float) -> float:
    """Spec §3.7: lengthen steps that keep pointing the same way, shorten ones that overshoot."""
    if cos > 0.5:
        lr *= 1.2
    elif cos > 0.3:
        lr *= 1.1
    elif cos < -0.5:
        lr /= 1.2
    elif cos < -0.3:
        lr /= 1.1
    return min(max(lr, ADAPT_LR_MIN), ADAPT_LR_MAX)
