"""Export a trained EA to MetaTrader 5: ``NAME.onnx`` (features + scaler + network) and ``NAME.mq5``.

``export(source, out)`` reads a model file or a report folder (``source.read_source``), builds the graph
(``build``), checks it against the Python EA on synthetic bars of the model's symbol, timeframe and clock
(probabilities within ``TOLERANCE``), and writes the ONNX model and the MQL5 Expert Advisor that embeds it,
both atomically and only once every check has passed: a refused export writes nothing.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuronet.atomic import replace_atomically
from strategies.base import ExpertAdvisor
from strategies.errors import ExportError
from strategies.export.bar_graph import window_bars
from strategies.export.build import Built, fractal, python_fractal, rates_windows
from strategies.export.graph import ALLOWED, OPSET
from strategies.export.mql5 import expert_source
from strategies.export.source import ModelSource, read_source
from strategies.fractal import FractalEA

__all__ = ["OPSET", "TOLERANCE", "Exported", "export", "metadata_of"]

TOLERANCE = 1e-5  # largest difference of a class probability between the graph and the Python EA
PARITY_SEED = 20240  # the synthetic bars of the parity vector


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote: the two files, the bars the model reads and the parity check's figures."""

    onnx_path: Path
    mq5_path: Path
    bars: int
    max_difference: float
    windows_checked: int


def _session(model_bytes: bytes):
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - the onnx extra installs it
        raise ExportError("the ONNX export needs onnxruntime: pip install 'neuronet[onnx]'") from None
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def metadata_of(src: ModelSource, bars: int) -> dict[str, str]:
    """The model's ``metadata_props``: one JSON record ``neuronet`` with what the EA needs to trade it."""
    params = src.meta["params"]
    rule = {k: params[k] for k in ("threshold", "lots", "sl_points", "tp_points", "exit_bars") if k in params}
    record = {
        "ea": src.ea,
        "model": src.kind,
        "bars": bars,
        "inputs": ["time", "open", "high", "low", "close", "tick_volume", "spread"],
        "time": "seconds of the broker's server clock (MqlRates.time)",
        "candles": src.candles.to_dict(),
        "classes": src.meta.get("classes"),
        "rule": rule,
        "params": params,
        "opset": OPSET,
        "seed_weight": 1e-7,
    }
    return {"neuronet": json.dumps(record, sort_keys=True)}


def _check_ops(model) -> None:
    """Every node's operator must be in ``ALLOWED`` (ONNX Runtime 1.14's kernels at opset 17)."""
    bad = sorted({n.op_type for n in model.graph.node if n.op_type not in ALLOWED or n.domain not in ("",)})
    if bad:
        raise ExportError(
            f"the graph uses operators outside ONNX Runtime 1.14's opset {OPSET}: {', '.join(bad)}"
        )


def _parity(src: ModelSource, built: Built, session) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Run graph and Python EA on the same synthetic bars; return the last window, its outputs, the largest
    difference and the number of windows compared. A difference above ``TOLERANCE`` refuses the export."""
    from datafeeds.synthetic import synthetic_candles

    c = src.candles
    frame = synthetic_candles(c.symbol, c.timeframe, built.bars + 200, seed=PARITY_SEED, clock=c.clock,
                              digits=c.digits)  # fmt: skip
    rows, want = python_fractal(src, frame)
    keep = rows >= built.bars - 1
    windows = rates_windows(frame, c.clock, built.bars, rows[keep])
    got = session.run([built.output], {"rates": windows})[0]
    diff = float(np.abs(got - want[keep]).max())
    if not diff <= TOLERANCE or (got.argmax(axis=1) != want[keep].argmax(axis=1)).any():
        raise ExportError(
            f"the exported graph differs from the Python EA by {diff:.2e} (tolerance {TOLERANCE})"
        )
    return windows[-1], got[-1], diff, len(windows)


OWN_LINES = {"FractalEA": {"fractal_proba", "logistic_proba"}}  # the indicator lines each EA declares itself


def _from_ea(ea: ExpertAdvisor, folder: Path) -> Path:
    """Save a trained EA's model into ``folder`` after checking that its inputs have an ONNX form."""
    cls = type(ea).__name__
    python_only = sorted({line.name for line, _ in ea.declared_indicators()} - OWN_LINES.get(cls, set()))
    if python_only:
        raise ExportError(
            f"{cls} declares {', '.join(map(repr, python_only))} through indicator(): computed in Python "
            "only, with no ONNX form; the export rebuilds the built-in FractalEA's inputs alone"
        )
    if type(ea) is not FractalEA:
        raise ExportError(f"{cls}: the export covers the built-in FractalEA, whose inputs it can rebuild")
    saved = ea.save_model(str(folder / "model"))
    if saved is None:
        raise ExportError(f"{cls} has no trained model to export: run it through a backtest first")
    return Path(saved)


def export(
    source: str | Path | ExpertAdvisor, out: str | Path | None = None, *, name: str = "model"
) -> Exported:
    """Write ``out/NAME.onnx`` and ``out/NAME.mq5`` for the model at ``source``: a model file, a report folder
    or a trained EA (``Backtest(...).run().ea_instance``); default ``out``: the model file's folder."""
    if not name or Path(name).name != name or name.startswith("."):
        raise ExportError(f"--name {name!r} must be a plain file name (no folder)")
    if isinstance(source, ExpertAdvisor):
        if out is None:
            raise ExportError("exporting a trained EA needs the folder to write to (out=)")
        with tempfile.TemporaryDirectory() as tmp:
            return _export(read_source(_from_ea(source, Path(tmp))), Path(out), name)
    src = read_source(source)
    return _export(src, Path(out) if out is not None else src.path.parent, name)


def _export(src: ModelSource, folder: Path, name: str) -> Exported:
    import onnx

    built = fractal(src, metadata_of(src, window_bars(int(src.meta["depth"]))))
    _check_ops(built.model)
    data = built.model.SerializeToString()
    session = _session(data)
    window, expected, diff, count = _parity(src, built, session)
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder}: is not a folder")
    mq5 = expert_source(name, src, built.bars, window, expected, TOLERANCE)
    onnx.checker.check_model(built.model)
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path, mq5_path = folder / f"{name}.onnx", folder / f"{name}.mq5"
    replace_atomically(onnx_path, lambda f: f.write(data))
    replace_atomically(mq5_path, lambda f: f.write(mq5.encode("utf-8")))
    return Exported(onnx_path, mq5_path, built.bars, diff, count)
