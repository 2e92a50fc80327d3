"""The RBM op family: the primitives a restricted Boltzmann machine trains with, on every backend.

Implementations: ``rbm_ops_numpy.RBMNumpyOps`` (float64, written from the formulas; the reference) and
``rbm_ops_opencl.RBMOpenCLOps`` (one or a few launches per op, GEMM for the products, kernels declared
in its ``KERNELS`` table). ``RBMOps`` is one of ``nn.backend.FAMILIES``: each backend lists its
implementation in ``FAMILY_OPS`` and exposes the ops as its own methods (``backend.rbm_update``), and the
contract test checks both. ``nn.rbm.train_rbm`` is written only in these ops and the backend's memory ops
(``asarray``, ``to_numpy``, ``gather_rows``, ``add_``), so one trainer runs on both.

The family also holds the three vector ops the DBN's supervised head needs on the device (``dbn_dot``,
``dbn_axpby``, ``dbn_weight_penalty``): with the core dense and loss ops they let ``nn.mlfn_device``
evaluate the head's criterion and gradient, and ``nn.cg`` run its line searches, without moving a weight
vector to the host.

Conventions (spec dbn.md §3):
- ``w (H, V)``: row i holds hidden neuron i's weights; ``b (V,)`` visible bias, ``c (H,)`` hidden bias.
- Batches are ``(B, V)`` visible or ``(B, H)`` hidden tensors, values in [0, 1].
- Sampling is Bernoulli ``s = 1 if u < p``, ``u = nn.random.uniform01(seed, counter, i)`` with ``i`` the
  row-major flat index: both backends draw the same bits, and a run is reproducible with no host RNG inside
  the training loop.
- The learning rate and momentum live on the device in ``RBMState.hyper`` because they adapt after every
  batch from the cosine between successive gradients (§3.7): reading that cosine on the host would cost a
  round trip per batch. The host reads ``hyper`` once per epoch (logging, momentum creep, caps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Tensor = Any

# Slots of RBMState.hyper (a (HYPER,) tensor of the backend's dtype).
LR, MOMENTUM, MAX_INC, PREV_LEN2, COSINE, LEN2 = range(6)
HYPER = 8
RECON_KINDS = ("mse", "ce")
ADAPT_LR_MIN, ADAPT_LR_MAX = 0.001, 1.0


@dataclass
class RBMState:
    """Everything a training run updates, as backend tensors.

    ``w_inc``/``b_inc``/``c_inc`` are the momentum increments, ``on_frac (H,)`` the smoothed hidden
    on-fraction (starts at 0.5), ``g_prev (H, V)`` the previous batch's weight gradient (for the cosine),
    ``hyper`` the adaptive scalars:
    ``[lr, momentum, max |w_inc| this epoch, ‖g_prev‖², last cosine, ‖g‖², 0, 0]``.
    """

    w: Tensor
    b: Tensor
    c: Tensor
    w_inc: Tensor
    b_inc: Tensor
    c_inc: Tensor
    on_frac: Tensor
    g_prev: Tensor
    hyper: Tensor


@runtime_checkable
class RBMOps(Protocol):
    """The deep-belief-net family. Every op leaves its inputs unchanged except ``rbm_update`` (which edits
    ``state``) and ``dbn_weight_penalty`` (which adds to ``grad``)."""

    def rbm_hidden_probs(self, v: Tensor, w: Tensor, c: Tensor) -> Tensor:
        """``v (B, V)`` -> ``σ(v·Wᵀ + c) (B, H)``: P(h = 1 | v)."""

    def rbm_visible_probs(self, h: Tensor, w: Tensor, b: Tensor) -> Tensor:
        """``h (B, H)`` -> ``σ(h·W + b) (B, V)``: P(v = 1 | h)."""

    def rbm_sample(self, p: Tensor, seed: int, counter: int) -> Tensor:
        """Bernoulli states of the probabilities ``p`` (any shape): 1 where ``uniform01 < p``, else 0."""

    def rbm_recon_error(self, x: Tensor, p: Tensor, kind: str) -> Tensor:
        """``(1,)`` sum over the batch and the inputs of the reconstruction error of ``p`` against ``x``.

        ``mse``: ``(p − x)²``; ``ce``: ``−[x·log(p + 1e−10) + (1 − x)·log(1 − p + 1e−10)]`` (spec §3.2).
        """

    def rbm_max_abs(self, t: Tensor) -> Tensor:
        """``(1,)`` largest ``|t|`` (0 for an empty tensor)."""

    def rbm_try_errors(self, x: Tensor, w: Tensor, b: Tensor, c: Tensor) -> Tensor:
        """Direct reconstruction error of T candidate RBMs at once (the initial-weight search, §3.5).

        ``x (N, V)``, ``w (T, H, V)``, ``b (T, V)``, ``c (T, H)`` -> ``(T,)`` with, for try t, the sum over
        cases and inputs of ``(σ(b_t + W_tᵀ·σ(c_t + W_t·x)) − x)²``.
        """

    def rbm_update(
        self,
        state: RBMState,
        v1: Tensor,
        h_data: Tensor,
        q1: Tensor,
        v2: Tensor,
        q2: Tensor,
        x_mean: Tensor,
        *,
        weight_penalty: float,
        sparsity_penalty: float,
        sparsity_target: float,
    ) -> None:
        """One CD step's parameter update of a batch of ``n`` cases (spec §3.3, §3.4, §3.6, §3.7), in order:

        1. hidden: ``frac = Σ q1 / n``; ``on_frac = 0.95·on_frac + 0.05·frac``;
           ``sp = λs·(on_frac − p) + 0.5·(on_frac − 0.01)[on_frac < 0.01]
           + 0.5·(on_frac − 0.99)[on_frac > 0.99]``;
           ``c_inc = μ·c_inc + η·(Σ(h_data − q2)/n − sp)``; ``c += c_inc``;
        2. weights: ``g = (h_dataᵀ·v1 − q2ᵀ·v2)/n − λw·W − sp ⊗ x_mean``; ``w_inc = μ·w_inc + η·g``;
           ``W += w_inc``; ``hyper[MAX_INC] = max(hyper[MAX_INC], max |w_inc|)``;
        3. visible: ``b_inc = μ·b_inc + η·Σ(v1 − v2)/n``; ``b += b_inc``;
        4. adaptation from ``cos = g·g_prev / (‖g‖·‖g_prev‖)`` (skipped while ``‖g_prev‖² = 0``, the first
           batch): η ×1.2 if cos > 0.5, else ×1.1 if cos > 0.3, else ÷1.2 if cos < −0.5, else ÷1.1 if
           cos < −0.3; η clamped to [0.001, 1]; μ ÷1.5 if |cos| > 0.3. Then ``g_prev = g``.

        ``h_data`` is ``q1`` (mean-field data term) or a Bernoulli sample of it. The saturation terms test the
        smoothed on-fraction (the book's CUDA choice; its CPU code tests the raw batch fraction).
        """

    def dbn_dot(self, a: Tensor, b: Tensor) -> Tensor:
        """``(1,)`` ``Σ a·b`` over all elements of two same-shape tensors (Polak–Ribière's products)."""

    def dbn_axpby(self, alpha: float, x: Tensor, beta: float, y: Tensor) -> Tensor:
        """A new tensor ``alpha·x + beta·y`` (same shapes): line-search trial points and CG directions."""

    def dbn_weight_penalty(self, theta: Tensor, mask: Tensor, coef: float, grad: Tensor | None) -> Tensor:
        """``(1,)`` ``coef·Σ mask·θ²``; with ``grad``, also ``grad += 2·coef·mask·θ`` in place.

        ``mask`` is 1 at weights and 0 at biases and padding: the supervised weight penalty of spec §1.5,
        which leaves biases out."""
