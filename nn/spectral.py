"""Spectral layers of ATFNet's frequency block: extended DFT, its inverse, spectrum normalisation, and the
harmonic-energy weight that mixes the F and T forecasts.

ATFNet (Ye et al. 2024, arXiv 2404.05192; seed 003) forecasts the spectrum of the WHOLE window of length
``N = L + T`` (history plus horizon) from the L known points: the "extended DFT" applies the length-N DFT
basis to the L points, i.e. zero-pads by T, takes the real FFT and divides by N, keeping bins
``0..N//2`` (``F = N//2 + 1``). The inverse runs the real inverse FFT of length N (undoing the 1/N) and
keeps the last T points: the forecast.

L and T are small (96..720), so both transforms are matrix products against precomputed cos/sin bases —
one GEMM on the device, no FFT kernel — and since they are real-linear maps of (Re, Im), their gradient
is the product with the transposed basis. Angles are reduced as ``(k·n) mod N`` in integers first, so the
bases are exact to float64 rounding for any N.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from nn.backend import Backend, Tensor
from nn.errors import NNConfigError
from nn.layer import Layer
from nn.layers import register_layer


def _angles(n_total: int, bins: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``2π·(k·n mod N)/N`` for every (time n, bin k): ``(len(times), len(bins))``."""
    return 2.0 * np.pi * (np.outer(times, bins) % n_total) / n_total


def extended_dft_basis(seq_len: int, pred_len: int) -> np.ndarray:
    """``(L, 2F)`` real matrix: ``x (M, L) · basis = (M, F, 2)`` spectrum of x zero-padded to N, over N."""
    n_total = seq_len + pred_len
    theta = _angles(n_total, np.arange(n_total // 2 + 1), np.arange(seq_len))  # (L, F)
    basis = np.stack([np.cos(theta), -np.sin(theta)], axis=-1) / n_total  # (L, F, 2)
    return basis.reshape(seq_len, -1)


def inverse_extended_dft_basis(seq_len: int, pred_len: int) -> np.ndarray:
    """``(2F, T)`` real matrix: ``X (M, F, 2) · basis`` = the last T points of ``irfft(X·N, n=N)``.

    Bin k contributes ``c_k·(Re X_k·cos θ − Im X_k·sin θ)`` with ``c_k = 2`` except ``c_0 = 1`` and, for even
    N, ``c_{N/2} = 1`` (Im of those bins has no effect, as in ``numpy.fft.irfft``).
    """
    n_total = seq_len + pred_len
    bins = np.arange(n_total // 2 + 1)
    c = np.full(bins.shape, 2.0)
    c[0] = 1.0
    if n_total % 2 == 0:
        c[-1] = 1.0
    theta = _angles(n_total, bins, np.arange(seq_len, n_total))  # (T, F)
    basis = np.stack([c * np.cos(theta), -c * np.sin(theta)], axis=-1)  # (T, F, 2)
    return basis.reshape(pred_len, -1).T.copy()


@register_layer
class ExtendedDFT(Layer):
    """Extended DFT over the last axis: real ``(*lead, L) -> (*lead, F, 2)`` complex, ``F = (L+T)//2 + 1``.

    Equals ``rfft(pad(x, T zeros)) / (L+T)`` (the official ATFNet F block); no parameters.
    """

    type_name: ClassVar[str] = "extended_dft"

    def __init__(self, pred_len: int) -> None:
        super().__init__()
        if pred_len < 1:
            raise NNConfigError(f"extended_dft: pred_len must be >= 1, got {pred_len}")
        self.pred_len = pred_len
        self.basis: Tensor | None = None

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) < 1 or input_shape[-1] < 1:
            raise NNConfigError(
                f"extended_dft: input shape {input_shape} must end with the series length L >= 1"
            )
        self.input_shape = tuple(input_shape)
        bins = (input_shape[-1] + self.pred_len) // 2 + 1
        self.output_shape = (*input_shape[:-1], bins, 2)
        return self.output_shape

    def constant_elements(self) -> int:
        return self.input_shape[-1] * 2 * self.output_shape[-2]  # the (L, 2F) basis

    def bind(self, backend: Backend, params: dict, grads: dict, state: dict) -> None:
        super().bind(backend, params, grads, state)
        self.basis = backend.asarray(extended_dft_basis(self.input_shape[-1], self.pred_len))

    def forward(self, x: Tensor, training: bool) -> Tensor:
        y = self.backend.spectral_forward(x.reshape(-1, self.input_shape[-1]), self.basis)  # (M, 2F)
        return y.reshape(x.shape[0], *self.output_shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        if not need_input_grad:
            return None
        gx = self.backend.spectral_backward(gy.reshape(-1, 2 * self.output_shape[-2]), self.basis)  # (M, L)
        return gx.reshape(gy.shape[0], *self.input_shape)


@register_layer
class InverseExtendedDFT(Layer):
    """Inverse of ``ExtendedDFT``: complex ``(*lead, F, 2) -> (*lead, T)`` real, the last T points of
    ``irfft(X·(L+T), n=L+T)``. ``F`` must be ``(L+T)//2 + 1``; no parameters."""

    type_name: ClassVar[str] = "inverse_extended_dft"

    def __init__(self, seq_len: int, pred_len: int) -> None:
        super().__init__()
        if seq_len < 1 or pred_len < 1:
            raise NNConfigError(
                f"inverse_extended_dft: seq_len and pred_len must be >= 1, got {seq_len}, {pred_len}"
            )
        self.seq_len, self.pred_len = seq_len, pred_len
        self.basis: Tensor | None = None

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        bins = (self.seq_len + self.pred_len) // 2 + 1
        if len(input_shape) < 2 or tuple(input_shape[-2:]) != (bins, 2):
            raise NNConfigError(
                f"inverse_extended_dft: input shape {input_shape} must end with ({bins}, 2): the"
                f" (seq_len + pred_len)//2 + 1 complex bins of seq_len={self.seq_len},"
                f" pred_len={self.pred_len}"
            )
        self.input_shape = tuple(input_shape)
        self.output_shape = (*input_shape[:-2], self.pred_len)
        return self.output_shape

    def constant_elements(self) -> int:
        return 2 * self.input_shape[-2] * self.pred_len  # the (2F, T) basis

    def bind(self, backend: Backend, params: dict, grads: dict, state: dict) -> None:
        super().bind(backend, params, grads, state)
        self.basis = backend.asarray(inverse_extended_dft_basis(self.seq_len, self.pred_len))

    def forward(self, x: Tensor, training: bool) -> Tensor:
        y = self.backend.spectral_forward(x.reshape(-1, 2 * self.input_shape[-2]), self.basis)  # (M, T)
        return y.reshape(x.shape[0], *self.output_shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        if not need_input_grad:
            return None
        gx = self.backend.spectral_backward(gy.reshape(-1, self.pred_len), self.basis)  # (M, 2F)
        return gx.reshape(gy.shape[0], *self.input_shape)


@register_layer
class SpectrumNorm(Layer):
    """Per-row spectrum normalisation over the bin axis: ``(*lead, F, 2) -> (*lead, F, 2)``.

    ``y = (X − mean_k X_k) / σ`` with ``σ = √(var_k |X_k| + eps)`` — the official F block's "frequency
    normalisation" (its ``torch.var`` is unbiased: ``ddof = 1``). ``denormalize`` / ``denormalize_backward``
    apply the inverse with the statistics of the latest ``forward`` (``y·σ + mean``). ``backward`` is the
    exact gradient through both statistics, including their use by ``denormalize`` when
    ``denormalize_backward`` ran first (as in a backward pass through normalise -> model -> de-normalise),
    so the input gradient of the whole F block is exact. Parameter gradients do not depend on those paths:
    they match the official code, which detaches the mean.
    """

    type_name: ClassVar[str] = "spectrum_norm"

    def __init__(self, eps: float = 1e-10, ddof: int = 1) -> None:
        super().__init__()
        if eps < 0 or ddof not in (0, 1):
            raise NNConfigError(
                f"spectrum_norm: need eps >= 0 and ddof in (0, 1), got eps={eps}, ddof={ddof}"
            )
        self.eps, self.ddof = eps, ddof
        self.mean: Tensor | None = None  # (M, 2) complex mean per row, M = batch·lead
        self.std: Tensor | None = None  # (M,)
        self._x: Tensor | None = None
        self._y: Tensor | None = None
        self._yd: Tensor | None = None  # input of the latest denormalize
        self._g_stats: tuple[Tensor, Tensor] | None = None  # (g_mean, g_std) from denormalize_backward

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) < 2 or input_shape[-1] != 2 or input_shape[-2] <= self.ddof:
            raise NNConfigError(
                f"spectrum_norm: input shape {input_shape} must be (..., F, 2) with F > ddof={self.ddof} bins"
            )
        self.input_shape = self.output_shape = tuple(input_shape)
        return self.output_shape

    def forward(self, x: Tensor, training: bool) -> Tensor:
        self._x = x.reshape(-1, self.input_shape[-2], 2)  # (M, F, 2)
        self._yd, self._g_stats = None, None
        self._y, self.mean, self.std = self.backend.spectrum_norm_forward(self._x, self.eps, self.ddof)
        return self._y.reshape(x.shape)

    def backward(self, gy: Tensor, need_input_grad: bool = True) -> Tensor | None:
        if not need_input_grad:
            return None
        g = gy.reshape(-1, self.input_shape[-2], 2)
        g_mean, g_std = self._g_stats or (None, None)
        self._g_stats = None
        gx = self.backend.spectrum_norm_backward(self._x, self._y, self.std, g, self.ddof, g_mean, g_std)
        return gx.reshape(gy.shape)

    def denormalize(self, y: Tensor) -> Tensor:
        """``y (B, *lead, F, 2)`` -> ``y·σ + mean`` per row, using the latest forward's statistics."""
        self._check_stats(y)
        self._yd = y.reshape(-1, y.shape[-2], 2)
        return self.backend.spectrum_denorm_forward(self._yd, self.mean, self.std).reshape(y.shape)

    def denormalize_backward(self, gy: Tensor) -> Tensor:
        """Gradient of ``denormalize`` w.r.t. its input (``gy·σ``); the gradients reaching the statistics are
        kept for the next ``backward``."""
        self._check_stats(gy)
        if self._yd is None:
            raise ValueError("spectrum_norm: denormalize_backward needs a denormalize first")
        gx, g_mean, g_std = self.backend.spectrum_denorm_backward(
            gy.reshape(-1, gy.shape[-2], 2), self._yd, self.std
        )
        self._g_stats = (g_mean, g_std)
        return gx.reshape(gy.shape)

    def _check_stats(self, y: Tensor) -> None:
        if self.std is None:
            raise ValueError("spectrum_norm: denormalize needs the statistics of a forward pass first")
        rows = int(np.prod(y.shape[:-2]))
        if y.shape[-1] != 2 or rows != self.std.shape[0]:
            raise ValueError(
                f"spectrum_norm: cannot denormalize shape {tuple(y.shape)}: the statistics cover"
                f" {self.std.shape[0]} rows of (F, 2) complex bins"
            )


def harmonic_weight(backend: Backend, x: Tensor) -> Tensor:
    """ATFNet's F/T mixing weight per row: ``x (M, L)`` real series -> ``w (M,)`` in [0, 1].

    Amplitude spectrum of the de-meaned series (``F = L//2 + 1`` bins); fundamental ``k0`` = the largest bin
    in ``[3, F//3)``; ``w`` = energy of ``k0, 2k0, 3k0`` over total energy (+1e-5, as the official code). The
    forecast is ``w·y_F + (1 − w)·y_T``: a strongly periodic window trusts the frequency block. Computed
    from the input only; no parameters and no gradient.
    """
    if len(x.shape) != 2 or x.shape[1] < 2:
        raise ValueError(f"harmonic_weight: x must be (rows, length >= 2), got shape {tuple(x.shape)}")
    return backend.harmonic_weight(x)
