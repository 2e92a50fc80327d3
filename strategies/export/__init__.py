"""Export a trained model to MetaTrader 5: ``NAME.onnx`` (inputs, scaler and network) and ``NAME.mq5``.

``export(source, out)`` reads a model file or a report folder (``source.read_source``): FractalEA's (dense or
DBN), ForecastEA's (ATFNet or PatchTST) or a CSV forecaster of ``neuronet forecast``. It builds the graph
(``build``, ``forecaster``), checks it against the Python side on synthetic rows (``parity``) and writes the
ONNX model and, for an EA, the MQL5 Expert Advisor that embeds it, both atomically and only once every check
has passed: a refused export writes nothing. A CSV forecaster has no trading rule, hence no ``.mq5``.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronet.atomic import replace_atomically
from strategies.base import ExpertAdvisor
from strategies.errors import ExportError
from strategies.export.bar_graph import COLUMNS, SEED_WEIGHT, window_bars
from strategies.export.build import Built, fractal
from strategies.export.forecaster import forecaster
from strategies.export.graph import ALLOWED, FLOAT_ONLY, OPSET
from strategies.export.mql5 import expert_source
from strategies.export.parity import (
    FORECAST_TOLERANCE,
    TOLERANCE,
    Parity,
    forecast_parity,
    fractal_parity,
)
from strategies.export.source import ModelSource, read_source
from strategies.forecast import ForecastEA, ForecastRule
from strategies.fractal import FractalEA, FractalRule

__all__ = ["FORECAST_TOLERANCE", "OPSET", "TOLERANCE", "Exported", "export", "metadata_of"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote: the files (no ``.mq5`` for a CSV forecaster), the rows the model reads, the
    parity check's figures (``measure`` says in which unit) and a warning the caller should show, if any."""

    onnx_path: Path
    mq5_path: Path | None
    bars: int
    max_difference: float
    windows_checked: int
    measure: str
    warning: str | None = None


def _session(model_bytes: bytes):
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - the onnx extra installs it
        raise ExportError("the ONNX export needs onnxruntime: pip install 'neuronet[onnx]'") from None
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def _training(src: ModelSource) -> dict:
    """How many models the EA trained (walk-forward retraining) and the study window of the last one."""
    rounds, spans = src.meta.get("training_rounds", 1), src.meta.get("study_periods", [])
    ok = isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1
    ok = (
        ok
        and isinstance(spans, list)
        and all(isinstance(s, list) and len(s) == 2 and all(isinstance(t, str) for t in s) for s in spans)
    )
    if not ok or (spans and len(spans) != rounds):
        raise ExportError(f"{src.path}: metadata training_rounds/study_periods do not describe the training")
    return {"rounds": rounds, "trained_on": spans[-1] if spans else None}


def _retraining(src: ModelSource, training: dict, last_model: bool) -> str | None:
    """An EA retrained walk-forward (``retrain_every``) traded each stretch of its test with another model;
    its file holds the last one only, so a backtest of the export cannot give the EA's trades before the
    last retraining. Refused unless ``last_model``; then the warning that names the period."""
    rounds, span = training["rounds"], training["trained_on"]
    if rounds == 1:
        return None
    period = f"{span[0]} .. {span[1]}" if span else "an unrecorded period"
    every = src.meta.get("params", {}).get("retrain_every")
    if not last_model:
        raise ExportError(
            f"{src.ea} was trained {rounds} times walk-forward (retrain_every={every}) and its model file "
            f"holds only the last model, trained on {period}: a backtest of the export cannot give the EA's "
            "trades before that retraining. Export that model anyway with --last-model (Python: "
            "last_model=True)"
        )
    since = f"the bar that closed at {span[1]}" if span else "its last retraining"
    return (
        f"exported the last of {src.ea}'s {rounds} walk-forward models, trained on {period}: a backtest of "
        f"it (OnnxEA) decides as the EA did from {since} on, not before"
    )


def metadata_of(src: ModelSource, bars: int) -> dict[str, str]:
    """The model's ``metadata_props``: one JSON record ``neuronet`` with what it takes to trade or feed it."""
    params = src.meta.get("params", {})
    record: dict = {"ea": src.ea, "model": src.kind, "bars": bars, "opset": OPSET, "training": _training(src)}
    if src.candles is not None:
        record |= {
            "inputs": list(COLUMNS),
            "time": "seconds of the broker's server clock (MqlRates.time)",
            "candles": src.candles.to_dict(),
            "params": params,
        }
    spec = src.forecast
    if spec is None:
        rule = FractalRule.of(params).to_dict()  # source._check_rule checked every value
        record |= {"classes": src.meta.get("classes"), "rule": rule, "seed_weight": SEED_WEIGHT}
        return {"neuronet": json.dumps(record, sort_keys=True)}
    record |= {
        "channels": list(spec.channels),
        "seq_len": spec.seq_len,
        "pred_len": spec.pred_len,
        "scaler": {"mean": list(spec.mean), "std": list(spec.std)},
        "output": "forecast (batch, pred_len, channels) in the inputs' units",
    }
    if src.ea is None:
        record |= {"inputs": "window (batch, seq_len, channels): the last rows, oldest first, raw values",
                   "target": src.meta.get("target")}  # fmt: skip
    else:
        rule = ForecastRule(float(params["lots"]), float(params["cost_multiple"]), spec.step)
        record |= {"close": spec.close, "rule": rule.to_dict()}
    return {"neuronet": json.dumps(record, sort_keys=True)}


def _check_ops(model) -> None:
    """Every node's operator must be in ``ALLOWED`` (ONNX Runtime 1.14's kernels at opset 17), and the
    float32-only ones (``FLOAT_ONLY``) must take float32."""
    import onnx

    bad = sorted({n.op_type for n in model.graph.node if n.op_type not in ALLOWED or n.domain not in ("",)})
    if bad:
        raise ExportError(
            f"the graph uses operators outside ONNX Runtime 1.14's opset {OPSET}: {', '.join(bad)}"
        )
    typed = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in [*typed.graph.value_info, *typed.graph.input]}
    float32 = onnx.TensorProto.FLOAT
    wrong = sorted(
        {n.op_type for n in model.graph.node if n.op_type in FLOAT_ONLY and types.get(n.input[0]) != float32}
    )
    if wrong:
        raise ExportError(f"the graph runs {', '.join(wrong)} on other than float32, which ONNX Runtime 1.14 "
                          "does not implement")  # fmt: skip


# Names Windows keeps for devices, with any extension (Win32 "Naming Files, Paths, and Namespaces").
WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL", *(f"{d}{i}" for d in ("COM", "LPT") for i in range(1, 10))}
OWN_LINES = {"FractalEA": {"fractal_proba", "logistic_proba"}}  # the indicator lines each EA declares itself
BUILT_IN = (FractalEA, ForecastEA)  # the EAs whose inputs the export rebuilds


def _from_ea(ea: ExpertAdvisor, folder: Path) -> Path:
    """Save a trained EA's model into ``folder`` after checking that its inputs have an ONNX form."""
    cls = type(ea).__name__
    python_only = sorted({line.name for line, _ in ea.declared_indicators()} - OWN_LINES.get(cls, set()))
    if python_only:
        raise ExportError(
            f"{cls} declares {', '.join(map(repr, python_only))} through indicator(): computed in Python "
            "only, with no ONNX form; the export rebuilds the inputs of the built-in FractalEA and ForecastEA"
        )
    if type(ea) not in BUILT_IN:
        raise ExportError(f"{cls}: the export covers the built-in FractalEA and ForecastEA, whose inputs it "
                          "can rebuild")  # fmt: skip
    saved = ea.save_model(str(folder / "model"))
    if saved is None:
        raise ExportError(f"{cls} has no trained model to export: run it through a backtest first")
    return Path(saved)


def export(
    source: str | Path | ExpertAdvisor,
    out: str | Path | None = None,
    *,
    name: str = "model",
    last_model: bool = False,
) -> Exported:
    """Write ``out/NAME.onnx`` and ``out/NAME.mq5`` for the model at ``source``: a model file, a report folder
    or a trained EA (``Backtest(...).run().ea_instance``); default ``out``: the model file's folder.
    ``last_model``: export the last model of an EA retrained walk-forward (refused otherwise)."""
    if (
        not re.fullmatch(r"[A-Za-z0-9_.\- ]+", name)
        or Path(name).name != name
        or name.startswith(".")
        or name.split(".")[0].strip().upper() in WINDOWS_DEVICES
    ):
        raise ExportError(
            f"--name {name!r} must be a plain file name (ASCII letters, digits, '_', '-', '.', spaces; no "
            "folder, not a Windows device such as CON or NUL): the MQL5 EA names its resource with it, in "
            "a folder of the terminal on Windows"
        )
    if isinstance(source, ExpertAdvisor):
        if out is None:
            raise ExportError("exporting a trained EA needs the folder to write to (out=)")
        with tempfile.TemporaryDirectory() as tmp:
            return _export(read_source(_from_ea(source, Path(tmp))), Path(out), name, last_model)
    src = read_source(source)
    return _export(src, Path(out) if out is not None else src.path.parent, name, last_model)


def _build(src: ModelSource) -> tuple[Built, str]:
    if src.forecast is None:
        bars = window_bars(int(src.meta["depth"]))
        return fractal(src, metadata_of(src, bars)), "probability difference"
    built = forecaster(src, metadata_of(src, src.forecast.seq_len))
    return built, "forecast difference (training standard deviations)"


def _export(src: ModelSource, folder: Path, name: str, last_model: bool) -> Exported:
    import onnx

    warning = _retraining(src, _training(src), last_model)
    built, measure = _build(src)
    _check_ops(built.model)
    data = built.model.SerializeToString()
    session = _session(data)
    parity: Parity = (fractal_parity if src.forecast is None else forecast_parity)(src, built, session)
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder}: is not a folder")
    tolerance = TOLERANCE if src.forecast is None else FORECAST_TOLERANCE
    mq5 = expert_source(name, src, built, parity, tolerance, data) if src.ea is not None else None
    onnx.checker.check_model(built.model)
    onnx_path, mq5_path = folder / f"{name}.onnx", folder / f"{name}.mq5"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        replace_atomically(onnx_path, lambda f: f.write(data))
        if mq5 is not None:
            replace_atomically(mq5_path, lambda f: f.write(mq5.encode("utf-8")))
    except OSError as exc:
        where = exc.filename or folder
        raise ExportError(f"{where}: cannot write the export there ({exc.strerror})") from None
    if warning:
        log.warning("%s", warning)
    return Exported(onnx_path, mq5_path if mq5 is not None else None, built.bars, parity.difference,
                    parity.windows, measure, warning)  # fmt: skip
