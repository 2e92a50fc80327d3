"""The plain description of a dense network that a whole-epoch fusion takes (``CoreOps.online_epoch``).

``Sequential`` decides whether a model is such a network (``nn.model_fusion``): every layer a dense one with
an activation whose derivative follows from its output (linear, sigmoid, tanh, relu, lrelu), the last one
optionally followed by the softmax that the cross-entropy loss skips, on 1-D samples, trained by Adam without
gradient clipping, with loss ``softmax_cce`` or ``mse``. It describes it here in plain numbers: where each
layer's weights ``w (O, I)`` and bias ``b (O,)`` start in the model's flat parameter buffer, the layer's sizes
and activation, the loss. A backend then decides only what concerns its device (which GPU, which dtype, how
wide a layer its kernel holds): the op layer knows no model, layer or optimizer class.
"""

from __future__ import annotations

from dataclasses import dataclass

LOSSES = ("softmax_cce", "mse")  # the losses a fused epoch computes (``Backend.loss`` kinds)


@dataclass(frozen=True)
class DenseLayerSpec:
    """One dense layer: ``y = act(x·wᵀ + b)``; ``w`` and ``b`` are element offsets in the parameters."""

    w: int
    b: int
    inputs: int
    units: int
    activation: str  # an output-derivable ``Activation`` kind
    alpha: float
    beta: float


@dataclass(frozen=True)
class DenseStack:
    """The layers in order and the loss on the last one's output (the logits, for ``softmax_cce``)."""

    layers: tuple[DenseLayerSpec, ...]
    loss: str


@dataclass(frozen=True)
class AdamStep:
    """Adam's settings for an epoch's updates (``CoreOps.adam_update``'s): the learning rate of this epoch,
    the moments' decay rates, epsilon, the L1/L2 penalties, and the updates done before the epoch (its
    first update is step ``done + 1`` of the bias correction)."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    l1: float
    l2: float
    done: int
