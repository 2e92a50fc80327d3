"""What an export starts from: a trained model file (or a report folder holding one), read and checked.

Everything the graph is built from is checked here, before anything is written: the file is a model of a
built-in EA whose inputs have an ONNX form (FractalEA, ForecastEA) or of ``neuronet forecast``, its features
are the MetaTrader definitions, and every size and number in its metadata is sane (a hostile file cannot make
the exporter build a huge graph; ``forecast_source`` checks the forecasters).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datafeeds.candles import CandleMeta
from nn.io import ModelFileError, load
from strategies.errors import ExportError
from strategies.export.forecast_source import (
    ForecastSpec,
    check_declared_sizes,
    csv_forecaster_spec,
    forecast_ea_spec,
    is_csv_forecaster,
)
from strategies.features import CLASSES, FEATURE_DEFINITIONS, FEATURES

EXPORTABLE = ("FractalEA", "ForecastEA")
MODEL_NAMES = ("model.nnz", "model.dbn", "model")  # "model": neuronet forecast --out before it named it .nnz
MAX_DEPTH = 500  # bars of input per window: the article's EA uses 20
MAX_DIGITS = 10  # price digits (MetaTrader symbols have 0..8)


@dataclass(frozen=True)
class ModelSource:
    """A model file ready to export: the model, its metadata and the candles it was trained on."""

    path: Path
    model: Any  # nn.Sequential or nn.dbn.DBN
    meta: dict
    ea: str | None  # None: a CSV forecaster of neuronet forecast
    kind: str  # the network: "dense" or "dbn" (FractalEA), "atfnet" or "patchtst" (the forecasters)
    candles: CandleMeta | None  # None: a CSV forecaster
    forecast: ForecastSpec | None = None  # the forecasters' channels, window, scaler


def _model_file(source: Path) -> Path:
    if source.is_dir():
        for name in MODEL_NAMES:
            if (source / name).is_file():
                return source / name
        raise ExportError(
            f"{source}: holds no model file ({' or '.join(MODEL_NAMES)}): export a report folder of an EA "
            "that trains a model (FractalEA, ForecastEA), of neuronet forecast, or the model file itself"
        )
    if not source.exists():
        raise ExportError(f"{source}: no such file or folder")
    if not source.is_file():
        raise ExportError(f"{source}: not a regular file")
    if source.suffix.lower() == ".onnx":
        raise ExportError(f"{source}: an ONNX model already; the export reads a model file (model.nnz)")
    return source


def _int(meta: dict, key: str, low: int, high: int, where: Path) -> int:
    value = meta.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ExportError(f"{where}: metadata {key}={value!r} is not a whole number within {low}..{high}")
    return value


def _numbers(values: Any, size: int, what: str, where: Path, positive: bool = False) -> list[float]:
    ok = isinstance(values, list) and len(values) == size
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )
    if not ok or (positive and min(values) <= 0):
        kind = "positive finite" if positive else "finite"
        raise ExportError(f"{where}: metadata {what} is not {size} {kind} numbers")
    return [float(v) for v in values]


def read_source(source: str | Path) -> ModelSource:
    """Load and check the model at ``source`` (a model file or a report folder)."""
    path = _model_file(Path(source))
    check_declared_sizes(path)
    try:
        model = load(path, backend="numpy")
    except (ModelFileError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise ExportError(str(exc)) from None
    meta = model.metadata if isinstance(model.metadata, dict) else {}
    ea = meta.get("ea")
    if ea is None and is_csv_forecaster(meta):
        kind, spec = csv_forecaster_spec(path, meta, model)
        return ModelSource(path, model, meta, None, kind, None, spec)
    if ea not in EXPORTABLE:
        who = f"a model of {ea!r}" if isinstance(ea, str) else "not a model saved by an expert advisor"
        raise ExportError(
            f"{path}: {who}; the export covers the models of {', '.join(EXPORTABLE)} (saved by neuronet "
            "run/backtest) and of neuronet forecast, whose inputs it can rebuild"
        )
    params = meta.get("params")
    if not isinstance(params, dict):
        raise ExportError(f"{path}: metadata has no EA parameters")
    candles = _candles(path, meta)
    if ea == "ForecastEA":
        _check_rule(path, ea, params)
        kind, spec = forecast_ea_spec(path, meta, model)
        return ModelSource(path, model, meta, ea, kind, candles, spec)
    if meta.get("feature_definitions") != FEATURE_DEFINITIONS:
        raise ExportError(
            f"{path}: trained on inputs computed before they followed MetaTrader (Wilder's ATR, weekday "
            "Monday = 0 in UTC); train it again with this version of neuronet to export it"
        )
    kind = params.get("model", "dense")
    if kind not in ("dense", "dbn"):
        raise ExportError(f"{path}: FractalEA model {kind!r} is neither 'dense' nor 'dbn'")
    _check_rule(path, ea, params)
    _check_fractal(path, meta, model, kind)
    return ModelSource(path, model, meta, ea, kind, candles)


def _candles(path: Path, meta: dict) -> CandleMeta:
    """The candles' symbol, timeframe, digits and clock; the symbol and digits go into the MQL5 source and
    the parity bars, so they must be a plain symbol name (no quote, backslash or control character) and
    0..10 digits."""
    try:
        candles = CandleMeta.from_dict(meta["candles"])
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ExportError(
            f"{path}: metadata does not say which symbol, timeframe and clock it was trained on ({exc})"
        ) from None
    symbol = candles.symbol
    if (
        not isinstance(symbol, str)
        or not 0 < len(symbol) <= 64
        or not symbol.isprintable()
        or set('"\\') & set(symbol)
    ):
        raise ExportError(f"{path}: metadata candles.symbol {symbol!r} is not a MetaTrader symbol name")
    if not 0 <= candles.digits <= MAX_DIGITS:
        raise ExportError(f"{path}: metadata candles.digits {candles.digits} is not within 0..{MAX_DIGITS}")
    return candles


# The trading rule's parameters that the MQL5 EA and OnnxEA read: name -> (lowest, highest, whole number).
RULES = {
    "FractalEA": {"threshold": (0.0, 1.0, False), "lots": (1e-8, 1e6, False), "sl_points": (0.0, 1e9, False),
                  "tp_points": (0.0, 1e9, False), "exit_bars": (0, 10**9, True)},
    "ForecastEA": {"lots": (1e-8, 1e6, False), "cost_multiple": (0.0, 1e6, False)},
}  # fmt: skip


WHOLE_POINTS = ("sl_points", "tp_points")  # distances the MQL5 EA takes as `input int` points


def _check_rule(path: Path, ea: str, params: dict) -> None:
    """The rule's numbers are finite and within their ranges, ``magic`` a whole number and the stop
    distances whole points (a hostile value would reach the generated MQL5 source, a fractional distance be
    rounded there)."""
    for name, (low, high, whole) in {**RULES[ea], "magic": (0, 2**63 - 1, True)}.items():
        value = params.get(name, 0 if name == "magic" else None)
        kinds = int if whole else int | float
        if not isinstance(value, kinds) or isinstance(value, bool) or not low <= value <= high:
            kind = "a whole number" if whole else "a number"
            raise ExportError(f"{path}: EA parameter {name}={value!r} is not {kind} within {low}..{high}")
        if name in WHOLE_POINTS and not float(value).is_integer():
            raise ExportError(
                f"{path}: EA parameter {name}={value!r} is not a whole number of points: the MQL5 EA places "
                "its stops a whole number of points from the price, as MetaTrader's stop levels count"
            )


def _check_fractal(path: Path, meta: dict, model: Any, kind: str) -> None:
    depth = _int(meta, "depth", 1, MAX_DEPTH, path)
    if meta.get("features") != list(FEATURES) or meta.get("classes") != list(CLASSES):
        raise ExportError(f"{path}: metadata features/classes are not FractalEA's {list(FEATURES)}")
    width = depth * len(FEATURES)
    scaler = meta.get("scaler")
    if not isinstance(scaler, dict):
        raise ExportError(f"{path}: metadata has no feature scaler")
    _numbers(scaler.get("mean"), width, "scaler.mean", path)
    _numbers(scaler.get("std"), width, "scaler.std", path, positive=True)
    if kind == "dbn":
        unit = meta.get("unit_scaling")
        if not isinstance(unit, dict):
            raise ExportError(f"{path}: a FractalEA DBN without its unit scaling")
        _numbers(unit.get("low"), width, "unit_scaling.low", path)
        _numbers(unit.get("span"), width, "unit_scaling.span", path, positive=True)
        inputs, outputs = model.n_inputs, model.head.layers[-1][0].shape[0]
    else:
        inputs, outputs = model.input_shape, model.output_shape
        inputs, outputs = (inputs[0] if len(inputs) == 1 else inputs), outputs[-1]
    if inputs != width or outputs != len(CLASSES):
        raise ExportError(f"{path}: the network takes {inputs} inputs and gives {outputs} outputs; FractalEA "
                          f"with depth {depth} feeds {width} and reads {len(CLASSES)}")  # fmt: skip
