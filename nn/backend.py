"""The backend contract: the primitive operations every layer is written in, grouped in op families.

Two implementations exist behind this one interface: ``ops_numpy.NumpyBackend`` (float64, written from the
textbook formulas; the reference) and ``ops_opencl.OpenCLBackend`` (float32 by default, float64 where the
device has ``cl_khr_fp64``; one kernel launch per op, tensors never leave the device inside a training step).
Layers call only the methods declared here (``tests/test_nn/test_backend_contract.py`` parses the layer
sources to check it), so a layer is written once and runs on both.

Op families. The contract is split into one ``Protocol`` per family (``CoreOps``, ``AttentionOps``,
``ComplexOps``, ``SpectralOps``, ``RBMOps``), listed in ``FAMILIES``; ``Backend`` is their union. Each
backend builds one object per family (composition, no mixins) and exposes the family's declared ops as its
own methods (``bind_families``), so a layer still calls ``backend.bmm(...)``. Adding a family takes:

1. one ``Protocol`` with every op, typed and documented (here, or in its own module as ``nn.rbm_ops.RBMOps``
   for deep belief nets), appended to ``FAMILIES`` and to ``Backend``'s bases;
2. one implementation per backend: a plain class in ``nn/<family>_ops_numpy.py`` (no constructor arguments)
   and one in ``nn/<family>_ops_opencl.py`` (``__init__(self, launcher)``, with its kernels declared as
   ``KernelSpec`` entries next to it, launched through ``opencl.launch.Launcher``);
3. one entry in each backend's family table (``NumpyBackend.FAMILY_OPS``, ``OpenCLBackend.FAMILY_OPS``).

The contract test then checks that both backends implement every declared op with the declared signature.

Conventions shared by every op:
- Every tensor is batch-first: ``(B, ...)``. Shapes in docstrings name the axes.
- Dense weights are ``w (O, I)`` (row n holds neuron n's input weights) and bias ``b (O,)``.
- Gradients follow the descent convention: ``g = dL/dθ`` and optimizers do ``θ -= step(g)``. Losses are means
  over the batch, so parameter gradients are batch means too (the seed's ``target - output`` ascent is
  not used).
- Ops that produce a gradient of a parameter write it into a caller-given ``out`` view of the model's flat
  gradient buffer (overwrite, not accumulate). All other ops return fresh tensors (pooled on OpenCL).
- Hyper-parameters that change between steps (the Adam step counter, a scheduled learning rate) are plain
  Python numbers passed per call: they become kernel scalar arguments, never host/device transfers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

import numpy as np

from nn.dense_stack import AdamStep, DenseStack
from nn.errors import NNConfigError, NNTypeError
from nn.rbm_ops import RBMOps

if TYPE_CHECKING:  # the NumPy backend must work without pyopencl installed
    import pyopencl.array as cla

Tensor: TypeAlias = "np.ndarray | cla.Array"
"""``np.ndarray`` (float64) on the NumPy backend, ``pyopencl.array.Array`` on the OpenCL backend."""

ACTIVATIONS = ("linear", "sigmoid", "tanh", "relu", "lrelu", "swish", "softplus", "gelu")
# An activation as the kernels' ``act`` argument takes it (nn_common.h): its place in ACTIVATIONS.
ACT_CODE = {kind: code for code, kind in enumerate(ACTIVATIONS)}
# Activations whose derivative is a function of the output y alone: these may be fused into dense layers.
OUTPUT_DERIVABLE = ("linear", "sigmoid", "tanh", "relu", "lrelu")
LOSSES = ("mse", "mae", "softmax_cce", "bce")


@dataclass(frozen=True)
class Activation:
    """An elementwise activation and its parameters.

    - ``linear``: ``alpha·x + beta`` (the seed's linear layer; identity by default)
    - ``sigmoid``: ``1 / (1 + e^-x)``; ``tanh``; ``relu``: ``max(x, 0)``
    - ``lrelu``: ``x`` if ``x > 0`` else ``alpha·x`` (``alpha`` = negative slope, default 0.01)
    - ``swish``: ``x·σ(alpha·x)`` (``alpha`` = β, default 1); ``softplus``: ``log(1 + e^x)`` (stable form)
    - ``gelu``: ``x·Φ(x)`` with the exact normal CDF (``erf``), as in the original paper
    """

    kind: str = "linear"
    alpha: float = 1.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ACTIVATIONS:
            raise NNConfigError(f"unknown activation {self.kind!r}: expected one of {', '.join(ACTIVATIONS)}")

    @classmethod
    def of(cls, spec: str | dict | Activation | None) -> Activation:
        """``"tanh"``, ``{"kind": "lrelu", "alpha": 0.1}``, an ``Activation`` or ``None`` (= linear)."""
        if spec is None:
            return cls("linear")
        if isinstance(spec, Activation):
            return spec
        if isinstance(spec, str):
            return cls(spec, alpha=0.01) if spec == "lrelu" else cls(spec)
        return cls(**spec)

    @property
    def output_derivable(self) -> bool:
        return self.kind in OUTPUT_DERIVABLE


class FusedEpoch(Protocol):
    """A whole batch-1 epoch in one call (``CoreOps.online_epoch``)."""

    def run(
        self, xd: Tensor, yd: Tensor, order: np.ndarray, params: Tensor, moments: list[Tensor], adam: AdamStep
    ) -> Tensor:
        """Train one sample at a time in ``order``, updating ``params (P,)`` and Adam's ``moments``
        (``[m, v]``, each ``(P,)``) in place; returns the summed per-sample loss ``(1,)``."""


@runtime_checkable
class CoreOps(Protocol):
    """Memory, dense, activations, dropout, batch norm, losses and optimizers: the MLP of the seeds."""

    name: str  # "numpy" or "opencl:<device name>"
    dtype: np.dtype  # element type of every floating tensor
    alignment: int  # element offsets of views into a flat buffer must be multiples of this

    # --- memory -------------------------------------------------------------------------------------
    def asarray(self, a: np.ndarray) -> Tensor:
        """Copy a host array to the backend, converted to ``dtype`` (int arrays stay int32)."""

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """Copy back to the host (OpenCL: blocking read). Never called inside a training step."""

    def zeros(self, shape: tuple[int, ...]) -> Tensor: ...

    def view(self, flat: Tensor, offset: int, shape: tuple[int, ...]) -> Tensor:
        """A ``shape`` view of the 1-D ``flat`` tensor starting at element ``offset`` (aligned)."""

    def fill_(self, t: Tensor, value: float) -> None: ...

    def copy_(self, dst: Tensor, src: Tensor) -> None: ...

    def add_(self, dst: Tensor, src: Tensor) -> None:
        """``dst += src`` elementwise (same shape): accumulates losses on the device."""

    def gather_rows(self, src: Tensor, rows: Tensor) -> Tensor:
        """``src (N, ...)``, ``rows (B,) int32`` -> ``(B, ...)``: shuffled batches without host copies."""

    def synchronize(self) -> None:
        """Wait for all queued work (used for timing at epoch boundaries)."""

    # --- dense --------------------------------------------------------------------------------------
    def dense_forward(self, x: Tensor, w: Tensor, b: Tensor, act: Activation) -> Tensor:
        """``x (B, I)``, ``w (O, I)``, ``b (O,)`` -> ``y = act(x·wᵀ + b) (B, O)``.

        ``act`` must be output-derivable (``Activation.output_derivable``); others are separate layers.
        """

    def dense_backward(
        self,
        x: Tensor,
        w: Tensor,
        y: Tensor,
        gy: Tensor,
        act: Activation,
        gw_out: Tensor,
        gb_out: Tensor,
        need_input_grad: bool,
    ) -> Tensor | None:
        """With ``dz = gy ⊙ act'(y)`` (B, O): ``gw_out = dzᵀ·x`` (O, I), ``gb_out = Σ_B dz`` (O,),
        and return ``gx = dz·w`` (B, I), or ``None`` when ``need_input_grad`` is false (first layer)."""

    # --- elementwise activations and softmax --------------------------------------------------------
    def activation_forward(self, x: Tensor, act: Activation) -> Tensor:
        """Any shape -> same shape."""

    def activation_backward(self, x: Tensor, y: Tensor, gy: Tensor, act: Activation) -> Tensor:
        """``gx = gy ⊙ act'(x)`` (``y = act(x)`` given for output-derivable kinds)."""

    def softmax_forward(self, x: Tensor) -> Tensor:
        """Row-wise over the last axis, max-subtracted: ``x (B, C)`` -> ``(B, C)``."""

    def softmax_backward(self, y: Tensor, gy: Tensor) -> Tensor:
        """Jacobian-vector product: ``gx = y ⊙ (gy − Σ_c gy·y)`` row-wise."""

    # --- dropout ------------------------------------------------------------------------------------
    def dropout_mask(self, shape: tuple[int, ...], rate: float, seed: int, counter: int) -> Tensor:
        """Inverted-dropout mask: ``1/(1−rate)`` with probability ``1−rate``, else 0.

        Bits come from the counter-based hash ``nn.random.uniform01(seed, counter, index)`` so both backends
        draw identical masks and a run is reproducible without a host RNG in the training loop. Element ``i``
        (row-major flat index) is kept when ``uniform01(seed, counter, i) >= rate``.
        """

    def dropout_apply(
        self, x: Tensor, rate: float, seed: int, counter: int, pairs: bool = False
    ) -> tuple[Tensor, Tensor]:
        """``(x ⊙ mask, mask)`` with ``mask = dropout_mask(shape, rate, seed, counter)``, in one pass.

        ``shape`` is ``x.shape``; with ``pairs`` ``x`` is complex ``(..., 2)``, one draw covers each (Re, Im)
        pair and the mask has ``x.shape[:-1]``. The same bits as drawing the mask and multiplying."""

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise product of two same-shape tensors."""

    # --- batch normalization (standard: Ioffe & Szegedy 2015) ---------------------------------------
    def batchnorm_forward(
        self,
        x: Tensor,
        gamma: Tensor,
        beta: Tensor,
        running_mean: Tensor,
        running_var: Tensor,
        training: bool,
        momentum: float,
        eps: float,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``x (B, F)`` -> ``(y, xhat, inv_std)`` with ``y = gamma·xhat + beta`` (B, F), ``inv_std (F,)``.

        Training: batch mean and biased batch variance; running stats updated in place with
        ``r = (1−momentum)·r + momentum·batch`` (running variance uses the unbiased batch variance).
        Inference (or B == 1): running statistics, nothing updated.
        """

    def batchnorm_backward(
        self, gy: Tensor, xhat: Tensor, inv_std: Tensor, gamma: Tensor, ggamma_out: Tensor, gbeta_out: Tensor
    ) -> Tensor:
        """Exact batch-statistics gradient: returns ``gx (B, F)``, writes ``ggamma``/``gbeta`` (F,).

        With B == 1 the forward pass used running statistics, so ``gx = gy·gamma·inv_std`` (fixed affine map).
        """

    # --- losses -------------------------------------------------------------------------------------
    def loss(self, kind: str, pred: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        """``pred``, ``target`` (B, C) -> ``(value (1,), grad (B, C))``, the loss averaged over the batch.

        - ``mse``: mean over all elements of (p − t)²; ``mae``: mean of |p − t| (subgradient 0 at 0)
        - ``softmax_cce``: ``pred`` are LOGITS; mean over rows of −Σ t·log softmax(pred); grad (softmax − t)/B
        - ``bce``: ``pred`` are probabilities, clipped to [1e-7, 1 − 1e-7]; mean over all elements; value and
          grad ``(p_c − t)/(p_c(1 − p_c))/(B·C)`` both taken at the clipped ``p_c`` (never zeroed by the clip)
        """

    # --- optimizers: one launch over the whole flat parameter buffer --------------------------------
    # Regularisation is added to the gradient first: g' = g + l1·sign(w) + l2·w.
    def sgd_update(self, w: Tensor, g: Tensor, *, lr: float, l1: float, l2: float) -> None: ...

    def momentum_update(
        self,
        w: Tensor,
        g: Tensor,
        v: Tensor,
        *,
        lr: float,
        momentum: float,
        nesterov: bool,
        l1: float,
        l2: float,
    ) -> None:
        """``v = μ·v + g'``; ``w -= lr·v`` (Nesterov: ``w -= lr·(g' + μ·v)``)."""

    def adagrad_update(
        self, w: Tensor, g: Tensor, acc: Tensor, *, lr: float, eps: float, l1: float, l2: float
    ) -> None:
        """``G += g'²``; ``w -= lr·g'/(√G + eps)``."""

    def rmsprop_update(
        self, w: Tensor, g: Tensor, acc: Tensor, *, lr: float, rho: float, eps: float, l1: float, l2: float
    ) -> None:
        """``s = ρ·s + (1−ρ)·g'²``; ``w -= lr·g'/(√s + eps)``."""

    def adadelta_update(
        self,
        w: Tensor,
        g: Tensor,
        acc_grad: Tensor,
        acc_delta: Tensor,
        *,
        lr: float,
        rho: float,
        eps: float,
        l1: float,
        l2: float,
    ) -> None:
        """Zeiler 2012: ``E[g²] = ρE[g²] + (1−ρ)g'²``; ``Δ = −√(E[Δ²]+eps)/√(E[g²]+eps)·g'``;
        ``E[Δ²] = ρE[Δ²] + (1−ρ)Δ²``; ``w += lr·Δ`` (lr = 1 is the paper's rule)."""

    def adam_update(
        self,
        w: Tensor,
        g: Tensor,
        m: Tensor,
        v: Tensor,
        *,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        step: int,
        l1: float,
        l2: float,
    ) -> None:
        """Kingma & Ba 2015 with bias correction: ``m̂ = m/(1−β1^t)``, ``v̂ = v/(1−β2^t)``,
        ``w -= lr·m̂/(√v̂ + eps)``; ``step`` = t starts at 1."""

    def clip_by_global_norm_(self, g: Tensor, max_norm: float) -> None:
        """Scale ``g`` in place by ``min(1, max_norm/‖g‖₂)``, computed on the device (no host read)."""

    # --- whole-epoch fusions ------------------------------------------------------------------------
    def online_epoch(self, stack: DenseStack) -> FusedEpoch | None:
        """A fused batch-1 training epoch of the dense network ``stack`` describes, or ``None`` where the
        backend has none that computes exactly what the step-by-step path computes (then ``fit`` trains
        step by step)."""


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


FAMILIES: tuple[type, ...] = (CoreOps, AttentionOps, ComplexOps, SpectralOps, RBMOps)
"""Every op family of the contract; a new family appends its ``Protocol`` here (see the module docstring)."""


@runtime_checkable
class Backend(CoreOps, AttentionOps, ComplexOps, SpectralOps, RBMOps, Protocol):
    """Every family's ops on one object. Implementations: ``NumpyBackend`` (reference), ``OpenCLBackend``."""


def family_ops(family: type) -> tuple[str, ...]:
    """The op names a family ``Protocol`` declares (its own public methods, in declaration order)."""
    return tuple(n for n, v in vars(family).items() if callable(v) and not n.startswith("_"))


def bind_families(backend: object, implementations: dict[type, object]) -> None:
    """Expose each family object's declared ops as methods of ``backend``: layers call ``backend.<op>``.

    ``implementations`` maps a family ``Protocol`` to the object implementing it; every family in
    ``FAMILIES`` other than ``CoreOps`` (the backend class's own methods) must be present.
    """
    for family in FAMILIES:
        if family is CoreOps:
            continue
        ops = implementations.get(family)
        if ops is None:
            raise NNTypeError(f"{type(backend).__name__} has no implementation of {family.__name__}")
        for name in family_ops(family):
            setattr(backend, name, getattr(ops, name))
