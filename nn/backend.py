"""The backend contract: the primitive operations every layer is written in, grouped in op families.

Two implementations exist behind this one interface: ``ops_numpy.NumpyBackend`` (float64, written from the
textbook formulas; the reference) and ``ops_opencl.OpenCLBackend`` (float32 by default, float64 where the
device has ``cl_khr_fp64``; one kernel launch per op, tensors never leave the device inside a training step).
Layers call only the methods the contract declares (``tests/test_nn/test_backend_contract.py`` parses the
layer sources to check it), so a layer is written once and runs on both.

Op families. The contract is split into one ``Protocol`` per family (``CoreOps`` here, ``AttentionOps`` in
``nn.attention_ops``, ``ComplexOps`` and ``SpectralOps`` in ``nn.complex_ops``, ``RBMOps`` in
``nn.rbm_ops``; all importable from here), listed in ``FAMILIES``; ``Backend`` is their union. Each
backend builds one object per family (composition, no mixins) and exposes the family's declared ops as its
own methods (``bind_families``), so a layer still calls ``backend.bmm(...)``. Adding a family takes:

1. one ``Protocol`` with every op, typed and documented, in its own module (as ``nn.rbm_ops.RBMOps`` for
   deep belief nets; its tensors typed ``nn.tensor.Tensor``), appended to ``FAMILIES`` and to ``Backend``'s
   bases;
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
from typing import Protocol, runtime_checkable

import numpy as np

from nn.attention_ops import AttentionOps
from nn.complex_ops import ComplexOps, SpectralOps
from nn.dense_stack import AdamStep, DenseStack
from nn.errors import NNConfigError, NNTypeError
from nn.rbm_ops import RBMOps
from nn.tensor import Tensor as Tensor

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
