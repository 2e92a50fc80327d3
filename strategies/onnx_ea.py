"""``OnnxEA``: an expert advisor whose decisions come from an ONNX model run by onnxruntime.

The model is what ``neuronet export`` writes for an EA (or any model with the same contract, someone else's
included): one input ``(B, N, 7)`` of raw bars as MQL5's ``CopyRates`` returns them for the last N closed
bars, oldest first (``time`` in seconds of the server clock, ``open``, ``high``, ``low``, ``close``,
``tick_volume``, ``spread``), and one output that decides the rule traded:
- ``(B, 3)`` class probabilities (undefined, buy, sell): the Fractal EA's rule (``fractal.trade_fractal``)
  with the model's own threshold, lots, SL/TP and time exit;
- ``(B, T, C)`` a forecast of T bars of C channels in prices: ForecastEA's rule (``forecast.trade_forecast``)
  with the model's own lots, cost multiple and traded step, on its close channel.
The EA feeds it exactly those rows at each bar; the rule's values come from the model's ``neuronet``
metadata, each overridable; a model without that metadata trades the EA's defaults (a forecast of more than
one channel then needs ``close_channel``). So a backtest of an exported model gives the Python EA's trades.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np

from datafeeds.clock import UTC
from strategies.base import Bars, EAError, ExpertAdvisor
from strategies.forecast import ForecastRule, trade_forecast
from strategies.fractal import FractalRule, trade_fractal

FIELDS = ("time", "open", "high", "low", "close", "tick_volume", "spread")
_BATCH_VALUES = 2**22  # input values per onnxruntime call when the history is evaluated (32 MiB)
MAX_OUTPUTS = 10**5  # output values per window (a forecast of 720 steps of 100 channels is 72,000)
FRACTAL_ONLY = ("threshold", "sl_points", "tp_points", "exit_bars")
FORECAST_ONLY = ("cost_multiple", "horizon", "close_channel")


class OnnxEA(ExpertAdvisor):
    """Trades an ONNX model's class probabilities with the Fractal EA's rule, or its forecast with
    ForecastEA's."""

    model: str = ""  # path of the .onnx file
    lots: float = -1.0  # -1 = the model's own
    threshold: float = -1.0  # class models: minimum class probability; -1 = the model's own
    sl_points: float = -1.0  # class models: points, 0 = none; -1 = the model's own
    tp_points: float = -1.0  # class models: points, 0 = none; -1 = the model's own
    exit_bars: int = -1  # class models: close positions after this many bars, 0 = never; -1 = the model's own
    cost_multiple: float = (
        -1.0
    )  # forecasters: trade a move beyond this times the spread; -1 = the model's own
    horizon: int = -1  # forecasters: forecast step (1..T) that sets the trade; -1 = the model's own
    close_channel: int = -1  # forecasters: the close among the output channels; -1 = the model's own

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
        self.n_bars, self.input_name, self.dtype, self.out_shape = self._contract(path)
        record = self.session.get_modelmeta().custom_metadata_map.get("neuronet")
        try:
            own = json.loads(record) if record else {}
        except json.JSONDecodeError:
            raise EAError(f"{path}: its neuronet metadata is not JSON") from None
        given = {k: v for k, v in self.params.items() if v != -1 and k != "model"}
        forecasts = len(self.out_shape) == 2
        foreign = [k for k in (FRACTAL_ONLY if forecasts else FORECAST_ONLY) if k in given]
        if foreign:
            kind = "forecasts" if forecasts else "gives class probabilities"
            raise EAError(f"{path}: the model {kind}; OnnxEA {', '.join(foreign)} do not apply to it")
        self.rule = self._forecast_rule(path, own, given) if forecasts else self._fractal_rule(own, given)
        self.signal = self.indicator(self._predict_all, "onnx_output")

    def _fractal_rule(self, own: dict, given: dict) -> FractalRule:
        rule = own.get("rule", {}) if isinstance(own.get("rule"), dict) else {}
        names = {f.name for f in fields(FractalRule)}
        values = {**FractalRule().to_dict(), **{k: v for k, v in {**rule, **given}.items() if k in names}}
        try:
            return FractalRule.of(values)
        except (TypeError, ValueError):
            raise EAError(f"OnnxEA: the model's rule {rule} is not FractalEA's") from None

    def _forecast_rule(self, path: Path, own: dict, given: dict) -> ForecastRule:
        """Lots, cost multiple, step (``rule``) and close channel (``close``) of the model, or overridden."""
        steps, channels = self.out_shape
        rule = own.get("rule", {}) if isinstance(own.get("rule"), dict) else {}
        close = given.get("close_channel", own.get("close", 0 if channels == 1 else None))
        if not isinstance(close, int) or not 0 <= close < channels:
            raise EAError(f"{path}: the forecast has {channels} channels; say which is the close with -p "
                          f"close_channel=0..{channels - 1}")  # fmt: skip
        self.close_index = close
        defaults = ForecastRule(step=steps).to_dict()
        values = {**defaults, **{k: rule[k] for k in defaults if k in rule}}
        values |= {"step": given.get("horizon", values["step"])}
        values |= {k: given[k] for k in ("lots", "cost_multiple") if k in given}
        step = values["step"]
        if not isinstance(step, int) or not 1 <= step <= steps:
            raise EAError(f"OnnxEA horizon must be within 1..{steps} (the forecast's steps), got {step}")
        return ForecastRule(float(values["lots"]), float(values["cost_multiple"]), step)

    def _contract(self, path: Path) -> tuple[int, str, type, tuple[int, ...]]:
        """One input ``(B, N, 7)`` float64 or float32; an output ``(B, 3)`` or ``(B, T, C)``."""
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        shape = inputs[0].shape if len(inputs) == 1 else None
        if shape is None or len(shape) != 3 or shape[2] != len(FIELDS) or not isinstance(shape[1], int):
            raise EAError(f"{path}: OnnxEA needs one input (batch, N, 7) of CopyRates rows, got "
                          f"{[(i.name, i.shape) for i in inputs]}")  # fmt: skip
        if inputs[0].type not in ("tensor(double)", "tensor(float)"):
            raise EAError(f"{path}: the input is {inputs[0].type}; OnnxEA feeds double or float")
        if outputs and outputs[0].type not in ("tensor(double)", "tensor(float)"):
            raise EAError(f"{path}: the output is {outputs[0].type}; OnnxEA reads double or float")
        out = tuple(outputs[0].shape[1:]) if outputs else ()
        classes = out == (3,)
        forecast = len(out) == 2 and all(isinstance(d, int) and d >= 1 for d in out)
        if not (classes or forecast):
            got = [(o.name, o.shape) for o in outputs]
            raise EAError(f"{path}: OnnxEA reads an output (batch, 3) of class probabilities or (batch, "
                          f"steps, channels) of a forecast, got {got}")  # fmt: skip
        values = int(np.prod(out))
        if values > MAX_OUTPUTS or shape[1] < 1:
            raise EAError(
                f"{path}: the model declares {shape[1]} bars in and {values} values out per window; OnnxEA "
                f"reads at least 1 bar and at most {MAX_OUTPUTS} values"
            )
        dtype = np.float64 if inputs[0].type == "tensor(double)" else np.float32
        return int(shape[1]), inputs[0].name, dtype, out

    def _predict_all(self, bars: Bars) -> np.ndarray:
        """``(len(bars), K)``: the model's output, flattened, at every bar with ``N`` bars of history."""
        n, out = self.n_bars, np.full((len(bars), int(np.prod(self.out_shape))), np.nan)
        if len(bars) < n:
            return out
        clock = getattr(bars.meta, "clock", UTC)
        seconds = clock.to_broker_seconds(bars.time.as_unit("s").asi8).astype(np.float64)
        table = np.column_stack([seconds, *(getattr(bars, f).astype(np.float64) for f in FIELDS[1:])])
        ends = np.arange(n - 1, len(bars))
        batch = max(1, _BATCH_VALUES // (n * len(FIELDS)))
        for start in range(0, len(ends), batch):
            chunk = ends[start : start + batch]
            windows = table[chunk[:, None] - np.arange(n - 1, -1, -1)[None, :]].astype(
                self.dtype
            )  # (M, N, 7)
            y = self.session.run(None, {self.input_name: windows})[0]
            if y.shape != (len(chunk), *self.out_shape):  # the declared shape is the model's word only
                raise EAError(
                    f"{self.params['model']}: the model gave an output of shape {y.shape} for {len(chunk)} "
                    f"windows; it declares (batch, {', '.join(map(str, self.out_shape))})"
                )
            out[chunk] = y.reshape(len(chunk), -1)
        return out

    def on_bar(self) -> None:
        y = self.signal[-1]  # the output on the bars closed so far
        if not np.isfinite(y).all():
            return
        if isinstance(self.rule, FractalRule):
            trade_fractal(self, y, self.rule)
        else:
            trade_forecast(self, y.reshape(self.out_shape)[:, self.close_index], self.rule)
