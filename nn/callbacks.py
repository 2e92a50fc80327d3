"""Training history and callbacks: per-epoch records, early stopping.

A callback is any object with some of ``on_train_begin(model)``, ``on_batch_end(epoch, batch, size)``,
``on_epoch_end(record)`` and ``on_train_end()``. Batch hooks get no loss value on purpose: reading it would
cost a device-to-host transfer per step.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from nn.errors import NNConfigError

log = logging.getLogger(__name__)


@dataclass
class EpochRecord:
    """One epoch: mean training loss, validation scores, learning rate, wall and device seconds.

    ``wall_s`` covers the training pass only (validation excluded); ``device_s`` is the profiled kernel time
    of that pass, ``None`` when the backend does not measure it (NumPy, or OpenCL without profiling).
    """

    epoch: int
    loss: float
    wall_s: float
    lr: float
    device_s: float | None = None
    build_s: float = 0.0  # part of wall_s spent compiling kernel programs (the first epoch's builds)
    val_loss: float | None = None
    val_accuracy: float | None = None

    def summary(self) -> str:
        text = f"loss={self.loss:.5g}"
        if self.val_loss is not None:
            text += f" val_loss={self.val_loss:.5g}"
        if self.val_accuracy is not None:
            text += f" val_acc={self.val_accuracy:.3f}"
        return text


@dataclass
class History:
    """What ``fit`` returns: one ``EpochRecord`` per epoch run."""

    epochs: list[EpochRecord] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def loss(self) -> list[float]:
        return [r.loss for r in self.epochs]

    @property
    def val_loss(self) -> list[float | None]:
        return [r.val_loss for r in self.epochs]


class EarlyStopping:
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs.

    ``monitor`` is an ``EpochRecord`` field: ``"val_loss"`` (default, needs validation data), ``"loss"`` or
    ``"val_accuracy"`` (maximised). With ``restore_best`` the model ends with the weights of its best epoch;
    the copy stays on the device.
    """

    def __init__(
        self, monitor: str = "val_loss", patience: int = 5, min_delta: float = 0.0, restore_best: bool = True
    ) -> None:
        if monitor not in ("val_loss", "loss", "val_accuracy"):
            raise NNConfigError(
                f"EarlyStopping monitor must be val_loss, loss or val_accuracy, got {monitor!r}"
            )
        if not isinstance(patience, int) or patience < 0:
            raise NNConfigError(f"EarlyStopping patience must be an integer >= 0, got {patience!r}")
        self.monitor, self.patience, self.min_delta, self.restore_best = (
            monitor,
            patience,
            min_delta,
            restore_best,
        )
        self._sign = -1.0 if monitor == "val_accuracy" else 1.0  # minimise sign·value

    def on_train_begin(self, model: Any) -> None:
        self.model, self.best, self.best_epoch, self.wait, self._snap = model, math.inf, None, 0, None

    def on_epoch_end(self, record: EpochRecord) -> None:
        value = getattr(record, self.monitor)
        if value is None:
            raise NNConfigError(f"EarlyStopping monitors {self.monitor!r}, but fit got no validation_data")
        score = self._sign * value
        if score < self.best - self.min_delta:
            self.best, self.best_epoch, self.wait = score, record.epoch, 0
            if self.restore_best:
                self._snap = self.model.snapshot()
            return
        self.wait += 1
        if self.wait >= self.patience:
            log.info(
                "early stopping at epoch %d (best %s at epoch %d)",
                record.epoch,
                self.monitor,
                self.best_epoch,
            )
            self.model.stop_training = True

    def on_train_end(self) -> None:
        if self.restore_best and self._snap is not None:
            self.model.restore(self._snap)
