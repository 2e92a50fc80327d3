"""Write a run to one folder: report.html (self-contained, charts embedded), report.json, trades.csv, model.

Every file is written to a temporary name and moved into place with ``os.replace``, so a crash or Ctrl-C
never leaves a half-written file; a run cut short is written the same way and marked incomplete.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from backtests.page import MT5_ROWS, html_page, training_outcome
from backtests.replay import Result
from datafeeds.files import atomic_write
from strategies.base import call_hook

__all__ = ["MT5_ROWS", "environment", "report_dict", "trades_csv", "training_outcome", "write_report"]

REPORT_VERSION = 2
MONEY = ("commission", "swap", "profit", "net_profit", "mae", "mfe")  # trades.csv columns in cents


def environment() -> dict:
    """Library versions for the report; the CLI adds the OpenCL device it used."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("neuronet", "numpy", "pandas", "matplotlib", "pyopencl"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def _atomic_write(path: Path, data: bytes) -> None:
    atomic_write(path, lambda fh: fh.write(data))  # usual permissions (0644 under the default umask)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, (pd.Timestamp, datetime)):
        return obj.isoformat()
    return obj


def _columns(curves: pd.DataFrame | None) -> dict | None:
    """The curve column by column (a list per column, times ISO 8601): compact, and every figure based on
    it can be recomputed from report.json alone."""
    if curves is None:
        return None
    return {"time": list(curves.index), **{c: curves[c].to_numpy() for c in curves.columns}}


def trades_csv(trades: pd.DataFrame, digits: int) -> bytes:
    """trades.csv as a trader reads it: MetaTrader's times, prices to the symbol's digits, money to cents,
    never ``-0.0``."""
    out = trades.copy()
    for col in ("entry_time", "exit_time"):
        out[col] = pd.DatetimeIndex(out[col]).strftime("%Y.%m.%d %H:%M:%S")
    for cols, places in ((("entry_price", "exit_price", "sl", "tp"), digits), (MONEY, 2)):
        for col in cols:
            out[col] = out[col].astype(float).round(places) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out.to_csv(index=False).encode()


def report_dict(result: Result, env: dict | None = None) -> dict:
    """Everything of a run that is not a table or a chart, JSON-ready."""
    return _jsonable(
        {
            "report_version": REPORT_VERSION,
            "complete": result.complete,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "seed": result.seed,
            "ea": result.ea,
            "data": result.data,
            "periods": result.periods,
            "account": result.account,
            "stats": result.stats,
            "custom_criterion": result.custom_criterion,
            "predictions": result.predictions,
            "ea_section": None
            if result.section is None
            else {
                "title": result.section.title,
                "data": result.section.data,
            },
            "training": {"epochs": result.training},
            "timings": result.timings,
            "rejected_orders": {"count": len(result.rejected), "first": result.rejected[:20]},
            "curves": _columns(result.curves),
            "equity_path": None
            if result.equity_path is None
            else _columns(result.equity_path.set_index("time")),
            "trades": result.trades.to_dict(orient="records"),
            "environment": env or environment(),
        }
    )


def write_report(result: Result, folder: str | Path, env: dict | None = None, robustness=None) -> Path:
    """Write the run into ``folder`` (created) and return the path of report.html. ``robustness``: a
    ``backtests.robustness.Robustness`` of the run, written as report.json's ``robustness`` and a section
    of the page."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"html": "report.html", "json": "report.json", "trades": "trades.csv"}
    files.update(orders="orders.csv", deals="deals.csv", rejected="rejected.csv")
    model_file = None
    if result.ea_instance is not None:
        model_file = call_hook(
            result.ea_instance, "save_model", str(folder / "model"), where="after the run, saving its model"
        )
    doc = report_dict(result, env)
    doc["files"] = {**files, "model": Path(model_file).name if model_file else None}
    if robustness is not None:
        doc["robustness"] = _jsonable(robustness.to_dict())
    _atomic_write(folder / files["trades"], trades_csv(result.trades, int(result.data.get("digits") or 5)))
    for key, table in (("orders", result.orders), ("deals", result.deals), ("rejected", result.rejected)):
        _atomic_write(folder / files[key], pd.DataFrame(table).to_csv(index=False).encode())
    _atomic_write(folder / files["json"], json.dumps(doc, indent=2, sort_keys=False).encode())
    _atomic_write(folder / files["html"], html_page(result, doc).encode())
    return folder / files["html"]
