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

from backtests import statistics
from backtests.page import html_page, training_outcome
from backtests.result import Result
from datafeeds.files import atomic_write
from neuronet.errors import NeuronetError
from strategies.base import call_hook

__all__ = [
    "ReportFolderError",
    "environment",
    "report_dict",
    "trades_csv",
    "training_outcome",
    "write_report",
]

REPORT_VERSION = 2
# The columns of trades.csv, orders.csv and deals.csv as MetaTrader prints them: times in its form (UTC),
# prices to the symbol's digits, money to cents.
TIMES = ("entry_time", "exit_time", "time", "time_setup", "time_done", "expiration")
PRICES = ("entry_price", "exit_price", "price", "stoplimit", "sl", "tp", "fill_price")
MONEY = ("commission", "swap", "profit", "net_profit", "mae", "mfe", "balance")


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


def mt5_table(table: pd.DataFrame, digits: int) -> pd.DataFrame:
    """A trades, orders or deals table as a trader reads it: MetaTrader's times (``2017.04.19 09:00:00``,
    UTC; blank where none), prices to the symbol's digits, money to cents, never ``-0.0``."""
    out = table.copy()
    for col in out.columns:
        if col in TIMES:
            out[col] = pd.DatetimeIndex(pd.to_datetime(out[col], utc=True)).strftime("%Y.%m.%d %H:%M:%S")
        elif col in PRICES or col in MONEY:
            places = 2 if col in MONEY else digits
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(float).round(places) + 0.0  # no -0.0
    return out


def trades_csv(trades: pd.DataFrame, digits: int) -> bytes:
    """trades.csv (orders.csv and deals.csv alike): ``mt5_table`` as CSV."""
    return mt5_table(trades, digits).to_csv(index=False).encode()


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
            "stats": statistics.ordered(dict(result.stats)),
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


class ReportFolderError(NeuronetError, FileExistsError):
    """``write_report`` was given a folder that holds other files: it never mixes two runs' files."""


# Every file a backtest report folder can hold: with ``force``, the ones this run does not write go, so a
# folder never keeps another run's model or robustness files beside a new report.
REPORT_FILES = frozenset({"report.html", "report.json", "trades.csv", "orders.csv", "deals.csv",
                          "rejected.csv", "model.nnz", "robustness.json", "robustness.html"})  # fmt: skip


def write_report(
    result: Result,
    folder: str | Path,
    env: dict | None = None,
    robustness=None,
    *,
    force: bool = False,
    keep: frozenset[str] = frozenset(),
) -> Path:
    """Write the run into ``folder`` (created) and return the path of report.html. ``robustness``: a
    ``backtests.robustness.Robustness`` of the run, written as report.json's ``robustness`` and a section
    of the page.

    The folder must be new or empty (files named in ``keep`` aside: the permutation store a resumed run
    left there), else ``ReportFolderError``; ``force=True`` writes into it anyway and removes the report
    files of an earlier run that this one does not write (another EA's ``model.nnz``, say)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    present = sorted(p.name for p in folder.iterdir() if p.name not in keep)
    if present and not force:
        raise ReportFolderError(
            f"{folder}: the folder is not empty ({len(present)} files, e.g. {present[0]}); write the report "
            "into a new or empty folder, or pass force=True to replace its report files"
        )
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
    digits = int(result.data.get("digits") or 5)
    for key, table in (("trades", result.trades), ("orders", result.orders), ("deals", result.deals)):
        _atomic_write(folder / files[key], trades_csv(table, digits))
    _atomic_write(folder / files["rejected"], pd.DataFrame(result.rejected).to_csv(index=False).encode())
    _atomic_write(folder / files["json"], json.dumps(doc, indent=2, sort_keys=False).encode())
    _atomic_write(folder / files["html"], html_page(result, doc).encode())
    written = {*files.values(), *([Path(model_file).name] if model_file else [])}
    for name in REPORT_FILES - written - keep:  # an earlier run's files this report does not replace
        (folder / name).unlink(missing_ok=True)
    return folder / files["html"]
