"""``OnnxEA``: an expert advisor whose decisions come from an ONNX model run by onnxruntime.

The model is what ``neuronet export`` writes (or any model with the same contract, someone else's included):
one input ``(B, N, 7)`` of raw bars as MQL5's ``CopyRates`` returns them for the last N closed bars, oldest
first (``time`` in seconds of the server clock, ``open``, ``high``, ``low``, ``close``, ``tick_volume``,
``spread``), one output ``(B, 3)`` of class probabilities (undefined, buy, sell). The EA feeds it exactly
those rows at each bar and trades the Fractal EA's rule (``fractal.trade_fractal``) with the model's own
threshold, lots, SL/TP and time exit (its ``neuronet`` metadata), each overridable; a model without that
metadata trades FractalEA's defaults. So a backtest of an exported model gives the Python EA's trades.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from datafeeds.clock import UTC
from strategies.base import Bars, EAError, ExpertAdvisor
from strategies.fractal import FractalRule, trade_fractal

FIELDS = ("time", "open", "high", "low", "close", "tick_volume", "spread")
_BATCH = 512  # windows per onnxruntime call when the history is evaluated


class OnnxEA(ExpertAdvisor):
    """Trades an ONNX model's class probabilities with the Fractal EA's rule."""

    model: str = ""  # path of the .onnx file
    threshold: float = -1.0  # minimum class probability; -1 = the model's own
    lots: float = -1.0  # -1 = the model's own
    sl_points: float = -1.0  # points, 0 = none; -1 = the model's own
    tp_points: float = -1.0  # points, 0 = none; -1 = the model's own
    exit_bars: int = -1  # close positions after this many bars, 0 = never; -1 = the model's own

    def on_init(self) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise EAError("OnnxEA needs onnxruntime: pip install 'neuronet[onnx]'") from None
        path = Path(self.params["model"])
        if not path.is_file():
            raise EAError(f"OnnxEA model {str(path)!r} is not a file: pass -p model=PATH.onnx")
        try:
            self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise EAError(
                f"{path}: onnxruntime cannot load it as an ONNX model ({str(exc).splitlines()[0]})"
            ) from None
        self.n_bars, self.input_name, self.dtype = self._contract(path)
        record = self.session.get_modelmeta().custom_metadata_map.get("neuronet")
        own = json.loads(record).get("rule", {}) if record else {}
        given = {k: v for k, v in self.params.items() if k in FractalRule.__dataclass_fields__ and v != -1}
        self.rule = FractalRule.of({**FractalRule().to_dict(), **own, **given})
        self.proba = self.indicator(self._predict_all, "onnx_proba")

    def _contract(self, path: Path) -> tuple[int, str, type]:
        """The model's input must be ``(B, N, 7)`` float64 or float32 and its output ``(B, 3)``."""
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        shape = inputs[0].shape if len(inputs) == 1 else None
        if shape is None or len(shape) != 3 or shape[2] != len(FIELDS) or not isinstance(shape[1], int):
            raise EAError(f"{path}: OnnxEA needs one input (batch, N, 7) of CopyRates rows, got "
                          f"{[(i.name, i.shape) for i in inputs]}")  # fmt: skip
        if inputs[0].type not in ("tensor(double)", "tensor(float)"):
            raise EAError(f"{path}: the input is {inputs[0].type}; OnnxEA feeds double or float")
        if len(outputs) < 1 or len(outputs[0].shape) != 2 or outputs[0].shape[1] != 3:
            raise EAError(f"{path}: OnnxEA reads an output (batch, 3) of class probabilities, got "
                          f"{[(o.name, o.shape) for o in outputs]}")  # fmt: skip
        dtype = np.float64 if inputs[0].type == "tensor(double)" else np.float32
        return int(shape[1]), inputs[0].name, dtype

    def _predict_all(self, bars: Bars) -> np.ndarray:
        """``(len(bars), 3)``: the model's probabilities at every bar with ``N`` bars of history."""
        n, out = self.n_bars, np.full((len(bars), 3), np.nan)
        if len(bars) < n:
            return out
        clock = getattr(bars.meta, "clock", UTC)
        seconds = clock.to_broker_seconds(bars.time.as_unit("s").asi8).astype(np.float64)
        table = np.column_stack([seconds, *(getattr(bars, f).astype(np.float64) for f in FIELDS[1:])])
        ends = np.arange(n - 1, len(bars))
        for start in range(0, len(ends), _BATCH):
            chunk = ends[start : start + _BATCH]
            windows = table[chunk[:, None] - np.arange(n - 1, -1, -1)[None, :]].astype(
                self.dtype
            )  # (M, N, 7)
            out[chunk] = self.session.run(None, {self.input_name: windows})[0]
        return out

    def on_bar(self) -> None:
        p = self.proba[-1]  # the probabilities of the bar that just closed
        if np.isfinite(p).all():
            trade_fractal(self, p, self.rule)
