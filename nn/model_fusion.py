"""Whether a ``Sequential`` model trains a batch-1 epoch in one launch (a mix-in of ``Sequential``).

A backend may run a whole online epoch of a plain dense network in one call (``CoreOps.online_epoch``,
``nn.online_opencl``). This decides whether the model is such a network and describes it to the backend in
plain numbers (``nn.dense_stack``: the op layer knows no model class): every layer a dense one with an
output-derivable activation, optionally followed by the softmax the cross-entropy skips, on 1-D samples,
trained by Adam without gradient clipping, with a loss the fusion computes. Anything else trains step by
step, computing the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nn.backend import FusedEpoch
from nn.dense_stack import LOSSES as FUSED_LOSSES
from nn.dense_stack import AdamStep, DenseLayerSpec, DenseStack
from nn.layers import Dense, Softmax
from nn.optim import Adam

if TYPE_CHECKING:
    from nn.backend import Backend
    from nn.layer import Layer
    from nn.losses import Loss
    from nn.optim import Optimizer


class OnlineFusion:
    """``_online_epoch``, ``_dense_stack`` and ``_adam_step`` of ``Sequential`` (which supplies the rest)."""

    backend: Backend
    layers: list[Layer]
    input_shape: tuple[int, ...]
    loss: Loss
    optimizer: Optimizer
    _first_trainable: int
    _online: FusedEpoch | bool | None  # False: not built yet
    param_offset: Callable[[int, str], int]

    def _online_epoch(self, hooks: list) -> FusedEpoch | None:
        """The backend's fused batch-1 epoch (``Backend.online_epoch``), built on first use; ``None`` where
        it does not apply or a callback wants to see every batch."""
        if any(hasattr(h, "on_batch_end") for h in hooks):
            return None
        if self._online is False:
            stack = self._dense_stack()
            self._online = None if stack is None else self.backend.online_epoch(stack)
        return self._online

    def _dense_stack(self) -> DenseStack | None:
        """This model as a plain dense network for whole-epoch fusions (``nn.dense_stack``), or ``None``
        where it is not one: other layers, losses or optimizers, gradient clipping, samples not 1-D."""
        opt, layers = self.optimizer, list(self.layers)
        if self.loss.kernel not in FUSED_LOSSES or not isinstance(opt, Adam) or opt.clipnorm is not None:
            return None
        if self.loss.skips_softmax:
            if not isinstance(layers[-1], Softmax):
                return None
            layers = layers[:-1]
        if not layers or not all(isinstance(ly, Dense) and ly.act.output_derivable for ly in layers):
            return None
        if len(self.input_shape) != 1 or self._first_trainable != 0:
            return None
        specs = tuple(
            DenseLayerSpec(
                w=self.param_offset(i, "w"), b=self.param_offset(i, "b"), inputs=ly.n_in, units=ly.units,
                activation=ly.act.kind, alpha=ly.act.alpha, beta=ly.act.beta,
            )
            for i, ly in enumerate(layers)
        )  # fmt: skip
        return DenseStack(specs, self.loss.kernel)

    def _adam_step(self) -> AdamStep:
        """The optimizer's settings for a fused epoch (only Adam's models are fused: ``_dense_stack``)."""
        opt = self.optimizer
        return AdamStep(opt.current_lr, opt.beta1, opt.beta2, opt.eps, opt.l1, opt.l2, opt.iterations)
