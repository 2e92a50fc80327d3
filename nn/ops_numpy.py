"""The float64 reference backend: every ``Backend`` op written straight from its textbook formula.

This module is what the OpenCL kernels are checked against, and it is itself checked by central finite
differences (``tests/test_nn``). It therefore favours the obvious formula over speed, shares no code with
``ops_opencl`` and computes in float64 throughout. It is also a usable backend on its own: NumPy's BLAS
does the matrix products.

Conventions that the protocol pins down here (``nn.backend`` docstrings) and ``ops_opencl`` matches:

- Dropout keeps an element when ``uniform01(seed, counter, i) >= rate`` (``i`` = row-major flat index), so
  the kept fraction is ``1 - rate``.
- Batch normalization with a batch of one row uses the running statistics even in training (a variance
  of one sample is meaningless); its backward pass is then the gradient of that fixed affine map.
- Binary cross-entropy evaluates both value and gradient at the clipped probability ``p_c``; the gradient
  is ``(p_c - t) / (p_c (1 - p_c))`` even where clipping was active, so a saturated output still gets pushed
  back instead of receiving a zero gradient.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from nn.attention_ops_numpy import AttentionNumpyOps
from nn.backend import Activation, AttentionOps, ComplexOps, RBMOps, SpectralOps, bind_families
from nn.complex_ops_numpy import ComplexNumpyOps
from nn.dense_stack import DenseStack
from nn.random import uniform01
from nn.rbm_ops_numpy import RBMNumpyOps
from nn.threads import size_blas_threads

_BCE_CLIP = 1e-7
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function without overflow: ``e^-|x|`` never exceeds 1."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _act(x: np.ndarray, act: Activation) -> np.ndarray:
    k = act.kind
    if k == "linear":
        return act.alpha * x + act.beta
    if k == "sigmoid":
        return _sigmoid(x)
    if k == "tanh":
        return np.tanh(x)
    if k == "relu":
        return np.maximum(x, 0.0)
    if k == "lrelu":
        return np.where(x > 0, x, act.alpha * x)
    if k == "swish":
        return x * _sigmoid(act.alpha * x)
    if k == "softplus":
        return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    if k == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    raise ValueError(f"unknown activation {k!r}")


def _act_grad_from_output(y: np.ndarray, act: Activation) -> np.ndarray:
    """``act'(x)`` expressed through ``y = act(x)``: only for output-derivable kinds."""
    k = act.kind
    if k == "linear":
        return np.full_like(y, act.alpha)
    if k == "sigmoid":
        return y * (1.0 - y)
    if k == "tanh":
        return 1.0 - y * y
    if k == "relu":
        return (y > 0).astype(y.dtype)
    if k == "lrelu":
        # With a positive slope alpha, y > 0 exactly when x > 0.
        return np.where(y > 0, 1.0, act.alpha)
    raise ValueError(f"activation {k!r} cannot be differentiated from its output; use activation_backward")


def _act_grad_from_input(x: np.ndarray, act: Activation) -> np.ndarray:
    """``act'(x)`` for every kind."""
    k = act.kind
    if k == "linear":
        return np.full_like(x, act.alpha)
    if k == "sigmoid":
        s = _sigmoid(x)
        return s * (1.0 - s)
    if k == "tanh":
        t = np.tanh(x)
        return 1.0 - t * t
    if k == "relu":
        return (x > 0).astype(x.dtype)
    if k == "lrelu":
        return np.where(x > 0, 1.0, act.alpha)
    if k == "swish":
        s = _sigmoid(act.alpha * x)
        return s + act.alpha * x * s * (1.0 - s)
    if k == "softplus":
        return _sigmoid(x)
    if k == "gelu":
        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return cdf + x * pdf
    raise ValueError(f"unknown activation {k!r}")


def _regularised(w: np.ndarray, g: np.ndarray, l1: float, l2: float) -> np.ndarray:
    """``g' = g + l1·sign(w) + l2·w`` (L1 as a subgradient, never a constant shift: seed bug 3)."""
    if l1 == 0.0 and l2 == 0.0:
        return g  # callers only read g', so skip three temporaries of the whole parameter buffer
    return g + l1 * np.sign(w) + l2 * w


class NumpyBackend:
    """Float64 reference implementation of ``nn.backend.Backend``.

    The core ops are this class's methods; every other op family is one object of ``FAMILY_OPS`` (its own
    module, one job each) whose ops ``bind_families`` exposes on the backend, so every layer finds every op
    on ``backend``."""

    FAMILY_OPS: ClassVar[dict[type, type]] = {
        AttentionOps: AttentionNumpyOps,
        ComplexOps: ComplexNumpyOps,
        SpectralOps: ComplexNumpyOps,
        RBMOps: RBMNumpyOps,
    }

    def __init__(self) -> None:
        self.blas = size_blas_threads()  # BLAS threads sized to the idle CPUs, once per process (nn.threads)
        objects: dict[type, object] = {}
        for cls in set(self.FAMILY_OPS.values()):
            objects[cls] = cls()
        bind_families(self, {family: objects[cls] for family, cls in self.FAMILY_OPS.items()})
        self.name = "numpy"
        self.dtype = np.dtype(np.float64)
        self.alignment = 1

    # --- memory -------------------------------------------------------------------------------------
    def asarray(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.integer):
            return np.array(a, dtype=np.int32)
        return np.array(a, dtype=self.dtype)

    def to_numpy(self, t: np.ndarray) -> np.ndarray:
        return np.array(t)

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=self.dtype)

    def view(self, flat: np.ndarray, offset: int, shape: tuple[int, ...]) -> np.ndarray:
        size = math.prod(shape)
        if offset % self.alignment or offset < 0 or offset + size > flat.shape[0]:
            raise ValueError(f"view [{offset}, {offset + size}) outside a flat buffer of {flat.shape[0]}")
        return flat[offset : offset + size].reshape(shape)

    def fill_(self, t: np.ndarray, value: float) -> None:
        t[...] = value

    def copy_(self, dst: np.ndarray, src: np.ndarray) -> None:
        dst[...] = src

    def add_(self, dst: np.ndarray, src: np.ndarray) -> None:
        dst += src

    def gather_rows(self, src: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return src[rows]

    def synchronize(self) -> None:
        """Nothing is queued: NumPy runs synchronously."""

    def online_epoch(self, stack: DenseStack) -> None:
        """No fused epoch: NumPy trains batch 1 step by step."""
        return None

    # --- dense --------------------------------------------------------------------------------------
    def dense_forward(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, act: Activation) -> np.ndarray:
        if not act.output_derivable:
            raise ValueError(f"activation {act.kind!r} cannot be fused into a dense layer")
        return _act(x @ w.T + b, act)  # (B, I)·(I, O) -> (B, O)

    def dense_backward(
        self,
        x: np.ndarray,
        w: np.ndarray,
        y: np.ndarray,
        gy: np.ndarray,
        act: Activation,
        gw_out: np.ndarray,
        gb_out: np.ndarray,
        need_input_grad: bool,
    ) -> np.ndarray | None:
        dz = gy * _act_grad_from_output(y, act)  # (B, O)
        gw_out[...] = dz.T @ x  # (O, B)·(B, I) -> (O, I)
        gb_out[...] = dz.sum(axis=0)
        return dz @ w if need_input_grad else None  # (B, O)·(O, I) -> (B, I)

    # --- elementwise activations and softmax --------------------------------------------------------
    def activation_forward(self, x: np.ndarray, act: Activation) -> np.ndarray:
        return _act(x, act)

    def activation_backward(
        self, x: np.ndarray, y: np.ndarray, gy: np.ndarray, act: Activation
    ) -> np.ndarray:
        return gy * _act_grad_from_input(x, act)

    def softmax_forward(self, x: np.ndarray) -> np.ndarray:
        # Subtracting the row maximum keeps exp() <= 1 (seed bug 6: the unshifted exp overflows).
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def softmax_backward(self, y: np.ndarray, gy: np.ndarray) -> np.ndarray:
        return y * (gy - (gy * y).sum(axis=-1, keepdims=True))

    # --- dropout ------------------------------------------------------------------------------------
    def dropout_mask(self, shape: tuple[int, ...], rate: float, seed: int, counter: int) -> np.ndarray:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        index = np.arange(math.prod(shape), dtype=np.uint32)
        keep = uniform01(seed, counter, index) >= rate
        return (keep * (1.0 / (1.0 - rate))).astype(self.dtype).reshape(shape)

    def dropout_apply(
        self, x: np.ndarray, rate: float, seed: int, counter: int, pairs: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        if pairs and (x.ndim == 0 or x.shape[-1] != 2):
            raise ValueError(f"dropout_apply: pairs=True needs a complex (..., 2) tensor, got {x.shape}")
        mask = self.dropout_mask(x.shape[:-1] if pairs else x.shape, rate, seed, counter)
        return x * (mask[..., None] if pairs else mask), mask

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a * b

    # --- batch normalization ------------------------------------------------------------------------
    def batchnorm_forward(
        self,
        x: np.ndarray,
        gamma: np.ndarray,
        beta: np.ndarray,
        running_mean: np.ndarray,
        running_var: np.ndarray,
        training: bool,
        momentum: float,
        eps: float,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = x.shape[0]
        if training and n > 1:
            mean = x.mean(axis=0)
            var = x.var(axis=0)  # biased: the normalisation uses the batch's own spread
            running_mean[...] = (1.0 - momentum) * running_mean + momentum * mean
            running_var[...] = (1.0 - momentum) * running_var + momentum * var * (n / (n - 1))
        else:
            mean, var = running_mean, running_var
        inv_std = 1.0 / np.sqrt(var + eps)
        xhat = (x - mean) * inv_std
        return gamma * xhat + beta, xhat, inv_std

    def batchnorm_backward(
        self,
        gy: np.ndarray,
        xhat: np.ndarray,
        inv_std: np.ndarray,
        gamma: np.ndarray,
        ggamma_out: np.ndarray,
        gbeta_out: np.ndarray,
    ) -> np.ndarray:
        ggamma_out[...] = (gy * xhat).sum(axis=0)
        gbeta_out[...] = gy.sum(axis=0)
        gxhat = gy * gamma  # (B, F)
        n = gy.shape[0]
        if n == 1:
            # Forward used the running statistics: a fixed affine map of x.
            return gxhat * inv_std
        # Mean and variance depend on every row: dL/dx = inv_std/B·(B·ĝ − Σĝ − x̂·Σ(ĝ·x̂)).
        return (inv_std / n) * (n * gxhat - gxhat.sum(axis=0) - xhat * (gxhat * xhat).sum(axis=0))

    # --- losses -------------------------------------------------------------------------------------
    def loss(self, kind: str, pred: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if pred.shape != target.shape:
            raise ValueError(f"loss {kind!r}: prediction {pred.shape} and target {target.shape} differ")
        b = pred.shape[0]
        if kind == "mse":
            d = pred - target
            return np.array([np.mean(d * d)]), 2.0 * d / d.size
        if kind == "mae":
            d = pred - target
            return np.array([np.mean(np.abs(d))]), np.sign(d) / d.size
        if kind == "softmax_cce":
            shifted = pred - pred.max(axis=-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            value = -(target * log_p).sum() / b
            # d/dz of −Σ t·log softmax(z) is softmax(z)·Σt − t, i.e. p − t for targets that are
            # distributions (rows summing to 1), which is what the model feeds it (seed bug 5).
            return np.array([value]), (np.exp(log_p) - target) / b
        if kind == "bce":
            p = np.clip(pred, _BCE_CLIP, 1.0 - _BCE_CLIP)
            value = -np.mean(target * np.log(p) + (1.0 - target) * np.log(1.0 - p))
            return np.array([value]), (p - target) / (p * (1.0 - p)) / p.size
        raise ValueError(f"unknown loss {kind!r}: expected mse, mae, softmax_cce or bce")

    # --- optimizers ---------------------------------------------------------------------------------
    def sgd_update(self, w: np.ndarray, g: np.ndarray, *, lr: float, l1: float, l2: float) -> None:
        w -= lr * _regularised(w, g, l1, l2)

    def momentum_update(
        self,
        w: np.ndarray,
        g: np.ndarray,
        v: np.ndarray,
        *,
        lr: float,
        momentum: float,
        nesterov: bool,
        l1: float,
        l2: float,
    ) -> None:
        gr = _regularised(w, g, l1, l2)
        v[...] = momentum * v + gr
        w -= lr * (gr + momentum * v) if nesterov else lr * v

    def adagrad_update(
        self, w: np.ndarray, g: np.ndarray, acc: np.ndarray, *, lr: float, eps: float, l1: float, l2: float
    ) -> None:
        gr = _regularised(w, g, l1, l2)
        acc += gr * gr
        w -= lr * gr / (np.sqrt(acc) + eps)  # the gradient factor is what seed bug 1 dropped

    def rmsprop_update(
        self,
        w: np.ndarray,
        g: np.ndarray,
        acc: np.ndarray,
        *,
        lr: float,
        rho: float,
        eps: float,
        l1: float,
        l2: float,
    ) -> None:
        gr = _regularised(w, g, l1, l2)
        acc[...] = rho * acc + (1.0 - rho) * gr * gr
        w -= lr * gr / (np.sqrt(acc) + eps)

    def adadelta_update(
        self,
        w: np.ndarray,
        g: np.ndarray,
        acc_grad: np.ndarray,
        acc_delta: np.ndarray,
        *,
        lr: float,
        rho: float,
        eps: float,
        l1: float,
        l2: float,
    ) -> None:
        gr = _regularised(w, g, l1, l2)
        acc_grad[...] = rho * acc_grad + (1.0 - rho) * gr * gr
        delta = -np.sqrt(acc_delta + eps) / np.sqrt(acc_grad + eps) * gr
        acc_delta[...] = rho * acc_delta + (1.0 - rho) * delta * delta
        w += lr * delta

    def adam_update(
        self,
        w: np.ndarray,
        g: np.ndarray,
        m: np.ndarray,
        v: np.ndarray,
        *,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        step: int,
        l1: float,
        l2: float,
    ) -> None:
        if step < 1:
            raise ValueError(f"Adam step counts from 1, got {step}")
        gr = _regularised(w, g, l1, l2)
        m[...] = beta1 * m + (1.0 - beta1) * gr
        v[...] = beta2 * v + (1.0 - beta2) * gr * gr
        # Bias correction by 1 − β^t (seed bug 2 divided by the constant 1 − β).
        m_hat = m / (1.0 - beta1**step)
        v_hat = v / (1.0 - beta2**step)
        w -= lr * m_hat / (np.sqrt(v_hat) + eps)

    def clip_by_global_norm_(self, g: np.ndarray, max_norm: float) -> None:
        norm = math.sqrt(float(np.dot(g.ravel(), g.ravel())))
        if norm > max_norm:
            g *= max_norm / norm
