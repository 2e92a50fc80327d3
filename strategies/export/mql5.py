"""The MQL5 Expert Advisor written next to an exported model: a static file with generated constants.

Each EA has its template (package data): ``expert.mq5`` trades FractalEA's rule on class probabilities,
``forecast.mq5`` ForecastEA's on a forecast. A template is the same for every export but for the block of
constants that replaces its ``//@CONSTANTS@`` line: the model as a resource, the bars and shapes, the symbol
and timeframe, the EA's trading inputs and the parity vector (one window of raw bars and the outputs the
exported model gives on it, which ``OnInit`` checks ``OnnxRun`` against).
"""

from __future__ import annotations

import zlib
from importlib import resources

import numpy as np

from strategies.export.build import Built
from strategies.export.parity import Parity
from strategies.export.source import ModelSource
from strategies.features import BUY, SELL

MARKER = "//@CONSTANTS@"
TEMPLATES = {"FractalEA": "expert.mq5", "ForecastEA": "forecast.mq5"}


def _numbers(values: np.ndarray, per_line: int = 7) -> str:
    """Values as MQL5 literals that read back to the same doubles (``repr`` round-trips)."""
    flat = [repr(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]
    lines = [", ".join(flat[i : i + per_line]) for i in range(0, len(flat), per_line)]
    return ",\n   ".join(lines)


def _common(name: str, src: ModelSource, built: Built, parity: Parity, tolerance: float) -> list[str]:
    c = src.candles
    return [
        f'#resource "{name}.onnx" as uchar ExtModel[]',
        f"#define NN_BARS {built.bars}",
        f"#define NN_FIELDS {parity.window.shape[1]}",
        f'#define NN_SYMBOL "{c.symbol}"',
        f"#define NN_PERIOD PERIOD_{c.timeframe.name}",
        f"#define NN_TOLERANCE {tolerance!r}",
    ]


def _parity_vector(parity: Parity) -> list[str]:
    return [
        f"const double NN_PARITY_RATES[{parity.window.size}] = {{\n   {_numbers(parity.window)}}};",
        f"const double NN_PARITY_OUTPUT[{parity.output.size}] = {{\n   {_numbers(parity.output)}}};",
    ]


def magic_number(params: dict, model: bytes) -> int:
    """The EA's magic number: its own, or where that is 0 the CRC-32 of its model. In a terminal 0 is the
    number of the trades opened by hand, which an EA of magic 0 would count in its net position and close at
    its time exit; the checksum gives each exported model a number of its own, the same on every export."""
    return int(params.get("magic", 0)) or zlib.crc32(model) or 1


def fractal_constants(src: ModelSource, parity: Parity, magic: int) -> list[str]:
    """FractalEA's shapes and trading inputs (lots, threshold, SL/TP points, time exit, magic number)."""
    p = src.meta["params"]
    return [
        f"#define NN_OUTPUTS {parity.output.size}",
        f"#define NN_BUY {BUY}",
        f"#define NN_SELL {SELL}",
        f"input double InpLots      = {float(p['lots'])!r};  // lots per trade",
        f"input double InpThreshold = {float(p['threshold'])!r};  // minimum class probability",
        f"input int    InpSLPoints  = {int(p['sl_points'])};  // stop-loss in points, 0 = none",
        f"input int    InpTPPoints  = {int(p['tp_points'])};  // take-profit in points, 0 = none",
        f"input int    InpExitBars  = {int(p['exit_bars'])};  // close after this many bars, 0 = never",
        f"input long   InpMagic     = {magic};  // magic number (0 is the manual trades')",
    ]


def forecast_constants(src: ModelSource, parity: Parity, magic: int) -> list[str]:
    """ForecastEA's shapes (steps x channels), the traded step and close channel, its trading inputs, and
    each channel's training deviation: the parity check's unit."""
    p, spec = src.meta["params"], src.forecast
    return [
        f"#define NN_STEPS {spec.pred_len}",
        f"#define NN_CHANNELS {len(spec.channels)}",
        f"#define NN_CLOSE {spec.close}  // the close among the channels: {', '.join(spec.channels)}",
        f"input double InpLots         = {float(p['lots'])!r};  // lots per trade",
        f"input double InpCostMultiple = {float(p['cost_multiple'])!r};  // trade a move beyond this times "
        "the spread",
        f"input int    InpHorizon      = {spec.step};  // forecast step (1..NN_STEPS) that sets the trade",
        f"input long   InpMagic        = {magic};  // magic number (0 is the manual trades')",
        f"const double NN_SCALE[{len(spec.std)}] = {{{_numbers(np.asarray(spec.std))}}};",
    ]


def expert_source(
    name: str, src: ModelSource, built: Built, parity: Parity, tolerance: float, model: bytes
) -> str:
    """The complete ``.mq5`` text for the EA of ``src`` whose serialised ONNX model is ``model``."""
    extra = fractal_constants if src.forecast is None else forecast_constants
    magic = magic_number(src.meta["params"], model)
    lines = [*_common(name, src, built, parity, tolerance), *extra(src, parity, magic)]
    lines += _parity_vector(parity)
    template = resources.files("strategies.export").joinpath(TEMPLATES[src.ea]).read_text(encoding="utf-8")
    return template.replace(MARKER, "\n".join(lines))
