"""``Sequential``: a stack of layers trained by mini-batch descent, with its data kept on the device.

Memory layout: ONE flat parameter buffer, ONE flat gradient buffer of the same layout, one flat buffer per
optimizer state slot and one for non-trainable state (batch-norm running statistics). Layers get views
whose offsets are multiples of ``backend.alignment``, so an optimizer step is one backend call over all
parameters and a model's weights are one array.

Training loop (``fit``): the training set is uploaded once; each epoch uploads one shuffled index array,
laid out as one aligned row of indices per batch, and batches are gathered on the device
(``gather_rows``). The loss is accumulated on the device with ``add_`` and read once per epoch, so a step
makes no host round trip. The last batch of an epoch may be smaller (``N`` need not divide by
``batch_size``); ``batch_size=1`` is the MQL5 library's online mode (one update per sample). With the same
seed, backend and device, two runs give the same weights.

Where each layer's numbers lie in those buffers, and the sizes checked before they are allocated, are
``nn.model_layout``'s (``model_sizes`` is importable from here). A batch-1 epoch of a plain dense network
runs in one launch where the backend can (``nn.model_fusion``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from nn.backend import Backend, FusedEpoch, Tensor
from nn.backend_choice import get_backend
from nn.callbacks import EpochRecord, History
from nn.errors import NNConfigError, NNDataError
from nn.init import initial_values
from nn.layer import Layer, ParamSpec
from nn.layers import Dropout
from nn.losses import accuracy, check_targets, resolve_loss
from nn.model_fusion import OnlineFusion
from nn.model_layout import MAX_ELEMENTS as MAX_ELEMENTS
from nn.model_layout import (
    Layout,
    aligned,
    check_size,
    checked_input_shape,
    expand_layers,
    layer_from_spec,
    layer_shapes,
)
from nn.model_layout import ModelSizes as ModelSizes
from nn.model_layout import model_sizes as model_sizes
from nn.optim import Optimizer, optimizer_from_config

log = logging.getLogger(__name__)


class Sequential(OnlineFusion):
    """Layers applied in order; see the module docstring for how training runs.

    ``layers``: ``Layer`` objects (``Dense(500, activation="tanh")``, ...); ``input_shape``: per-sample shape
    without the batch axis; ``loss``: ``mse``, ``mae``, ``cce`` (after a softmax output), ``softmax_cce``
    (on logits) or ``bce``; ``optimizer``: an ``Optimizer``, its name or its config dict; ``backend``:
    ``"auto"`` (default: OpenCL where a device works, else NumPy), ``"opencl"``, ``"numpy"`` or a
    backend object; ``seed``: initial weights and dropout masks.
    """

    def __init__(
        self,
        layers: Sequence[Layer],
        input_shape: Sequence[int],
        loss: str = "mse",
        optimizer: Optimizer | dict[str, Any] | str = "adam",
        backend: str | Backend = "auto",
        seed: int = 0,
    ) -> None:
        expanded = expand_layers(layers)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise NNConfigError(f"seed must be a non-negative integer, got {seed!r}")
        self.layers, self.input_shape, self.seed = expanded, checked_input_shape(input_shape), seed
        self.backend = get_backend(backend)
        self.loss = resolve_loss(loss, expanded[-1].type_name)
        self.optimizer = optimizer_from_config(optimizer)
        self.metadata: dict[str, Any] = {}
        self.epochs_trained = 0
        self.stop_training = False
        self._build()

    @classmethod
    def from_specs(
        cls,
        specs: Sequence[dict[str, Any]],
        input_shape: Sequence[int],
        loss: str = "mse",
        optimizer: Optimizer | dict[str, Any] | str = "adam",
        backend: str | Backend = "auto",
        seed: int = 0,
    ) -> Sequential:
        """Build from plain layer descriptions: ``{"type": "dense", "units": 500, "activation": "tanh"}``."""
        layers = [layer_from_spec(i, spec) for i, spec in enumerate(specs)]
        return cls(layers, input_shape, loss=loss, optimizer=optimizer, backend=backend, seed=seed)

    # --- construction -------------------------------------------------------------------------------
    def _build(self) -> None:
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Dropout) and layer.seed is None:
                layer.seed = (
                    self.seed * 7919 + i
                ) & 0x7FFFFFFF  # distinct per layer, fixed by the model seed
        shape, params, states = layer_shapes(self.layers, self.input_shape)
        self.output_shape = shape
        be, align = self.backend, self.backend.alignment
        self._param_layout, self._state_layout = Layout(params, align), Layout(states, align)
        check_size(self._param_layout.size, self._state_layout.size, self.optimizer.slots, be.dtype)
        rng = np.random.default_rng(self.seed)
        self._params = be.asarray(self._param_layout.pad(self._initial(params, rng)))
        self._state = be.asarray(self._state_layout.pad(self._initial(states, rng)))
        self._grads = be.zeros((self._param_layout.size,))
        self._slots = [be.zeros((self._param_layout.size,)) for _ in range(self.optimizer.slots)]
        for i, layer in enumerate(self.layers):
            layer.bind(
                be,
                self._param_layout.views(be, self._params, i),
                self._param_layout.views(be, self._grads, i),
                self._state_layout.views(be, self._state, i),
            )
        trainable = [i for i, _ in params]
        self._first_trainable = min(trainable) if trainable else len(self.layers)
        self._online: FusedEpoch | bool | None = False  # False: not built yet (see _online_epoch)

    @staticmethod
    def _initial(entries: list[tuple[int, ParamSpec]], rng: np.random.Generator) -> np.ndarray:
        parts = [initial_values(spec, rng).ravel() for _, spec in entries]
        return np.concatenate(parts) if parts else np.zeros(0)

    @property
    def params(self) -> Tensor:
        """The flat parameter buffer ``(P,)`` on the backend (every layer's weights are views of it)."""
        return self._params

    @property
    def optimizer_slots(self) -> list[Tensor]:
        """The optimizer's per-parameter state buffers, each shaped like ``params`` (Adam: ``[m, v]``)."""
        return self._slots

    @property
    def first_trainable(self) -> int:
        """Index of the first layer with parameters (no input gradient is computed below it)."""
        return self._first_trainable

    def param_offset(self, layer: int, name: str) -> int:
        """Element offset in ``params`` of parameter ``name`` (e.g. ``"w"``) of layer number ``layer``."""
        for (i, spec), off in zip(self._param_layout.entries, self._param_layout.offsets, strict=True):
            if i == layer and spec.name == name:
                return off
        raise KeyError(f"layer {layer} has no parameter {name!r}")

    @property
    def parameter_count(self) -> int:
        return self._param_layout.compact_size

    def summary(self) -> str:
        """A plain-text table: each layer's description, output shape and parameter count."""
        counts = [0] * len(self.layers)
        for i, spec in self._param_layout.entries:
            counts[i] += spec.size
        lines = [f"{'#':>3}  {'layer':<44} {'output':<14} {'params':>10}"]
        shape = self.input_shape
        for i, (layer, n) in enumerate(zip(self.layers, counts, strict=True)):
            shape = layer.output_shape or shape
            desc = ", ".join(f"{k}={v}" for k, v in layer.config().items() if k != "type")
            lines.append(f"{i:>3}  {(layer.type_name + ' ' + desc)[:44]:<44} {shape!s:<14} {n:>10,}")
        opt = self.optimizer.type_name
        lines.append(f"input {self.input_shape}, loss {self.loss.name}, optimizer {opt}, "
                     f"{self.parameter_count:,} parameters, backend {self.backend.name}")  # fmt: skip
        return "\n".join(lines)

    def config(self) -> dict[str, Any]:
        """The architecture as plain JSON: enough to rebuild the model (weights aside)."""
        return {
            "input_shape": list(self.input_shape),
            "layers": [layer.config() for layer in self.layers],
            "loss": self.loss.name,
            "optimizer": self.optimizer.config(),
            "seed": self.seed,
        }

    # --- data checks ----------------------------------------------------------------------------------
    def _check_x(self, x: Any, where: str) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim < 1 or x.shape[1:] != self.input_shape:
            raise NNDataError(
                f"{where}: X has shape {x.shape}, expected (N, {', '.join(map(str, self.input_shape))})"
            )
        if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x)):
            raise NNDataError(f"{where}: X must be finite numbers (found NaN, inf or non-numeric values)")
        return x

    def _check_xy(self, x: Any, y: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
        x, y = self._check_x(x, where), np.asarray(y, dtype=np.float64)
        if y.shape != (len(x), *self.output_shape):
            raise NNDataError(f"{where}: Y has shape {y.shape}, expected {(len(x), *self.output_shape)}")
        if len(x) == 0:
            raise NNDataError(f"{where}: no samples")
        check_targets(self.loss, y, where)
        return x, y

    # --- passes ---------------------------------------------------------------------------------------
    def _forward(self, x: Tensor, training: bool, upto: int) -> Tensor:
        for layer in self.layers[:upto]:
            x = layer.forward(x, training)
        return x

    def _train_step(self, xb: Tensor, yb: Tensor) -> Tensor:
        """One update on a gathered batch; returns the batch-mean loss as a device tensor ``(1,)``."""
        be, n = self.backend, len(self.layers) - self.loss.skips_softmax
        value, g = be.loss(self.loss.kernel, self._forward(xb, True, n), yb)
        for i in range(n - 1, self._first_trainable - 1, -1):
            g = self.layers[i].backward(g, need_input_grad=i > self._first_trainable)
        self.optimizer.step(be, self._params, self._grads, self._slots)
        return value

    # --- public API -----------------------------------------------------------------------------------
    def fit(
        self,
        x: np.ndarray,
        y: np.ndarray,
        *,
        epochs: int = 1,
        batch_size: int = 32,
        shuffle: bool = True,
        seed: int = 0,
        validation_data: tuple[np.ndarray, np.ndarray] | None = None,
        callbacks: Sequence[Any] = (),
        progress: bool = True,
        drop_last: bool = False,
    ) -> History:
        """Train for ``epochs`` passes over ``x (N, *input_shape)`` / ``y (N, *output_shape)``.

        ``batch_size=1`` updates after every sample (MQL5 online mode). ``shuffle`` draws a new order each
        epoch from ``seed`` and the number of epochs already trained. ``drop_last`` skips the last, partial
        batch of each epoch's order, as PyTorch's ``DataLoader(drop_last=True)`` does (with ``shuffle``, a
        different remainder each epoch). Callbacks may define
        ``on_train_begin(model)``, ``on_epoch_end(record)``, ``on_batch_end(epoch, batch, size)`` and
        ``on_train_end()``; setting ``model.stop_training = True`` ends training after the epoch.
        """
        for name, value, low in (("epochs", epochs, 0), ("batch_size", batch_size, 1), ("seed", seed, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise NNConfigError(f"fit: {name} must be an integer >= {low}, got {value!r}")
        if not isinstance(drop_last, bool):
            raise NNConfigError(f"fit: drop_last must be True or False, got {drop_last!r}")
        if self._first_trainable == len(self.layers):
            raise NNConfigError("fit: the model has no trainable parameters")
        x, y = self._check_xy(x, y, "fit")
        if validation_data is not None:
            validation_data = self._check_xy(*validation_data, "fit validation_data")
        be, n = self.backend, len(x)
        bs = min(batch_size, n)
        data = (be.asarray(x), be.asarray(y))  # uploaded once for all epochs
        history, self.stop_training = History(), False
        hooks = list(callbacks)
        _call(hooks, "on_train_begin", self)
        bar = tqdm(total=epochs, unit="epoch", disable=not progress, leave=False)
        try:
            for _ in range(epochs):
                record = self._epoch(data, bs, shuffle, seed, hooks, drop_last)
                if validation_data is not None:
                    scores = self.evaluate(*validation_data, batch_size=max(bs, 256))
                    record.val_loss, record.val_accuracy = scores["loss"], scores.get("accuracy")
                history.epochs.append(record)
                log.debug("epoch %d: %s", record.epoch, record)
                bar.set_postfix_str(record.summary(), refresh=False)
                bar.update()
                _call(hooks, "on_epoch_end", record)
                if not math.isfinite(record.loss):
                    log.warning(
                        "epoch %d: loss is %s; stopping (lower lr or clip gradients)",
                        record.epoch,
                        record.loss,
                    )
                    self.stop_training = True
                if self.stop_training:
                    history.stopped_early = True
                    break
        finally:
            bar.close()
        _call(hooks, "on_train_end")
        return history

    def _epoch(
        self, data: tuple[Tensor, Tensor], bs: int, shuffle: bool, seed: int, hooks: list, drop_last: bool
    ) -> EpochRecord:
        """One pass over the device-resident ``data``; the loss is read back once, at the end."""
        be, (xd, yd) = self.backend, data
        n, epoch = xd.shape[0], self.epochs_trained
        rest = 0 if drop_last else n % bs  # samples in the last, partial batch
        sizes = [bs] * (n // bs) + ([rest] if rest else [])
        used = sum(sizes)
        stride = aligned(bs, be.alignment)
        order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
        table = np.zeros((len(sizes), stride), dtype=np.int32)  # one aligned row of indices per batch
        table[:, :bs] = np.pad(order[:used], (0, len(sizes) * bs - used)).reshape(len(sizes), bs)
        self.optimizer.begin_epoch(epoch)
        acc_full, acc_last = be.zeros((1,)), be.zeros((1,))  # summed batch means: full batches, last one
        t0, d0, b0 = time.perf_counter(), _device_seconds(be), getattr(be, "build_seconds", lambda: 0.0)()
        online = self._online_epoch(hooks) if bs == 1 else None
        if online is not None:  # the whole batch-1 epoch in one launch
            acc_full = online.run(xd, yd, order, self._params, self._slots, self._adam_step())
            self.optimizer.iterations += n
        else:
            idx = be.asarray(table.reshape(-1))  # (n_batches·stride,)
            for k, size in enumerate(sizes):
                rows = be.view(idx, k * stride, (size,))
                value = self._train_step(be.gather_rows(xd, rows), be.gather_rows(yd, rows))
                be.add_(acc_full if size == bs else acc_last, value)
                _call(hooks, "on_batch_end", epoch, k, size)
        be.synchronize()
        wall, d1 = time.perf_counter() - t0, _device_seconds(be)
        full, last = float(be.to_numpy(acc_full)[0]), float(be.to_numpy(acc_last)[0])
        self.epochs_trained += 1
        return EpochRecord(
            epoch=epoch,
            loss=(full * bs + last * rest) / used,
            wall_s=wall,
            lr=self.optimizer.current_lr,
            device_s=None if d0 is None or d1 is None else d1 - d0,
            build_s=getattr(be, "build_seconds", lambda: 0.0)() - b0,
        )

    def _infer(self, x: np.ndarray, batch_size: int, y: np.ndarray | None) -> tuple[np.ndarray, float]:
        """Outputs ``(N, *output_shape)`` in batches, and the mean loss against ``y`` (NaN without ``y``)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise NNConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        be, outs, total = self.backend, [], 0.0
        n = len(self.layers) - self.loss.skips_softmax
        for start in range(0, len(x), batch_size):
            h = self._forward(be.asarray(x[start : start + batch_size]), False, n)
            if y is not None:
                value, _ = be.loss(self.loss.kernel, h, be.asarray(y[start : start + batch_size]))
                total += float(be.to_numpy(value)[0]) * len(x[start : start + batch_size])
            if self.loss.skips_softmax:
                h = self.layers[-1].forward(h, False)
            outs.append(be.to_numpy(h).astype(np.float64))
        out = np.concatenate(outs) if outs else np.zeros((0, *self.output_shape))
        return out, (total / len(x) if y is not None else math.nan)

    def predict(self, x: np.ndarray, batch_size: int = 256) -> np.ndarray:
        """Outputs for ``x (N, *input_shape)``: float64 ``(N, *output_shape)`` (softmax: probabilities)."""
        return self._infer(self._check_x(x, "predict"), batch_size, None)[0]

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 256) -> dict[str, float]:
        """``{"loss": ...}`` plus ``"accuracy"`` for classification losses."""
        x, y = self._check_xy(x, y, "evaluate")
        pred, loss = self._infer(x, batch_size, y)
        scores = {"loss": loss}
        acc = accuracy(self.loss, pred, y)
        if acc is not None:
            scores["accuracy"] = acc
        return scores

    # --- state for callbacks and persistence -----------------------------------------------------------
    def snapshot(self) -> tuple[Tensor, Tensor]:
        """A device-side copy of the parameters and non-trainable state (for restoring the best epoch)."""
        be = self.backend
        params, state = be.zeros((self._param_layout.size,)), be.zeros((self._state_layout.size,))
        be.copy_(params, self._params)
        be.copy_(state, self._state)
        return params, state

    def restore(self, snap: tuple[Tensor, Tensor]) -> None:
        self.backend.copy_(self._params, snap[0])
        self.backend.copy_(self._state, snap[1])

    def export_arrays(self) -> dict[str, np.ndarray]:
        """Host float64 copies, compact (no alignment padding): parameters, state, optimizer slots."""
        be = self.backend
        out = {
            "params": self._param_layout.compact(be.to_numpy(self._params).astype(np.float64)),
            "state": self._state_layout.compact(be.to_numpy(self._state).astype(np.float64)),
        }
        for k, slot in enumerate(self._slots):
            out[f"optimizer_slot{k}"] = self._param_layout.compact(be.to_numpy(slot).astype(np.float64))
        return out

    def import_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Inverse of ``export_arrays``; sizes are checked before anything is written."""
        expected = {"params": self._param_layout.compact_size, "state": self._state_layout.compact_size}
        expected |= {f"optimizer_slot{k}": self._param_layout.compact_size for k in range(len(self._slots))}
        for name, size in expected.items():
            if name not in arrays or arrays[name].shape != (size,):
                got = arrays[name].shape if name in arrays else "nothing"
                raise NNDataError(f"array {name!r}: expected ({size},) for this architecture, got {got}")
        be = self.backend
        be.copy_(self._params, be.asarray(self._param_layout.pad(arrays["params"])))
        be.copy_(self._state, be.asarray(self._state_layout.pad(arrays["state"])))
        for k, slot in enumerate(self._slots):
            be.copy_(slot, be.asarray(self._param_layout.pad(arrays[f"optimizer_slot{k}"])))


def _call(hooks: list[Any], method: str, *args: Any) -> None:
    for hook in hooks:
        fn = getattr(hook, method, None)
        if fn is not None:
            fn(*args)


def _device_seconds(backend: Backend) -> float | None:
    """Cumulative profiled device time, where the backend measures it (OpenCL with profiling on)."""
    fn = getattr(backend, "device_seconds", None)
    return fn() if fn is not None else None
