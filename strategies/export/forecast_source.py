"""The checks of a forecaster's model file before export: ForecastEA's (``neuronet run/backtest``) and the
CSV forecaster's (``neuronet forecast --out``).

A forecaster file is an ``nn.Sequential`` holding one ATFNet or PatchTST layer ``(L, C) -> (T, C)`` and
metadata that says which channels it reads, in which order, and the scaler of its training rows. Every one
of those facts is checked against the others and against the network before a graph is built, and the
window sizes the network declares are bounded before the file is even loaded (``check_declared_sizes``):
loading builds the DFT bases, ``L·(L+T)`` numbers, whatever the weights in the file.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nn.atfnet import ATFNet, PatchTST
from nn.io import MAX_HEADER_BYTES
from nn.model import Sequential
from strategies.errors import ExportError

MAX_WINDOW = 2000  # points of input or forecast; the published configurations use 96..720
MAX_CHANNELS = 1000  # a CSV's channels (the largest long-horizon benchmark, Traffic, has 862)
# Bounds of the layer's other sizes, read before loading (the paper's preset: 512 wide, 2048 feed-forward,
# 2 layers, 8 heads): loading allocates and initialises every weight the architecture declares.
MAX_SIZES = {"d_model": 8192, "d_ff": 32768, "fnet_d_model": 8192, "fnet_d_ff": 32768, "e_layers": 64,
             "fnet_layers": 64, "n_heads": 256, "patch_len": MAX_WINDOW, "stride": MAX_WINDOW}  # fmt: skip
RATE_FIELDS = ("open", "high", "low", "close", "tick_volume", "spread")  # MqlRates fields after time
FORECASTERS = {"atfnet": ATFNet, "patchtst": PatchTST}


@dataclass(frozen=True)
class ForecastSpec:
    """What a forecaster's graph is built from: its channels in the network's order, the window and horizon,
    the training rows' scaler and, for ForecastEA, the traded step and close channel."""

    channels: tuple[str, ...]
    seq_len: int
    pred_len: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    step: int | None  # ForecastEA's traded step (1..pred_len); None for a CSV forecaster
    close: int | None  # index of the close among the channels (ForecastEA)


def check_declared_sizes(path: Path) -> None:
    """Refuse a forecaster whose declared window, horizon or channels exceed the bounds, from the file's
    header alone (before ``nn.load`` builds anything). A file whose header cannot be read is left to
    ``nn.load``, which says what is wrong with it."""
    try:
        with zipfile.ZipFile(path) as zf, zf.open("header.json") as f:
            header = json.loads(f.read(MAX_HEADER_BYTES + 1))
        arch = header["architecture"]
        layer, shape = arch["layers"][0], arch["input_shape"]
        kind, horizon = layer["type"], layer["pred_len"]
    except (OSError, KeyError, IndexError, TypeError, ValueError, RecursionError, zipfile.BadZipFile):
        return
    if kind not in FORECASTERS:
        return
    if not isinstance(shape, list) or len(shape) != 2:
        raise ExportError(f"{path}: the network's input_shape {shape!r} is not (window, channels)")
    for what, i, high in (("window", 0, MAX_WINDOW), ("channels", 1, MAX_CHANNELS)):
        _bounded(path, f"the network's input {what} ({kind} input_shape[{i}])", shape[i], high)
    _bounded(path, f"the network's horizon ({kind} pred_len)", horizon, MAX_WINDOW)
    for key, high in MAX_SIZES.items():
        if key in layer:
            _bounded(path, f"the network's {key}", layer[key], high)


def _bounded(path: Path, what: str, value: Any, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise ExportError(f"{path}: {what} is {value!r}, not a whole number within 1..{high}")
    return value


def _scaler(path: Path, mean: Any, std: Any, width: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    for name, values in (("mean", mean), ("std", std)):
        ok = (
            isinstance(values, list)
            and len(values) == width
            and all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
            )
        )
        if not ok or (name == "std" and min(values) <= 0):
            kind = "positive finite" if name == "std" else "finite"
            raise ExportError(
                f"{path}: metadata scaler {name} is not {width} {kind} numbers, one per channel"
            )
    return tuple(map(float, mean)), tuple(map(float, std))


def _network(path: Path, model: Any, seq_len: int, pred_len: int, width: int) -> str:
    """The model must be one ATFNet or PatchTST layer, ``(seq_len, width)`` -> ``(pred_len, width)``."""
    if not isinstance(model, Sequential) or len(model.layers) != 1:
        raise ExportError(f"{path}: a forecaster's network is one ATFNet or PatchTST layer")
    layer = model.layers[0]
    kind = next((k for k, cls in FORECASTERS.items() if type(layer) is cls), None)
    if kind is None:
        raise ExportError(f"{path}: layer 0 ({layer.type_name}) is not an ATFNet or PatchTST forecaster")
    if tuple(model.input_shape) != (seq_len, width) or tuple(model.output_shape) != (pred_len, width):
        raise ExportError(
            f"{path}: the network maps {tuple(model.input_shape)} windows to {tuple(model.output_shape)}; "
            f"the metadata says ({seq_len}, {width}) -> ({pred_len}, {width}) (seq_len, channels, pred_len)"
        )
    return kind


def forecast_ea_spec(path: Path, meta: dict, model: Any) -> tuple[str, ForecastSpec]:
    """ForecastEA's file: its channels are candle columns the graph finds among the ``CopyRates`` fields."""
    channels = meta.get("channels")
    if not isinstance(channels, list) or not channels or not all(isinstance(c, str) for c in channels):
        raise ExportError(f"{path}: metadata channels is not a list of candle columns")
    foreign = [c for c in channels if c not in RATE_FIELDS]
    if foreign or "close" not in channels or len(set(channels)) != len(channels):
        raise ExportError(
            f"{path}: channels {channels} must be distinct CopyRates fields ({', '.join(RATE_FIELDS)}) "
            f"including close{'; not ' + ', '.join(map(repr, foreign)) if foreign else ''}"
        )
    seq_len = _bounded(path, "metadata seq_len", meta.get("seq_len"), MAX_WINDOW)
    pred_len = _bounded(path, "metadata pred_len", meta.get("pred_len"), MAX_WINDOW)
    step = _bounded(path, "metadata horizon", meta.get("horizon"), pred_len)
    scaler = meta.get("scaler") if isinstance(meta.get("scaler"), dict) else {}
    mean, std = _scaler(path, scaler.get("mean"), scaler.get("std"), len(channels))
    kind = _network(path, model, seq_len, pred_len, len(channels))
    spec = ForecastSpec(tuple(channels), seq_len, pred_len, mean, std, step, channels.index("close"))
    return kind, spec


def csv_forecaster_spec(path: Path, meta: dict, model: Any) -> tuple[str, ForecastSpec]:
    """``neuronet forecast``'s file: named channels of a CSV (target last) and the training split's scaler."""
    channels = meta.get("channels")
    ok = isinstance(channels, list) and 1 <= len(channels) <= MAX_CHANNELS
    if not ok or not all(isinstance(c, str) for c in channels):
        raise ExportError(f"{path}: metadata channels is not a list of 1..{MAX_CHANNELS} column names")
    seq_len = _bounded(path, "metadata seq_len", meta.get("seq_len"), MAX_WINDOW)
    pred_len = _bounded(path, "metadata pred_len", meta.get("pred_len"), MAX_WINDOW)
    mean, std = _scaler(path, meta.get("scaler_mean"), meta.get("scaler_std"), len(channels))
    kind = _network(path, model, seq_len, pred_len, len(channels))
    return kind, ForecastSpec(tuple(channels), seq_len, pred_len, mean, std, None, None)


def is_csv_forecaster(meta: dict) -> bool:
    """Saved by ``neuronet forecast`` (no EA; its channels and the training split's scaler)."""
    return "ea" not in meta and {"channels", "seq_len", "pred_len", "scaler_mean", "scaler_std"} <= set(meta)
