"""Write a run to one folder: report.html (self-contained, charts embedded), report.json, trades.csv, model.

Every file is written to a temporary name and moved into place with ``os.replace``, so a crash or Ctrl-C
never leaves a half-written file; a run cut short is written the same way and marked incomplete.
"""

from __future__ import annotations

import base64
import html
import json
import os
import platform
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from backtests.replay import Result

REPORT_VERSION = 1

# MetaTrader report rows: (label, stats key or a function of stats).
MT5_ROWS: list[tuple[str, str | Callable[[dict], object]]] = [
    ("Bars", "bars"),
    ("Initial Deposit", "initial_deposit"),
    ("Total Net Profit", "total_net_profit"),
    ("Gross Profit", "gross_profit"),
    ("Gross Loss", "gross_loss"),
    ("Profit Factor", "profit_factor"),
    ("Expected Payoff", "expected_payoff"),
    ("Recovery Factor", "recovery_factor"),
    ("Sharpe Ratio", "sharpe_ratio"),
    ("Z-Score", lambda s: _pair(s["z_score"], s["z_score_probability_pct"], "({}%)")),
    ("AHPR", "ahpr"),
    ("GHPR", "ghpr"),
    ("LR Correlation", "lr_correlation"),
    ("LR Standard Error", "lr_standard_error"),
    ("Margin Level (min)", lambda s: _pct(s["margin_level_min_pct"])),
    ("Balance Drawdown Absolute", "balance_drawdown_absolute"),
    (
        "Balance Drawdown Maximal",
        lambda s: _pair(s["balance_drawdown_maximal"], s["balance_drawdown_maximal_pct"]),
    ),
    (
        "Balance Drawdown Relative",
        lambda s: _rel(s["balance_drawdown_relative_pct"], s["balance_drawdown_relative"]),
    ),
    ("Equity Drawdown Absolute", "equity_drawdown_absolute"),
    (
        "Equity Drawdown Maximal",
        lambda s: _pair(s["equity_drawdown_maximal"], s["equity_drawdown_maximal_pct"]),
    ),
    (
        "Equity Drawdown Relative",
        lambda s: _rel(s["equity_drawdown_relative_pct"], s["equity_drawdown_relative"]),
    ),
    ("Total Trades", "total_trades"),
    ("Total Deals", "total_deals"),
    ("Short Trades (won %)", lambda s: _pair(s["short_trades"], s["short_won_pct"])),
    ("Long Trades (won %)", lambda s: _pair(s["long_trades"], s["long_won_pct"])),
    ("Profit Trades (% of total)", lambda s: _pair(s["profit_trades"], s["profit_trades_pct"])),
    ("Loss Trades (% of total)", lambda s: _pair(s["loss_trades"], s["loss_trades_pct"])),
    ("Largest profit trade", "largest_profit_trade"),
    ("Largest loss trade", "largest_loss_trade"),
    ("Average profit trade", "average_profit_trade"),
    ("Average loss trade", "average_loss_trade"),
    (
        "Maximum consecutive wins ($)",
        lambda s: _pair(s["max_consecutive_wins"], s["max_consecutive_wins_money"], "({})"),
    ),
    (
        "Maximum consecutive losses ($)",
        lambda s: _pair(s["max_consecutive_losses"], s["max_consecutive_losses_money"], "({})"),
    ),
    (
        "Maximal consecutive profit (count)",
        lambda s: _pair(s["maximal_consecutive_profit"], s["maximal_consecutive_profit_count"], "({})"),
    ),
    (
        "Maximal consecutive loss (count)",
        lambda s: _pair(s["maximal_consecutive_loss"], s["maximal_consecutive_loss_count"], "({})"),
    ),
    ("Average consecutive wins", "average_consecutive_wins"),
    ("Average consecutive losses", "average_consecutive_losses"),
]

PY_ROWS = [
    ("Start", "start"),
    ("End", "end"),
    ("Return [%]", "return_pct"),
    ("Buy & Hold Return [%]", "buy_and_hold_return_pct"),
    ("Return (Ann.) [%]", "return_ann_pct"),
    ("Volatility (Ann.) [%]", "volatility_ann_pct"),
    ("Sharpe Ratio (Ann.)", "sharpe_ann"),
    ("Sortino Ratio (Ann.)", "sortino_ann"),
    ("Calmar Ratio", "calmar"),
    ("Max. Drawdown [%]", "max_drawdown_pct"),
    ("Exposure Time [%]", "exposure_pct"),
    ("Commissions", "commission"),
    ("Swaps", "swap"),
]


def _fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) >= 100 else f"{v:.4g}" if abs(v) < 0.01 and v else f"{v:,.2f}"
    return str(v)


def _pair(a, b, pattern: str = "({}%)") -> str:
    return f"{_fmt(a)} {pattern.format(_fmt(b))}"


def _pct(v) -> str:
    return "–" if v is None else f"{_fmt(v)}%"


def _rel(pct, money) -> str:
    return f"{_fmt(pct)}% ({_fmt(money)})"


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; reports are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
            "environment": env or environment(),
        }
    )


def training_outcome(epochs: list[dict]) -> str:
    """Which epoch's weights each training round kept and why it stopped, from the outcome an EA writes on
    a round's last epoch record (``kept_epoch``, ``epochs_run``, ``stopped_early``, ``stop_reason``, as
    FractalEA does); ``""`` when the EA records none."""
    ends = [r for r in epochs if r.get("kept_epoch") is not None]
    if not ends:
        return ""
    if len(ends) == 1:
        r = ends[0]
        losses = []
        if r.get("kept_loss") is not None:
            losses.append(f"training loss {r['kept_loss']:.4f}")
        if r.get("kept_val_loss") is not None:
            losses.append(f"validation loss {r['kept_val_loss']:.4f}")
        scores = f" ({', '.join(losses)})" if losses else ""
        how = "stopped early" if r.get("stopped_early") else "stopped"
        return f"kept epoch {r['kept_epoch']} of {r['epochs_run']}{scores}; {how}: {r['stop_reason']}"
    kept = ", ".join(f"{r['kept_epoch']} of {r['epochs_run']}" for r in ends)
    early = sum(bool(r.get("stopped_early")) for r in ends)
    return f"kept epochs {kept} in {len(ends)} rounds; {early} of {len(ends)} rounds stopped early"


def write_report(result: Result, folder: str | Path, env: dict | None = None) -> Path:
    """Write the run into ``folder`` (created) and return the path of report.html."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"html": "report.html", "json": "report.json", "trades": "trades.csv"}
    model_file = None
    if result.ea_instance is not None:
        model_file = result.ea_instance.save_model(str(folder / "model"))
        if model_file:
            os.chmod(model_file, 0o644)  # readable like the rest of the folder (temp files start 0600)
    doc = report_dict(result, env)
    doc["files"] = {**files, "model": Path(model_file).name if model_file else None}
    trades = result.trades.copy()
    _atomic_write(folder / files["trades"], trades.to_csv(index=False).encode())
    _atomic_write(folder / files["json"], json.dumps(doc, indent=2, sort_keys=False).encode())
    _atomic_write(folder / files["html"], _html(result, doc).encode())
    return folder / files["html"]


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(rows: list[tuple[str, str]], cls: str = "kv") -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def _rows(spec, stats: dict) -> list[tuple[str, str]]:
    return [(label, _fmt(key(stats) if callable(key) else stats.get(key))) for label, key in spec]


def _prediction_tables(pred: dict) -> str:
    classes = pred["classes"]
    names = {"always_undefined": f"always {classes[0]}", "prior_random": "class-prior random"}
    heads = ["", "model", *(html.escape(names.get(k, k.replace("_", " "))) for k in pred["baselines"])]
    blocks = [pred["model"], *pred["baselines"].values()]  # the EA's own baselines too (logistic regression)
    metrics = [
        ("Accuracy", "accuracy"),
        ("Balanced accuracy", "balanced_accuracy"),
        ("Hit rate (signals right)", "hit_rate"),
        ("Missed fractals", "missed_rate"),
        ("Signals", "signals"),
        ("Real fractals", "events"),
    ]
    rows = ["<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for label, key in metrics:
        rows.append(f"<tr><th>{label}</th>" + "".join(f"<td>{_fmt(b[key])}</td>" for b in blocks) + "</tr>")
    for c in classes:
        for m in ("precision", "recall", "f1"):
            cells = "".join(f"<td>{_fmt(b['per_class'][c][m])}</td>" for b in blocks)
            rows.append(f"<tr><th>{html.escape(c)} {m}</th>{cells}</tr>")
    return f'<table class="grid">{"".join(rows)}</table>'


def _html(result: Result, doc: dict) -> str:
    from backtests import charts  # matplotlib costs a second to import: only when a report is drawn

    s, data, ea = result.stats, result.data, result.ea
    title = f"{ea['class']} · {data['symbol']} {data['timeframe']}"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if not result.complete:
        parts.append(
            '<p class="warn">INCOMPLETE: the run was interrupted; figures cover the bars replayed.</p>'
        )
    spread = result.account["spread"]
    parts.append(
        _table(
            [
                (
                    "Data",
                    f"{data['first']} .. {data['last']} ({data['bars']} bars, "
                    f"source {data.get('source') or '-'})",
                ),
                ("Forward period", f"{data['forward_first']} .. {data['forward_last']}"),
                (
                    "Deposit",
                    f"{_fmt(result.account['deposit'])} {result.account['currency']}, "
                    f"1:{_fmt(result.account['leverage'])}",
                ),
                (
                    "Costs",
                    f"spread {'per bar' if spread is None else spread}"
                    f" points, commission {_fmt(result.account['commission'])} per lot per deal",
                ),
                ("Seed", str(result.seed)),
            ]
        )
    )
    parts.append("<h2>Results</h2><div class='cols'>")
    parts.append(_table(_rows(MT5_ROWS, s)))
    parts.append(_table(_rows(PY_ROWS, s)) + "</div>")
    if len(result.equity):
        parts.append(
            _img(
                charts.balance_equity(result.time, result.balance, result.equity, result.account["currency"]),
                "balance and equity",
            )
        )
        parts.append(_img(charts.drawdown(result.time, result.equity, result.account["deposit"]), "drawdown"))
    if len(result.trades):
        parts.append(
            _img(
                charts.trade_breakdown(result.trades, result.account["currency"]),
                "trades by hour, weekday, MAE/MFE, holding time",
            )
        )
    pred = result.predictions
    if pred is not None:
        parts.append(f"<h2>Predictions on the forward period ({pred['bars']} bars)</h2><div class='cols'>")
        parts.append(_prediction_tables(pred))
        parts.append(
            _img(charts.confusion(pred["confusion"], pred["classes"]), "confusion matrix") + "</div>"
        )
    if result.section is not None:
        parts.append(f"<h2>{html.escape(result.section.title)}</h2>")
        parts.extend(_img(png, name) for name, png in result.section.charts.items())
    parts.append(
        _img(charts.price(result.chart_data, result.trades, pred["classes"] if pred else None), "price")
    )
    if result.training:
        total_wall = sum(r.get("wall_s") or 0.0 for r in result.training)
        outcome = training_outcome(result.training)
        parts.append(
            f"<h2>Training</h2><p>{len(result.training)} epochs, {total_wall:.2f} s wall in total."
            + (f" {html.escape(outcome[0].upper() + outcome[1:])}.</p>" if outcome else "</p>")
        )
        parts.append(_img(charts.training(result.training), "training"))
    parts.append("<h2>Timings</h2>" + _table([(k, f"{v:.3f} s") for k, v in result.timings.items()]))
    parts.append("<h2>Configuration</h2>" + _table([(k, str(v)) for k, v in ea["params"].items()]))
    parts.append("<h2>Environment</h2>" + _table([(k, str(v)) for k, v in doc["environment"].items()]))
    if result.rejected:
        parts.append(f"<p>{len(result.rejected)} orders were rejected (see report.json).</p>")
    return _PAGE.format(title=html.escape(title), body="\n".join(parts))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px auto; max-width: 1080px; color: #222; }}
table {{ border-collapse: collapse; margin: 8px 16px 16px 0; }}
th, td {{ padding: 3px 10px; border-bottom: 1px solid #e5e5e5; text-align: left; }}
td {{ text-align: right; font-variant-numeric: tabular-nums; }}
.cols {{ display: flex; flex-wrap: wrap; align-items: flex-start; }}
img {{ max-width: 100%; display: block; margin: 8px 0; }}
.warn {{ background: #fde2e1; padding: 8px; border-left: 4px solid #c00; }}
</style></head><body>
{body}
</body></html>
"""
