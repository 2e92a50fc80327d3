"""Long-horizon forecasting with ATFNet/PatchTST: model presets, training, honest baselines and metrics,
and the whole protocol (``run_protocol``), shared by ``neuronet forecast`` and ``ForecastEA``.

Two protocols (``PROTOCOLS``): ``official`` reproduces the official ATFNet repository's run scripts
(github YHYHYHYHYHY/ATFNet, which train ATFNet and its PatchTST re-run alike) step by step, so its figures
compare with the published tables; ``neuronet`` (the default) trains with the same recipe (initialisation,
schedule, F block scaling) but on every training window, validates on every window and scores every test
window, where the official loaders drop each epoch's last partial batch and never score the last test
windows.

Windows of ``seq_len`` past points predict the next ``pred_len`` points of every channel. Every model is
reported next to two baselines, because on financial series the naive forecast is hard to beat (on the
daily Exchange-rate benchmark it ties or beats most deep models):
- naive: repeat the last known value over the whole horizon;
- linear: the least-squares linear map from the past to the future points (``baselines.LinearBaseline``,
  the DLinear class), fitted on the training windows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nn import get_backend
from nn.atfnet import F_SCALINGS, ATFNet, PatchTST
from nn.callbacks import EarlyStopping
from nn.model import Sequential
from strategies.baselines import LinearBaseline
from strategies.errors import ForecastError
from strategies.features import Scaler
from strategies.forecast_data import read_series, sliding_windows, split_spans

MODELS = ("atfnet", "patchtst")


@dataclass(frozen=True)
class Protocol:
    """How a forecaster is trained and scored; every field is recorded in ``metrics.json``.

    - ``split``: the split when none is given (``strategies.forecast_data.SPLITS``);
    - ``f_scaling``: ATFNet's inverse DFT scaling when none is given (``nn.atfnet``);
    - ``init``: the layers' initialisation scheme (``nn.init.INIT_SCHEMES``);
    - ``lr_start``: epochs run at the initial rate before it halves every epoch (``StepDecay.start``);
    - ``drop_last``: every batch full, as the official ``DataLoader(drop_last=True)``: each epoch trains on
      a shuffled ⌊M/B⌋·B of the M training windows, validates on a fresh random ⌊M/B⌋·B of the validation
      windows (the official validation loader shuffles too) and the test scores the FIRST ⌊M/B⌋·B test
      windows in time order (the figures on every window are reported next to them);
    - ``preset``: the size preset when none is given (``None``: by device, ``preset_for``).
    """

    name: str
    split: str
    f_scaling: str
    init: str
    lr_start: int
    drop_last: bool
    preset: str | None


PROTOCOLS = {
    "neuronet": Protocol("neuronet", "70/10/20", "official", "torch", 1, False, None),
    # the official scripts: --data custom (70/10/20 rows), batch 256, Adam 1e-4, lradj type1, 10 epochs,
    # patience 3, d_model 512, PyTorch's initialisation, drop_last=True in every loader
    "official": Protocol("official", "70/10/20", "official", "torch", 1, True, "paper"),
}


@dataclass(frozen=True)
class Preset:
    """Model size and optimiser settings; ``paper`` is the official ATFNet configuration."""

    d_model: int
    n_heads: int
    layers: int
    d_ff: int
    dropout: float
    lr: float
    batch_size: int

    def check(self, names: Mapping[str, str] | None = None) -> Preset:
        """Refuse sizes and settings no model can take (``ForecastError``) before anything is built, so a
        bad value is the user's one-line error, not a layer's failure inside training. ``names`` words each
        field as the caller's user gave it (the command line's options); by default the field's name,
        which is also the parameter's name of ``ForecastEA``."""
        name = {f: f for f in asdict(self)} | dict(names or {})
        for field in ("d_model", "n_heads", "layers", "d_ff", "batch_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ForecastError(f"{name[field]} must be >= 1, got {value}")
        if self.d_model % self.n_heads:
            raise ForecastError(
                f"{name['d_model']} {self.d_model} must be a multiple of {name['n_heads']} {self.n_heads}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ForecastError(f"{name['dropout']} must be in [0, 1), got {self.dropout}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ForecastError(f"{name['lr']} must be > 0 (and finite), got {self.lr}")
        return self


# ``cpu``: a model a 2-core CPU trains in seconds per epoch; at this size the paper's lr 1e-4 leaves ATFNet
# behind the naive forecast within 10 epochs, 1e-3 does not.
PRESETS = {
    "paper": Preset(d_model=512, n_heads=8, layers=2, d_ff=2048, dropout=0.1, lr=1e-4, batch_size=256),
    "cpu": Preset(d_model=64, n_heads=4, layers=2, d_ff=128, dropout=0.1, lr=1e-3, batch_size=64),
}


def preset_for(backend: Any) -> tuple[str, str]:
    """The preset for a backend object and why: ``paper`` on a GPU, ``cpu`` on a CPU device or NumPy."""
    runtime = getattr(backend, "runtime", None)
    if runtime is not None and not runtime.is_cpu:
        return "paper", f"{backend.name} is a GPU"
    return "cpu", f"{backend.name} is not a GPU: the paper's size takes minutes per epoch there"


def layer_sizes(model: str, preset: Preset, f_scaling: str = "exact", init: str = "xavier") -> dict[str, Any]:
    """The ATFNet/PatchTST keywords of a preset (both ATFNet blocks get the same width and depth)."""
    sizes: dict[str, Any] = dict(
        d_model=preset.d_model,
        n_heads=preset.n_heads,
        e_layers=preset.layers,
        d_ff=preset.d_ff,
        dropout=preset.dropout,
        init=init,
    )
    if model == "atfnet":
        sizes |= dict(
            fnet_d_model=preset.d_model,
            fnet_d_ff=preset.d_ff,
            fnet_layers=preset.layers,
            complex_dropout=preset.dropout,
            f_scaling=f_scaling,
        )
    return sizes


def naive_forecast(x: np.ndarray, pred_len: int) -> np.ndarray:
    """``x (M, L, C)`` -> ``(M, pred_len, C)``: the last known value repeated."""
    return np.repeat(x[:, -1:, :], pred_len, axis=1)


def horizon_errors(pred: np.ndarray, true: np.ndarray) -> dict[str, np.ndarray]:
    """Per-horizon MSE and MAE ``(T,)`` over windows and channels of ``(M, T, C)`` arrays."""
    err = pred - true
    return {"mse": (err**2).mean(axis=(0, 2)), "mae": np.abs(err).mean(axis=(0, 2))}


def direction_accuracy(pred: np.ndarray, true: np.ndarray, last: np.ndarray) -> float | None:
    """Share of (window, step, channel) where the forecast move from the last known value has the sign of
    the actual move; steps where the actual value equals the last value are left out (None: no such
    step). ``last (M, 1, C)``."""
    actual = np.sign(true - last)
    mask = actual != 0
    if not mask.any():
        return None
    return float((np.sign(pred - last)[mask] == actual[mask]).mean())


def build_forecaster(
    model: str,
    seq_len: int,
    channels: int,
    pred_len: int,
    *,
    lr: float = 1e-4,
    backend: Any = "auto",
    seed: int = 0,
    lr_start: int = 0,
    **sizes: Any,
) -> Sequential:
    """A compiled ATFNet or PatchTST model ``(seq_len, C) -> (pred_len, C)`` trained with MSE and Adam whose
    learning rate halves every epoch after the first ``lr_start`` (the official ``type1`` schedule runs its
    first two epochs at ``lr``: ``lr_start=1``). ``sizes``: the layer's keywords."""
    if model not in MODELS:
        raise ForecastError(f"unknown model {model!r}: expected one of {', '.join(MODELS)}")
    kind = ATFNet if model == "atfnet" else PatchTST
    layer = kind(pred_len, seed=seed, **sizes)
    schedule = {"type": "step", "step_size": 1, "gamma": 0.5, "start": lr_start}
    optimizer = {"type": "adam", "lr": lr, "schedule": schedule}
    return Sequential([layer], (seq_len, channels), "mse", optimizer, get_backend(backend), seed)


def train_forecaster(
    net: Sequential,
    train: tuple[np.ndarray, np.ndarray],
    val: tuple[np.ndarray, np.ndarray] | None,
    *,
    epochs: int,
    batch_size: int,
    patience: int = 3,
    callbacks: Sequence[Any] = (),
    drop_last: bool = False,
    seed: int = 0,
):
    """Fit with early stopping on the validation loss (best weights restored), as the paper's protocol.

    ``drop_last``: full batches only, in training and in validation (``Protocol.drop_last``)."""
    hooks = list(callbacks)
    if val is not None and drop_last:
        hooks.insert(0, ShuffledValidation(net, *val, batch_size, seed))  # sets val_loss before the others
    if val is not None:
        hooks.append(EarlyStopping("val_loss", patience, restore_best=True))
    return net.fit(
        *train,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        validation_data=None if drop_last else val,
        callbacks=hooks,
        progress=False,
        drop_last=drop_last,
    )


class ShuffledValidation:
    """The official validation loader (shuffled, ``drop_last=True``): after each epoch, the mean loss over a
    fresh random ⌊M/B⌋·B of the M validation windows (equal batches: the mean of the batch means, as the
    official ``vali``), drawn from ``seed`` and the epoch; every window when fewer than B."""

    def __init__(self, net: Sequential, x: np.ndarray, y: np.ndarray, batch_size: int, seed: int) -> None:
        self.net, self.x, self.y, self.batch_size, self.seed = net, x, y, batch_size, seed

    def on_epoch_end(self, record: Any) -> None:
        m, bs = len(self.x), self.batch_size
        keep = np.random.default_rng([self.seed, 1, record.epoch]).permutation(m)
        keep = keep[: m // bs * bs] if m >= bs else keep
        record.val_loss = self.net.evaluate(self.x[keep], self.y[keep], batch_size=bs)["loss"]


def run_protocol(
    csv: Path,
    target: str,
    *,
    features: str = "all",
    seq_len: int = 96,
    pred_len: int = 96,
    split: str | None = None,
    model: str = "atfnet",
    preset: Preset | None = None,
    epochs: int = 10,
    patience: int = 3,
    f_scaling: str | None = None,
    backend: Any = "auto",
    seed: int = 0,
    sizes: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    protocol: Protocol | str = "neuronet",
) -> tuple[dict[str, Any], Sequential]:
    """The whole protocol on a CSV: split, train-only standardisation, training with early stopping, test
    metrics per horizon step next to the naive and linear baselines.

    Returns the results document (JSON-ready: no NaN) and the trained model, whose ``metadata`` holds the
    channels and the training-split scaler so its inputs can be prepared exactly as in training.
    ``split`` and ``f_scaling`` default to the protocol's, ``preset`` to the protocol's or else the device's
    (``preset_for``: the command line's defaults); ``sizes`` overrides the preset's layer keywords.
    """
    proto = _protocol(protocol)
    backend = get_backend(backend)
    if preset is None:
        preset = PRESETS[proto.preset or preset_for(backend)[0]]
    split = proto.split if split is None else split
    f_scaling = proto.f_scaling if f_scaling is None else f_scaling
    if f_scaling not in F_SCALINGS:
        raise ForecastError(f"--f-scaling must be one of {', '.join(F_SCALINGS)}, got {f_scaling!r}")
    for name, value in (("--seq-len", seq_len), ("--pred-len", pred_len), ("--epochs", epochs)):
        if value < 1:
            raise ForecastError(f"{name} must be >= 1, got {value}")
    if patience < 0:
        raise ForecastError(f"--patience must be >= 0, got {patience}")
    names, data = read_series(csv, target, features)
    spans = split_spans(len(data), seq_len, pred_len, split, csv)
    scaler = Scaler.fit(data[: spans[0][1]])  # the training rows only
    z = scaler.transform(data)
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = (sliding_windows(z, seq_len, pred_len, a, b) for a, b in spans)
    layer = layer_sizes(model, preset, f_scaling, proto.init) | (sizes or {})
    net = build_forecaster(model, seq_len, len(names), pred_len, lr=preset.lr, backend=backend, seed=seed,
                           lr_start=proto.lr_start, **layer)  # fmt: skip
    t0 = time.perf_counter()
    history = train_forecaster(
        net,
        (x_tr, y_tr),
        (x_va, y_va),
        epochs=epochs,
        batch_size=preset.batch_size,
        patience=patience,
        callbacks=callbacks,
        drop_last=proto.drop_last,
        seed=seed,
    )
    train_s = time.perf_counter() - t0
    scored = slice(-1, None) if features == "MS" else slice(None)  # MS: the target channel only
    every = {
        model: net.predict(x_te, batch_size=preset.batch_size)[:, :, scored],
        "naive": naive_forecast(x_te, pred_len)[:, :, scored],
        "linear": LinearBaseline().fit(x_tr, y_tr).predict(x_te)[:, :, scored],
    }
    # the official test loader keeps full batches of the windows in time order: the first ⌊M/B⌋·B
    bs = preset.batch_size
    kept = len(x_te) // bs * bs if proto.drop_last and len(x_te) >= bs else len(x_te)
    truth, last = y_te[:kept, :, scored], x_te[:kept, -1:, scored]
    preds = {k: p[:kept] for k, p in every.items()}
    net.metadata = {
        "channels": names,
        "target": target,
        "features": features,
        "seq_len": seq_len,
        "pred_len": pred_len,
        "split": split,
        "protocol": proto.name,
        "scaler_mean": list(scaler.mean),
        "scaler_std": list(scaler.std),
        "csv": str(csv),
    }
    per_step = {k: {m: v.tolist() for m, v in horizon_errors(p, truth).items()} for k, p in preds.items()}
    doc = {
        "csv": str(csv),
        "target": target,
        "features": features,
        "channels": names,
        "seq_len": seq_len,
        "pred_len": pred_len,
        "split": split,
        "protocol": asdict(proto),
        "spans": [list(s) for s in spans],
        "model": model,
        "backend": net.backend.name,
        "preset": asdict(preset),
        "parameters": net.parameter_count,
        "layer": net.layers[0].config(),
        "windows": {"train": len(x_tr), "val": len(x_va), "test": len(x_te), "test_scored": kept},
        "epochs": [_epoch(r) for r in history.epochs],
        "train_s": train_s,
        "mse": {k: _finite(np.mean(v["mse"])) for k, v in per_step.items()},
        "mae": {k: _finite(np.mean(v["mae"])) for k, v in per_step.items()},
        "direction_accuracy": {
            k: direction_accuracy(p, truth, last) for k, p in preds.items() if k != "naive"
        },
        "per_step": {k: {m: [_finite(e) for e in v] for m, v in d.items()} for k, d in per_step.items()},
    }
    if kept < len(x_te):  # the same figures on every test window, next to the protocol's
        errors = {k: horizon_errors(p, y_te[:, :, scored]) for k, p in every.items()}
        doc["all_windows"] = {
            m: {k: _finite(np.mean(e[m])) for k, e in errors.items()} for m in ("mse", "mae")
        }
    return doc, net


def _protocol(protocol: Protocol | str) -> Protocol:
    if isinstance(protocol, Protocol):
        return protocol
    if protocol not in PROTOCOLS:
        raise ForecastError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return PROTOCOLS[protocol]


def _epoch(r: Any) -> dict[str, Any]:
    return {"epoch": r.epoch, "loss": _finite(r.loss), "val_loss": _finite(r.val_loss), "lr": r.lr,
            "wall_s": r.wall_s}  # fmt: skip


def _finite(x: float | None) -> float | None:
    """A JSON-safe number: None for NaN/inf (a diverged model's loss)."""
    return None if x is None or not np.isfinite(x) else float(x)
