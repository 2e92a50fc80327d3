"""The complex and spectral op families of the backend contract (``nn.backend``): complex-valued layers on
interleaved (Re, Im) real tensors, and the DFT, spectrum normalisation and harmonic weight of ATFNet's
frequency block.

Implementations: ``complex_ops_numpy.ComplexNumpyOps`` (float64, the reference) and
``complex_ops_opencl.ComplexOpenCLOps``, each implementing both families; ``ComplexOps`` and
``SpectralOps`` are two of ``nn.backend.FAMILIES`` and follow its conventions.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from nn.tensor import Tensor


@runtime_checkable
class ComplexOps(Protocol):
    """Complex-valued layers on interleaved ``(..., 2)`` real tensors (Re, Im): ATFNet's frequency block."""

    def complex_dense_forward(self, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        """``x (M, I, 2)``, ``w (O, I, 2)``, ``b (O, 2)`` or ``None`` -> ``y = x·wᵀ + b (M, O, 2)``."""

    def complex_dense_backward(
        self, x: Tensor, w: Tensor, gy: Tensor, gw_out: Tensor, gb_out: Tensor | None, need_input_grad: bool
    ) -> Tensor | None:
        """``gw = gyᵀ·conj(x) (O, I)``, ``gb = Σ_M gy (O,)``; returns ``gx = gy·conj(w) (M, I)`` or None."""

    def complex_activation_forward(self, x: Tensor, kind: str, alpha: float = 0.01) -> Tensor:
        """Any ``(*S, 2)``. ``relu``/``lrelu``: applied to Re and Im separately (split); ``tanh``,
        ``sigmoid``: the holomorphic complex functions (poles where ``cosh z = 0`` / ``1 + e^-z = 0``)."""

    def complex_activation_backward(
        self, x: Tensor, y: Tensor, gy: Tensor, kind: str, alpha: float = 0.01
    ) -> Tensor:
        """Split kinds: per real component. Holomorphic kinds: ``gx = conj(f'(z))·gy`` with f' from y."""

    def complex_add(self, a: Tensor, b: Tensor) -> Tensor:
        """``a + b`` (same shape): residual connections and gradient accumulation."""

    def complex_scale(self, x: Tensor, s: Tensor) -> Tensor:
        """``x (*S, 2)`` times the real ``s (*S,)``: applies a dropout mask (forward and backward)."""

    def complex_layernorm_forward(
        self, x: Tensor, w: Tensor, b: Tensor, eps: float
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Over the last complex axis D: ``c = z − mean(z)``, ``v = mean(|c|²)`` (real, biased),
        ``ẑ = c/√(v + eps)``, ``y = w·ẑ + b`` (complex products).

        ``x (M, D, 2)`` -> ``(y, ẑ, inv_std (M,))``."""

    def complex_layernorm_backward(
        self, gy: Tensor, xhat: Tensor, inv_std: Tensor, w: Tensor, gw_out: Tensor, gb_out: Tensor
    ) -> Tensor:
        """Exact gradient through the mean and the variance; writes ``gw``/``gb (D, 2)``, returns gx."""

    def complex_attention_forward(
        self, qkv: Tensor, heads: int, mode: str, causal: bool, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``qkv (B, N, 3·H·E, 2)`` (Q, K, V blocks, each head-major) -> ``(out (B, N, H·E, 2), s, p)``; or
        ``qkv (B, 3, N, H·E, 2)``: Q, K and V as three blocks of N tokens each, the same maths.

        Scores ``s = Σ_e q_e·k_e`` (complex, unconjugated, as both the official code and the port do).
        ``s, p (B, H, N, N, 2)`` are returned KEY-major, element ``[b, h, j, i]`` = ``s_ij``: the
        layout the OpenCL kernels use for coalesced access; callers only pass them on to backward.
        ``modulus``: ``p = softmax_j |s_ij|`` (real, no 1/√E; the official ATFNet code).
        ``holomorphic``: ``e = exp(clamp(Re t, ±20) + i·Im t)`` with ``t = s/√E`` and ``p = e/Σ_j e``
        (the MQL5 port). ``out_i = Σ_j p_ij·m_ij·v_j``. ``causal`` drops ``j > i`` from every row.
        ``mask (B, H, N, N)``, real and key-major like ``p``: dropout on the attention weights (the official
        code drops them); ``None`` = all ones. The returned ``p`` is the weight before the mask."""

    def complex_attention_backward(
        self,
        qkv: Tensor,
        s: Tensor,
        p: Tensor,
        gout: Tensor,
        heads: int,
        mode: str,
        causal: bool,
        mask: Tensor | None = None,
    ) -> Tensor:
        """``gout (B, N, H·E, 2)`` -> ``gqkv`` in ``qkv``'s layout; ``s``, ``p``, ``mask`` as in forward."""


@runtime_checkable
class SpectralOps(Protocol):
    """DFT as a matrix product, spectrum normalisation and ATFNet's harmonic weight."""

    def spectral_forward(self, x: Tensor, basis: Tensor) -> Tensor:
        """``x (M, K)``, constant ``basis (K, P)`` -> ``x·basis (M, P)`` (DFT as a matrix product)."""

    def spectral_backward(self, gy: Tensor, basis: Tensor) -> Tensor:
        """``gy (M, P)`` -> ``gy·basisᵀ (M, K)``: the map is real-linear, so this is its exact gradient."""

    def spectrum_norm_forward(self, x: Tensor, eps: float, ddof: int) -> tuple[Tensor, Tensor, Tensor]:
        """``x (M, F, 2)`` -> ``(y, mean (M, 2), std (M,))``: ``y = (X − mean_k X)/σ`` with
        ``σ = √(var_k |X_k| + eps)`` (variance of the magnitudes of X itself, ``ddof`` as in numpy)."""

    def spectrum_norm_backward(
        self,
        x: Tensor,
        y: Tensor,
        std: Tensor,
        gy: Tensor,
        ddof: int,
        g_mean: Tensor | None = None,
        g_std: Tensor | None = None,
    ) -> Tensor:
        """Exact gradient through the mean and σ: ``gX_k = (g_k − ḡ)/σ − R·(a_k − ā)·X_k/(a_k·σ²·(F − ddof))``
        with ``a = |X|`` and ``R = Σ_k Re(conj(g_k)·y_k)``.

        ``g_mean (M, 2)``, ``g_std (M,)``: gradients that reach the same statistics from elsewhere (the
        de-normalisation, ``spectrum_denorm_backward``); they add ``g_mean/F + g_std·(a_k − ā)·X_k/(a_k·σ·(F −
        ddof))``, since ``∂mean/∂X_k = 1/F`` and ``∂σ/∂a_k = (a_k − ā)/(σ·(F − ddof))``."""

    def spectrum_denorm_forward(self, y: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        """``y (M, F, 2)`` -> ``y·σ + mean`` with the statistics of a ``spectrum_norm_forward``."""

    def spectrum_denorm_backward(self, gy: Tensor, y: Tensor, std: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Backward of ``out = y·σ + mean`` for ``gy, y (M, F, 2)``: ``(gy·σ, Σ_k gy_k (M, 2),
        Σ_k Re(conj(gy_k)·y_k) (M,))`` — the gradients of ``y``, of the mean and of σ; the last two go to
        ``spectrum_norm_backward``, because the statistics are functions of the normalised spectrum."""

    def harmonic_weight(self, x: Tensor) -> Tensor:
        """``x (M, L)`` real -> ``(M,)``: ATFNet's share of spectral energy in the dominant harmonic set.

        ``A = |rfft(x − mean x)|`` with ``F = L//2 + 1`` bins; ``k0`` = argmax of A over ``[3, F//3)`` (first
        on ties; 0 when that range is empty); ``w = (A²[k0] + A²[2k0] + A²[3k0]) / (Σ A² + 1e-5)``."""
