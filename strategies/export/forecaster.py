"""The exported graph of a forecaster (ATFNet or PatchTST) and what the Python side computes on the same rows.

ForecastEA's graph reads what the Fractal EA's reads, ``rates (B, N, 7)`` float64 (``bar_graph.COLUMNS``,
the last N = seq_len closed bars, oldest first); it picks the EA's channels, standardises them with the study
rows' scaler, runs the network and maps the forecast back: ``forecast (B, T, C)`` float64 in price units.
A CSV forecaster (``neuronet forecast``) has no bars: its graph reads ``window (B, L, C)``, the last L rows
of the CSV's channels in the file's own units, in the model's channel order (the target last), and returns
the forecast in the same units. Everything runs in float64 but GELU's ``erf`` (float32 in ONNX Runtime 1.14).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nn.atfnet import ATFNet
from nn.model import Sequential
from strategies.export.bar_graph import COLUMNS
from strategies.export.build import Built
from strategies.export.frequency import frequency_block, harmonic_weight
from strategies.export.graph import DOUBLE, Graph
from strategies.export.source import ModelSource
from strategies.export.transformer import channel_independent, patchtst_backbone
from strategies.features import Scaler


def network(g: Graph, x: str, model: Sequential) -> str:
    """``x (B, L, C)`` standardised -> ``(B, T, C)``: ATFNet's ``w·F block + (1 − w)·T block`` with each
    window's harmonic weight, or PatchTST (``nn.atfnet``)."""
    layer = model.layers[0]
    if not isinstance(layer, ATFNet):
        return channel_independent(g, x, layer, patchtst_backbone)
    length, c = layer.input_shape
    rows = g.reshape(g.transpose(x, 0, 2, 1), -1, length)  # (B·C, L)
    w = g.reshape(harmonic_weight(g, rows, length), -1, 1, c)  # (B, 1, C)
    y_t = channel_independent(g, x, layer.children["t"], patchtst_backbone)
    y_f = channel_independent(g, x, layer.children["f"], frequency_block)
    return g.add(g.mul(w, y_f), g.mul(g.sub(g.const(1.0), w), y_t))


def forecaster(src: ModelSource, metadata: dict[str, str]) -> Built:
    """The graph of a ForecastEA (raw ``CopyRates`` rows in) or CSV forecaster (raw channel window in)."""
    import onnx

    spec = src.forecast
    g = Graph()
    c, n, t = len(spec.channels), spec.seq_len, spec.pred_len
    h = onnx.helper
    if src.ea is not None:
        picks = [COLUMNS.index(name) for name in spec.channels]
        x = g.op("Gather", "rates", g.const(picks, np.int64), axis=2)  # (B, N, C)
        given = h.make_tensor_value_info("rates", DOUBLE, ["batch", n, len(COLUMNS)])
        doc = f"{src.ea} ({src.kind}) on {n} closed bars of MqlRates: {', '.join(COLUMNS)}"
    else:
        x = "window"
        given = h.make_tensor_value_info("window", DOUBLE, ["batch", n, c])
        doc = f"{src.kind} forecaster on {n} rows of {', '.join(spec.channels)}"
    mean, std = g.const(spec.mean), g.const(spec.std)
    y = network(g, g.div(g.sub(x, mean), std), src.model)
    y = g.rename(g.add(g.mul(y, std), mean), "forecast")
    out = h.make_tensor_value_info("forecast", DOUBLE, ["batch", t, c])
    return Built(g.model([given], [out], metadata, doc + f" -> forecast of {t} steps"), n, "forecast", (t, c))


def python_forecast(src: ModelSource, windows: np.ndarray) -> np.ndarray:
    """``windows (M, L, C)`` raw channel values -> ``(M, T, C)``, as ForecastEA and ``neuronet forecast``
    compute it: scaled with the training scaler, the model, scaled back."""
    scaler = Scaler(src.forecast.mean, src.forecast.std)
    return scaler.inverse(src.model.predict(scaler.transform(windows), batch_size=256))


def channel_windows(frame: pd.DataFrame, channels: tuple[str, ...], n: int, ends: np.ndarray) -> np.ndarray:
    """``(len(ends), n, C)``: the channels of the ``n`` bars ending at each of ``ends``, oldest first."""
    table = np.column_stack([frame[name].to_numpy(dtype=np.float64) for name in channels])
    return table[np.asarray(ends)[:, None] - np.arange(n - 1, -1, -1)[None, :]]
