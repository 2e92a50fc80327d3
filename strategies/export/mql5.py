"""The MQL5 Expert Advisor written next to an exported model: a static file with generated constants.

``expert.mq5`` (package data) is the same for every export but for the block of constants that replaces
its ``//@CONSTANTS@`` line: the model as a resource, the bars and shapes, the symbol and timeframe, the EA's
trading inputs (lots, threshold, SL/TP points, time exit) and the parity vector (one window of raw bars and
the outputs the exported model gives on it, which ``OnInit`` checks ``OnnxRun`` against).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from strategies.export.source import ModelSource
from strategies.features import BUY, SELL

MARKER = "//@CONSTANTS@"


def _numbers(values: np.ndarray, per_line: int = 7) -> str:
    """Values as MQL5 literals that read back to the same doubles (``repr`` round-trips)."""
    flat = [repr(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]
    lines = [", ".join(flat[i : i + per_line]) for i in range(0, len(flat), per_line)]
    return ",\n   ".join(lines)


def constants(name: str, src: ModelSource, bars: int, window: np.ndarray, output: np.ndarray,
              tolerance: float) -> str:  # fmt: skip
    """The generated block: every number the static EA reads."""
    p = src.meta["params"]
    c = src.candles
    lines = [
        f'#resource "{name}.onnx" as uchar ExtModel[]',
        f"#define NN_BARS {bars}",
        f"#define NN_FIELDS {window.shape[1]}",
        f"#define NN_OUTPUTS {len(output)}",
        f"#define NN_BUY {BUY}",
        f"#define NN_SELL {SELL}",
        f'#define NN_SYMBOL "{c.symbol}"',
        f"#define NN_PERIOD PERIOD_{c.timeframe.name}",
        f"#define NN_TOLERANCE {tolerance!r}",
        f"input double InpLots      = {float(p['lots'])!r};  // lots per trade",
        f"input double InpThreshold = {float(p['threshold'])!r};  // minimum class probability",
        f"input int    InpSLPoints  = {round(float(p['sl_points']))};  // stop-loss in points, 0 = none",
        f"input int    InpTPPoints  = {round(float(p['tp_points']))};  // take-profit in points, 0 = none",
        f"input int    InpExitBars  = {int(p['exit_bars'])};  // close after this many bars, 0 = never",
        f"input long   InpMagic     = {int(p.get('magic', 0))};  // magic number",
        f"const double NN_PARITY_RATES[{window.size}] = {{\n   {_numbers(window)}}};",
        f"const double NN_PARITY_OUTPUT[{len(output)}] = {{{_numbers(output)}}};",
    ]
    return "\n".join(lines)


def expert_source(name: str, src: ModelSource, bars: int, window: np.ndarray, output: np.ndarray,
                  tolerance: float) -> str:  # fmt: skip
    """The complete ``.mq5`` text."""
    template = resources.files("strategies.export").joinpath("expert.mq5").read_text(encoding="utf-8")
    return template.replace(MARKER, constants(name, src, bars, window, output, tolerance))
