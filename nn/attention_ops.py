"""The attention op family of the backend contract (``nn.backend``): N-D linear maps, batched products,
attention, softmax over the last axis, layer norm, RevIN and patching, what the transformer layers and
ATFNet are written in.

Implementations: ``attention_ops_numpy.AttentionNumpyOps`` (float64, the reference) and
``attention_ops_opencl.AttentionOpenCLOps``; ``AttentionOps`` is one of ``nn.backend.FAMILIES`` and follows
its conventions (batch-first shapes, descent-convention gradients written into caller-given ``out`` views).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from nn.tensor import Tensor


@runtime_checkable
class AttentionOps(Protocol):
    """N-D linear maps, batched products, layer norm, RevIN and patching: transformers and ATFNet."""

    def linear_forward(self, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        """``x (..., I)``, ``w (O, I)``, ``b (O,)`` or ``None`` -> ``x·wᵀ + b (..., O)``.

        The N-D form of a dense layer: every leading axis is a batch axis (tokens, patches, channels)."""

    def linear_backward(
        self, x: Tensor, w: Tensor, gy: Tensor, gw_out: Tensor, gb_out: Tensor | None, need_input_grad: bool
    ) -> Tensor | None:
        """``gw_out = Σ gyᵀ·x (O, I)``, ``gb_out = Σ gy (O,)`` over all leading axes; returns ``gy·w``."""

    def bmm(
        self, a: Tensor, b: Tensor, *, trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0
    ) -> Tensor:
        """``alpha · op(a) @ op(b)`` for ``a (G, M, K)`` / ``(G, K, M)``, ``b (G, K, N)`` / ``(G, N, K)``."""

    def self_attention_forward(
        self, qkv: Tensor, heads: int, scale: float, causal: bool, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Scaled dot-product attention of every head, from the fused projection ``qkv (B, S, 3D)`` (q, k,
        v side by side, each ``D = heads·E`` as ``(heads, E)``) -> ``(o (B, S, D), a (B·heads, S, S))``.

        Per head ``a = softmax(scale·q·kᵀ)`` (``causal``: key j > query i masked) and ``o = (a ⊙ mask)·v``,
        heads concatenated; ``mask (B·heads, S, S)`` is the attention weights' inverted-dropout mask or
        ``None``; ``a`` is returned before it (the backward pass needs both)."""

    def self_attention_backward(
        self, qkv: Tensor, a: Tensor, mask: Tensor | None, go: Tensor, heads: int, scale: float
    ) -> Tensor:
        """The gradient of ``self_attention_forward`` for the output gradient ``go (B, S, D)``: ``gqkv (B, S,
        3D)`` in the projection's layout (the mask and the causal zeros of ``a`` carry over)."""

    def softmax_last_forward(self, x: Tensor, causal: bool = False) -> Tensor:
        """``x (..., S, S)`` (causal) or ``(..., C)`` -> softmax over the last axis.

        With ``causal`` the entry ``[i, j]`` of the last two axes is masked (probability 0) when ``j > i``:
        a query may only attend to itself and to earlier positions."""

    def softmax_last_backward(self, y: Tensor, gy: Tensor) -> Tensor:
        """Jacobian-vector product over the last axis: ``gx = y ⊙ (gy − Σ gy·y)`` (masked entries get 0)."""

    def layernorm_forward(
        self, x: Tensor, gamma: Tensor, beta: Tensor, eps: float
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``x (..., D)`` -> ``(y, xhat, inv_std (...,))`` with ``xhat = (x − μ)/√(σ² + eps)`` (biased σ²)
        and ``y = gamma·xhat + beta``: Ba, Kiros & Hinton 2016, as ``torch.nn.LayerNorm``."""

    def layernorm_backward(
        self, gy: Tensor, xhat: Tensor, inv_std: Tensor, gamma: Tensor, ggamma_out: Tensor, gbeta_out: Tensor
    ) -> Tensor:
        """Exact gradient through the per-row statistics; writes ``ggamma``/``gbeta (D,)``, returns gx."""

    def permute(self, x: Tensor, axes: tuple[int, ...]) -> Tensor:
        """A contiguous copy of ``x`` with its axes reordered (``numpy.transpose`` semantics)."""

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        """``a + b`` (same shape), as a new tensor: residual connections."""

    def scale(self, x: Tensor, alpha: float) -> Tensor:
        """``alpha · x`` as a new tensor."""

    def add_broadcast(self, x: Tensor, p: Tensor) -> Tensor:
        """``x (B, *S) + p (*S)``: a positional table added to every sample."""

    def sum_batch(self, g: Tensor, out: Tensor) -> None:
        """``out (*S) = Σ_B g (B, *S)``: the gradient of a parameter that was broadcast over the batch."""

    def mix_forward(self, a: Tensor, b: Tensor, w: Tensor) -> Tensor:
        """``w·a + (1 − w)·b`` for ``a, b (B, T, C)`` and one weight per sample and channel ``w (B, C)``.

        ATFNet's ensemble of the frequency (``a``) and time (``b``) forecasts."""

    def mix_backward(self, gy: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
        """Gradients of ``mix_forward`` with respect to ``a`` and ``b`` (``w`` carries no gradient)."""

    def patch_forward(self, x: Tensor, patch_len: int, stride: int, pad: int) -> Tensor:
        """``x (N, L)`` -> ``(N, P, patch_len)`` with ``P = (L + pad − patch_len)//stride + 1``.

        The series is first extended by ``pad`` copies of its last value (``ReplicationPad1d((0, pad))`` in
        PatchTST), then cut into windows of ``patch_len`` starting every ``stride`` points."""

    def patch_backward(self, gy: Tensor, length: int, stride: int) -> Tensor:
        """Scatter-add ``gy (N, P, patch_len)`` back onto ``(N, L)``; padded copies feed the last point."""

    def revin_stats(self, x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        """``x (N, L)`` -> ``mean (N,)``, ``std = √(biased var + eps) (N,)``, per window (row)."""

    def revin_normalize(self, x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        """``(x − mean)/std`` row-wise for ``x (N, L)``; ``revin_norm_backward`` is its exact gradient."""

    def revin_denormalize(self, y: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        """``y·std + mean`` row-wise for ``y (N, T)``: the forecast back in the window's units."""

    def revin_denorm_backward(self, gy: Tensor, h: Tensor, std: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Backward of ``y = h·std + mean`` for ``gy, h (N, T)``: ``(gh = gy·std, Σ_t gy, Σ_t gy·h)``.

        The two row sums are the gradients reaching ``mean`` and ``std``; ``revin_norm_backward`` carries
        them on to the window, whose statistics they are."""

    def revin_norm_backward(
        self, gxn: Tensor, xn: Tensor, std: Tensor, g_mean: Tensor, g_std: Tensor
    ) -> Tensor:
        """Exact input gradient of RevIN for ``gxn, xn (N, L)`` (``xn = (x − mean)/std``).

        ``g_mean``, ``g_std (N,)``: gradients reaching the statistics from the de-normalisation. The
        normalisation adds ``−Σ gxn/std`` and ``−Σ gxn·xn/std``; with ``∂mean/∂x_l = 1/L`` and
        ``∂std/∂x_l = xn_l/L``: ``gx = gxn/std + (G_mean + G_std·xn)/L``."""

    def channel_affine_forward(self, x: Tensor, gamma: Tensor, beta: Tensor, inverse: bool) -> Tensor:
        """``x (B, C, L)``, ``gamma, beta (C,)`` -> ``gamma·x + beta`` (``inverse``: ``(x − beta)/gamma``).

        RevIN's optional learnable affine map: applied after normalising, inverted before de-normalising."""

    def channel_affine_backward(
        self,
        gy: Tensor,
        x: Tensor,
        y: Tensor,
        gamma: Tensor,
        inverse: bool,
        ggamma_out: Tensor,
        gbeta_out: Tensor,
    ) -> Tensor:
        """Gradients of ``channel_affine_forward`` (input ``x``, output ``y``); returns ``gx (B, C, L)``.

        Forward map: ``ggamma = Σ gy·x``, ``gbeta = Σ gy``, ``gx = gamma·gy``. Inverse map ``y = (x − β)/γ``:
        ``ggamma = −Σ gy·y/γ``, ``gbeta = −Σ gy/γ``, ``gx = gy/γ`` (sums over batch and length)."""

    def stack(self, parts: list[Tensor]) -> Tensor:
        """Same-shape tensors ``(*S)`` -> one new ``(n, *S)`` tensor (the q/k/v gradients into one)."""
