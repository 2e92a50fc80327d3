"""The optimisation report: ``results.csv`` (every pass), ``report.html`` (self-contained and offline, its
interactive charts from ``backtests.optimize.plots`` with BokehJS inline),
and for walk-forward ``walk_forward.csv`` and ``oos_equity.csv``. Files are written to a temporary name and
renamed, so an interrupted write never leaves a truncated report."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pandas as pd

from backtests.optimize import plots
from backtests.optimize.criteria import get_criterion
from backtests.optimize.walkforward import WalkForwardResult
from backtests.robustness.section import optimisation_html
from backtests.webpage import embed
from backtests.webpage import page as html_page
from datafeeds.files import strict_json

_CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1200px}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}th{background:#f0f0f0}
td.l,th.l{text-align:left}h2{margin-top:1.4em}img{max-width:100%}p.note{color:#555;font-size:13px}"""


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_report(
    folder: str | Path,
    table: pd.DataFrame,
    names: list[str],
    info: dict,
    heat: tuple[str, str] | None = None,
    top: int = 10,
    wf: WalkForwardResult | None = None,
) -> Path:
    """Write the report files into ``folder`` and return the HTML page's path.

    ``info``: title lines (EA, data, periods, criterion, method, engine, store). ``heat``: the two
    parameters of the heat map (default: the first two searched).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "results.csv", table.to_csv(index=False).encode())
    crit = get_criterion(table.attrs.get("criterion", info.get("criterion", "balance")))
    parts = [f"<h1>Optimisation: {html.escape(str(info.get('ea', '')))}</h1>", _kv(info)]
    parts += _passes_section(table, names, crit, heat, top)
    if wf is not None:
        parts += _walk_forward_section(wf, info.get("currency", ""))
        write_atomic(folder / "walk_forward.csv", wf.windows.to_csv(index=False).encode())
        write_atomic(folder / "oos_equity.csv", wf.equity.to_csv().encode())
    robust = {"optimisation": table.attrs.get("robustness")}
    if wf is not None:
        robust["walk_forward_pbo"] = {"mean": wf.summary.get("pbo"), "windows": wf.summary.get("pbo_windows")}
    write_atomic(folder / "robustness.json", json.dumps(strict_json(robust), indent=1).encode())
    out = folder / "report.html"
    write_atomic(out, html_page("Optimisation", "\n".join(parts), _CSS).encode())
    return out


def _passes_section(table, names, crit, heat, top) -> list[str]:
    done = table[table["criterion"].notna()]
    refused = int(table["error"].notna().sum())
    parts = [
        f"<h2>Passes</h2><p>{len(table)} passes recorded, {len(done)} with a defined criterion "
        f"({html.escape(crit.label)}), {refused} refused by the EA (see the error column of results.csv).</p>"
    ]
    if len(done) == 0:
        return parts
    shown = [c for c in ("pass", *names, "criterion", "total_net_profit", "profit_factor",
                         "equity_drawdown_relative_pct", "total_trades") if c in table]  # fmt: skip
    fwd = [c for c in table.columns if c.startswith("forward_")]
    title = "Top passes" + (" with their forward results" if fwd else "")
    parts.append(f"<h2>{title}</h2>")
    if fwd:
        parts.append(
            "<p class='note'>Left: the optimisation period (in sample). Right (forward_*): the same "
            "parameters on the forward period, which the optimisation never saw.</p>"
        )
    parts.append(_frame(table.head(top)[shown + fwd]))
    if table.attrs.get("robustness"):
        parts.append(optimisation_html(table.attrs["robustness"]))
    parts.append(
        "<h2>Passes on the parameters</h2><p class='note'>Hover a cell or a line for its pass number "
        "(results.csv's pass column); drag and scroll to zoom.</p>"
    )
    parts.append(embed(plots.passes_layout(table, names, crit.label, crit.maximize, heat), "passes"))
    return parts


def _walk_forward_section(wf: WalkForwardResult, currency: str) -> list[str]:
    s = wf.summary
    eff = "undefined (in-sample return <= 0)" if wf.efficiency is None else f"{wf.efficiency:.2f}"
    parts = [
        "<h2>Walk-forward analysis</h2>",
        f"<p>{s['windows']} windows ({'anchored' if s['anchored'] else 'rolling'}); in-sample annualised "
        f"return {_num(s['is_return_ann_pct'])} %, out-of-sample {_num(s['oos_return_ann_pct'])} %; "
        f"<b>walk-forward efficiency {eff}</b>; PBO of the in-sample choice {_pbo(s.get('pbo'))}.</p>",
        "<p class='note'>Walk-forward efficiency = out-of-sample annualised return / in-sample annualised "
        "return, each the winners' summed net profit over the summed window lengths, in % of the deposit "
        "per year (not compounded). Near 1: the winners kept their in-sample edge; near 0 or below: the "
        "optimisation fitted noise. PBO of the in-sample choice: the mean over the windows of the "
        "Probability of Backtest Overfitting of each train window's passes (CSCV; the pbo column), the "
        "chance that the window's winner ranks at or below the median out of sample.</p>",
        embed(plots.walk_forward_layout(wf, currency), "walk_forward"),
        "<h3>Windows</h3>",
        _frame(wf.windows),
        "<h3>Parameter stability</h3><p class='note'>distinct: how many different winners; modal_share: "
        "share of windows won by the most common value; cv: std / |mean| of numeric winners "
        "(0 = the same value in every window).</p>",
        _frame(wf.stability),
    ]
    return parts


def _kv(info: dict) -> str:
    rows = "".join(
        f"<tr><th class='l'>{html.escape(str(k))}</th><td class='l'>{html.escape(str(v))}</td></tr>"
        for k, v in info.items()
    )
    return f"<table>{rows}</table>"


def _frame(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e-3 or abs(v) >= 1e6 else f"{v:,.4f}".rstrip("0").rstrip(".")
    if isinstance(v, pd.Timestamp):
        return f"{v:%Y-%m-%d %H:%M}"
    return str(v)


def _pbo(v) -> str:
    return "n/a (too few days in the train windows)" if v is None else f"{v:.2f}"


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.2f}"
