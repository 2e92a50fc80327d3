"""The Fractal EA's classifier as a deep belief net (``-p model=dbn``), for comparing it with the dense net.

Same study rows, same standardised features, same held-out validation rows as the dense network; the DBN's
RBMs need inputs in [0, 1], so the standardised features are min/max scaled over the training rows (test rows
clipped). RBM layers ``dbn_layers`` are trained greedily for at most ``dbn_epochs`` epochs, then a SoftMax
head by annealing and conjugate gradients, then the whole stack is fine-tuned as one network by at most
``dbn_fine_tune`` CG iterations (``nn.dbn``).

Why the fine-tuning is on by default: the RBMs learn the inputs' dominant structure (their reconstruction
objective spreads the hidden units over all 240 standardised inputs), and on the sample's study rows the
top layer's features carry almost none of what tells a fractal bar: a head on them alone, even trained to
convergence, barely beats the class prior (criterion 0.3209 against the prior's 0.3224), so its argmax is
always the majority class "undefined". Fine-tuning backpropagates the labels into the stack (the DBN is
then an initialisation, as in Hinton's recipe and DEEP's "complete model fine-tune").

One training record per round goes to the EA's training log: the supervised criterion and, with validation
rows, their negative log likelihood.
"""

from __future__ import annotations

import time

import numpy as np

from nn.dbn import DBN, DBNConfig, train_dbn
from nn.mlfn import raw_error
from nn.rbm import RBMConfig
from strategies.base import EAError


class FractalDBN:
    """A trained DBN behind the dense model's ``predict(x, batch_size)`` (standardised features in)."""

    def __init__(self, dbn: DBN, low: np.ndarray, span: np.ndarray):
        self.dbn, self.low, self.span = dbn, low, span

    def unit(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.low) / self.span, 0.0, 1.0)

    def predict(self, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        return self.dbn.predict(self.unit(x))

    def save(self, path: str, meta: dict) -> str:
        from nn.io import save

        unit = {"low": self.low.tolist(), "span": self.span.tolist()}
        return str(save(self.dbn, f"{path}.dbn", {**meta, "unit_scaling": unit}))


def _layers(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in str(text).split(",") if s.strip())
    except ValueError:
        raise EAError(f"FractalEA dbn_layers must be widths like '100,50', got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise EAError(f"FractalEA dbn_layers must hold positive widths, got {text!r}")
    return sizes


def fit_dbn(ea, x: np.ndarray, onehot: np.ndarray, validation, rnd: int) -> FractalDBN:
    """Train on standardised training rows ``x`` (targets one-hot); record the round in ``ea``'s log."""
    t0 = time.perf_counter()
    low, high = x.min(axis=0), x.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    rbm = RBMConfig(n_hidden=1, max_epochs=max(1, ea.dbn_epochs), seed=ea.seed + rnd + 1)
    cfg = DBNConfig(
        hidden=_layers(ea.dbn_layers),
        rbm=rbm,
        classifier=True,
        seed=ea.seed + rnd + 1,
        fine_tune=ea.dbn_fine_tune > 0,
        fine_max_iter=ea.dbn_fine_tune,
    )
    model = FractalDBN(None, low, span)
    model.dbn = train_dbn(model.unit(x), onehot, cfg, ea.nn_backend())
    val_loss = None
    if validation is not None:
        val_loss = raw_error(model.predict(validation[0]), validation[1], True) * onehot.shape[1]
    pred = model.predict(x)
    ea.record_epoch(
        {
            "round": rnd,
            "epoch": 1,
            "epochs": 1,
            "rows": len(x),
            "loss": raw_error(pred, onehot, True) * onehot.shape[1],
            "val_loss": val_loss,
            "train_hit_rate": None,
            "train_missed_rate": None,
            "wall_s": time.perf_counter() - t0,
            "device_s": None,
        }
    )
    ea.outcomes.append(
        {
            "round": rnd,
            "epochs_run": 1,
            "kept_epoch": 1,
            "stopped_early": False,
            "stop_reason": "deep belief net: RBM layers, then annealing and conjugate gradients"
            + (", then fine-tuning" if cfg.fine_tune else ""),
            "kept_loss": ea.training_log[-1]["loss"],
            "kept_val_loss": val_loss,
        }
    )
    return model
