"""The robustness part of report.html (and the whole of robustness.html): Monte Carlo percentiles and fan
charts, the permutation test, prediction intervals and tests, from a ``Robustness.to_dict()``."""

from __future__ import annotations

import html

from backtests.robustness import charts
from backtests.webpage import embed
from backtests.webpage import page as html_page

FIGURES = {
    "final": ("Final balance / equity", "money"),
    "max_drawdown": ("Maximal drawdown", "money"),
    "max_drawdown_pct": ("Maximal drawdown %", "pct"),
    "under_water_s": ("Longest time under water (days)", "days"),
}
SHOWN = ("5", "25", "50", "75", "95")


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "–"
    if unit == "days":
        return f"{v / 86400:,.1f}"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) >= 1 or v == 0 else f"{v:.4g}"
    return html.escape(str(v))


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="grid"><tr>{th}</tr>{body}</table>'


def monte_carlo_html(method: str, d: dict, currency: str) -> list[str]:
    if method == "trades":
        what = "the closed trades drawn with replacement, on the real closing times"
    else:
        what = f"the bar returns of the equity, stationary bootstrap with mean block {d['block']:g} bars"
    parts = [
        f"<h3>Monte Carlo: {html.escape(method)}</h3>",
        f"<p>{d['simulations']:,} simulations of {html.escape(what)}; seed {d['seed']}. Probability of ruin "
        f"(a drawdown of {d['ruin_pct']:g} % or more from a running peak): "
        f"<b>{100 * d['ruin_probability']:.2f} %</b>.</p>",
    ]
    rows = []
    for key, (label, unit) in FIGURES.items():
        f = d["figures"][key]
        cells = [html.escape(label), *(_fmt(f["percentiles"][p], unit) for p in SHOWN)]
        cells += [_fmt(f["actual"], unit), f"{f['actual_rank_pct']:.1f}"]
        rows.append(cells)
    head = ["", *(f"{p} %" for p in SHOWN), "this run", "its percentile"]
    parts.append(_table(head, rows))
    parts.append(embed(charts.fan(d, currency), f"fan_{method}"))
    return parts


def permutation_html(t: dict) -> list[str]:
    scope = "study and forward windows each within itself" if t["scope"] == "both" else "forward window only"
    block = "single bars" if t["block"] == 1 else f"blocks of {t['block']} bars"
    parts = [
        "<h3>Permutation test</h3>",
        f"<p>{t['permutations']:,} histories with the bars' moves permuted ({html.escape(scope)}, "
        f"{html.escape(block)}; seed {t['seed']}); the EA ran on each with the same parameters, retraining "
        "where it trains. p = (1 + permuted results at least as good) / (permutations + 1).</p>",
    ]
    rows, images = [], []
    labels = {"net_profit": "Net profit (forward)", "balanced_accuracy": "Balanced accuracy (forward)"}
    for key, label in labels.items():
        p = t["p_values"].get(key)
        if p is None:
            continue
        dist = t["distributions"][key]
        pct = dist["percentiles"]
        rows.append(
            [
                html.escape(label),
                _fmt(t["real"][key]),
                _fmt(pct["5"]),
                _fmt(pct["50"]),
                _fmt(pct["95"]),
                f"<b>{p:.4g}</b>",
            ]
        )
        images.append(embed(charts.permuted(dist, t["real"][key], label, p), f"permuted_{key}"))
    parts.append(_table(["", "real history", "permuted 5 %", "50 %", "95 %", "p-value"], rows))
    parts.append("<div class='cols'>" + "".join(images) + "</div>")
    return parts


def predictions_html(p: dict) -> list[str]:
    parts = [
        "<h3>Predictions: intervals and tests against the baselines</h3>",
        f"<p>{int(100 * p['level'])} % intervals from {p['reps']:,} stationary-bootstrap resamples of the "
        f"forward bars (mean block {p['block']:g} bars; seed {p['seed']}).</p>",
    ]
    rows = [
        [
            html.escape(name.replace("_", " ")),
            _fmt(ci["value"]),
            f"{_fmt(ci['low'])} – {_fmt(ci['high'])}",
            str(ci["bars"]),
        ]
        for name, ci in p["balanced_accuracy"].items()
    ]
    parts.append(_table(["balanced accuracy", "value", "interval", "bars"], rows))
    rows = [
        [
            html.escape(name.replace("_", " ")),
            str(t["model_only"]),
            str(t["baseline_only"]),
            f"<b>{t['p_value']:.4g}</b>",
        ]
        for name, t in p["mcnemar"].items()
    ]
    if rows:
        parts.append(
            _table(
                ["McNemar: model against", "only the model right", "only the baseline right", "p-value"], rows
            )
        )
    if p.get("mse"):
        rows = [
            [
                html.escape(name.replace("_", " ")),
                _fmt(ci["value"]),
                f"{_fmt(ci['low'])} – {_fmt(ci['high'])}",
                str(ci["bars"]),
            ]
            for name, ci in p["mse"].items()
        ]
        parts.append(_table(["forecast MSE", "value", "interval", "forecasts"], rows))
        rows = []
        for name, t in p.get("diebold_mariano", {}).items():
            if "error" in t:
                rows.append([html.escape(name.replace("_", " ")), "–", "–", html.escape(t["error"])])
            else:
                rows.append(
                    [
                        html.escape(name.replace("_", " ")),
                        _fmt(t["mean_difference"]),
                        _fmt(t["statistic"]),
                        f"<b>{t['p_value']:.4g}</b>",
                    ]
                )
        if rows:
            parts.append(
                _table(
                    ["Diebold-Mariano (HLN): model against", "mean loss difference", "statistic", "p-value"],
                    rows,
                )
            )
    return parts


def robustness_html(doc: dict, currency: str) -> str:
    """The section: everything the analysis computed, and a note for each part it could not."""
    parts = ["<h2>Robustness: could this be luck?</h2>"]
    for method, d in (doc.get("monte_carlo") or {}).items():
        parts += monte_carlo_html(method, d, currency)
    if doc.get("permutation"):
        parts += permutation_html(doc["permutation"])
    if doc.get("predictions"):
        parts += predictions_html(doc["predictions"])
    for note in doc.get("notes") or []:
        parts.append(f"<p class='warn'>Not computed: {html.escape(note)}</p>")
    return "\n".join(parts)


def optimisation_html(r: dict) -> str:
    """The optimisation report's lines next to the best pass: DSR, PBO, Reality Check and SPA."""
    if "error" in r and "deflated_sharpe" not in r:
        note = html.escape(r["error"])
        return f"<h2>Could the best pass be luck?</h2><p class='note'>Not computed: {note}</p>"
    rows = []
    d = r["deflated_sharpe"]
    if "error" in d:
        rows.append(["Deflated Sharpe Ratio", "–", html.escape(d["error"])])
    else:
        verdict = "significant" if d["significant"] else "not significant"
        rows.append(
            [
                "Deflated Sharpe Ratio",
                f"<b>{d['dsr']:.3f}</b> ({verdict} at 95 %)",
                f"best pass's daily Sharpe {d['sharpe']:.4f} against {d['benchmark']:.4f}, the best of "
                f"{d['trials']} unskilled passes by luck (their Sharpe variance {d['trials_variance']:.3g}); "
                f"{d['observations']} days",
            ]
        )
    b = r["pbo"]
    if "error" in b:
        rows.append(["Probability of Backtest Overfitting", "–", html.escape(b["error"])])
    else:
        rows.append(
            [
                "Probability of Backtest Overfitting",
                f"<b>{b['pbo']:.3f}</b>",
                f"CSCV: {b['splits']} blocks of {b['periods'] // b['splits']} days, {b['combinations']:,} "
                f"splits; the in-sample best lost out of sample in {100 * b['prob_oos_loss']:.1f} % of them",
            ]
        )
    s = r["spa"]
    if "error" in s:
        rows.append(["Reality Check / SPA", "–", html.escape(s["error"])])
    else:
        rows.append(
            [
                "White's Reality Check / Hansen's SPA",
                f"<b>{s['reality_check_p']:.3f} / {s['spa_p']:.3f}</b>",
                f"p-values of the best of {s['strategies']} passes against not trading; {s['reps']:,} "
                f"stationary-bootstrap resamples, mean block {s['block']:g} days, seed {s['seed']}",
            ]
        )
    head = "<h2>Could the best pass be luck?</h2>"
    note = (
        "<p class='note'>From every pass's daily returns over the optimisation period. DSR: the "
        "probability that the best pass's true Sharpe ratio beats what the best of this many passes reaches "
        "by luck. PBO: how often the in-sample winner ranks at or below the median out of sample. p-values: "
        "the chance of a best pass this good if no pass beat not trading.</p>"
    )
    body = "".join(f"<tr><th class='l'>{a}</th><td>{b_}</td><td class='l'>{c}</td></tr>" for a, b_, c in rows)
    return head + f"<table>{body}</table>" + note


def page(title: str, doc: dict, currency: str) -> str:
    """robustness.html: the section as a self-contained page (BokehJS inline)."""
    return html_page(title, f"<h1>{html.escape(title)}</h1>{robustness_html(doc, currency)}")
