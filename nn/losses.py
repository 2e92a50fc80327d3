"""Losses by name, how each meets the output layer, and the host-side checks and metrics that go with them.

- ``mse``: mean squared error over all outputs; ``mae``: mean absolute error (regression).
- ``cce``: categorical cross-entropy after a ``Softmax`` output. Training skips the softmax and runs the
  fused ``softmax_cce`` backend loss on the logits, whose gradient is simply ``p − t`` (the seed's output
  gradient for this case was wrong: seed bug 5). Targets are class distributions (one-hot rows).
- ``softmax_cce``: the same loss on a model whose last layer outputs logits (no ``Softmax`` layer).
- ``bce``: binary cross-entropy on probabilities (a sigmoid output), targets in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nn.errors import NNConfigError, NNDataError

LOSSES = ("mse", "mae", "cce", "softmax_cce", "bce")


@dataclass(frozen=True)
class Loss:
    """A loss as the model uses it: the backend kernel, whether it eats the final softmax, and its task."""

    name: str
    kernel: str  # the ``Backend.loss`` kind
    skips_softmax: bool  # train on the logits before the final Softmax layer
    classification: bool


def resolve_loss(name: str, last_layer_type: str) -> Loss:
    """Validate ``name`` against the model's last layer type and return how to compute it."""
    if name not in LOSSES:
        raise NNConfigError(f"unknown loss {name!r}: expected one of {', '.join(LOSSES)}")
    if name == "cce":
        if last_layer_type != "softmax":
            raise NNConfigError(
                "loss 'cce' needs a softmax output: end the model with activation 'softmax' "
                "(or use loss 'softmax_cce' on a model that outputs logits)"
            )
        return Loss(name, "softmax_cce", True, True)
    if name == "softmax_cce":
        return Loss(name, "softmax_cce", False, True)
    return Loss(name, name, False, name == "bce")


def check_targets(loss: Loss, y: np.ndarray, origin: str) -> None:
    """Reject targets the loss cannot mean (e.g. unnormalised rows for cross-entropy), naming ``origin``."""
    if not np.all(np.isfinite(y)):
        raise NNDataError(f"{origin}: targets contain NaN or infinite values")
    if loss.kernel == "softmax_cce":
        wrong = (y < 0).any(axis=1) | ~np.isclose(y.sum(axis=1), 1.0, atol=1e-6)
        if wrong.any():
            bad = int(np.flatnonzero(wrong)[0])
            raise NNDataError(
                f"{origin}: loss {loss.name!r} needs one-hot target rows; row {bad} is {y[bad]}"
            )
    elif loss.kernel == "bce" and (np.any(y < 0) or np.any(y > 1)):
        raise NNDataError(f"{origin}: loss 'bce' needs targets in [0, 1]")


def accuracy(loss: Loss, pred: np.ndarray, target: np.ndarray) -> float | None:
    """Share of correct predictions: argmax match (cross-entropy) or 0.5 threshold (bce); None otherwise."""
    if not loss.classification:
        return None
    if loss.kernel == "bce":
        return float(np.mean((pred > 0.5) == (target > 0.5)))
    return float(np.mean(pred.argmax(axis=1) == target.argmax(axis=1)))
