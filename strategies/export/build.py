"""The exported graph of each model kind: raw ``CopyRates`` rows in, what the EA decides from out.

Input ``rates (B, N, 7)`` float64 (``bar_graph.COLUMNS``, oldest bar first, time in server-clock seconds);
output ``probabilities (B, 3)`` float32 for FractalEA (undefined, buy, sell). Features and scaling run in
float64 as in Python, the network in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from strategies.export.bar_graph import COLUMNS, fractal_features, window_bars
from strategies.export.graph import Graph
from strategies.export.networks import dbn, sequential
from strategies.export.source import ModelSource
from strategies.features import Scaler, bar_features, windows


@dataclass(frozen=True)
class Built:
    """An exported graph: its ONNX model, the bars (rows) it reads and its output's name and per-window
    shape (``(3,)`` class probabilities; ``(T, C)`` a forecast)."""

    model: object  # onnx.ModelProto
    bars: int
    output: str
    shape: tuple[int, ...]


def fractal(src: ModelSource, metadata: dict[str, str]) -> Built:
    """FractalEA (dense or DBN): features, scaler, unit scaling (DBN), network, class probabilities."""
    import onnx

    depth = int(src.meta["depth"])
    n = window_bars(depth)
    g = Graph()
    x = fractal_features(g, "rates", n, depth)
    scaler = src.meta["scaler"]
    x = g.div(g.sub(x, g.const(scaler["mean"])), g.const(scaler["std"]))
    if src.kind == "dbn":
        unit = src.meta["unit_scaling"]
        x = g.div(g.sub(x, g.const(unit["low"])), g.const(unit["span"]))
        x = g.op("Clip", x, g.const(0.0), g.const(1.0))
        out = dbn(g, g.op("Cast", x, to=onnx.TensorProto.FLOAT), src.model)
    else:
        out = sequential(g, g.op("Cast", x, to=onnx.TensorProto.FLOAT), src.model)
    out = g.rename(out, "probabilities")
    h = onnx.helper
    rates = h.make_tensor_value_info("rates", onnx.TensorProto.DOUBLE, ["batch", n, len(COLUMNS)])
    probs = h.make_tensor_value_info("probabilities", onnx.TensorProto.FLOAT, ["batch", 3])
    doc = f"FractalEA ({src.kind}) on {n} closed bars of MqlRates: {', '.join(COLUMNS)}"
    return Built(g.model([rates], [probs], metadata, doc), n, "probabilities", (3,))


def python_fractal(src: ModelSource, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """What the Python EA computes on ``frame`` (every bar's history from its first bar): ``rows (M,)`` bar
    indices and ``(M, 3)`` probabilities, through ``features`` and the model as FractalEA runs them."""
    cols = [frame[c].to_numpy(dtype=np.float64) for c in ("open", "high", "low", "close", "tick_volume")]
    x, rows = windows(bar_features(*cols, frame.index, src.candles.clock), int(src.meta["depth"]))
    xs = Scaler.from_dict(src.meta["scaler"]).transform(x)
    if src.kind == "dbn":
        unit = src.meta["unit_scaling"]
        xs = np.clip((xs - np.asarray(unit["low"])) / np.asarray(unit["span"]), 0.0, 1.0)
        return rows, src.model.predict(xs)
    return rows, src.model.predict(xs, batch_size=4096)


def rates_windows(frame: pd.DataFrame, clock, n: int, ends: np.ndarray) -> np.ndarray:
    """``(len(ends), n, 7)``: for each bar index in ``ends``, the ``n`` bars ending there as MQL5's
    ``CopyRates`` returns them (oldest first, time in seconds of the server clock ``clock``)."""
    seconds = clock.to_broker_seconds(frame.index.as_unit("s").asi8).astype(np.float64)
    table = np.column_stack([seconds, *(frame[c].to_numpy(dtype=np.float64) for c in COLUMNS[1:])])
    idx = np.asarray(ends)[:, None] - np.arange(n - 1, -1, -1)[None, :]
    return table[idx]
