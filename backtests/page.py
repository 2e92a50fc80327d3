"""report.html: MetaTrader's settings and results tables, backtesting.py's stats, the glossary, the charts.

Self-contained: charts are PNGs embedded as data URIs, nothing is fetched from elsewhere.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable

import pandas as pd

from backtests import glossary
from backtests.replay import Result

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
    ("Commission", "commission"),
    ("Swap", "swap"),
]

# backtesting.py's ``stats``, in its order and with its names (backtests.peers computes them its way).
PY_ROWS: list[tuple[str, str | Callable[[dict], object]]] = [
    ("Start", lambda s: mt5_time(s["start"])),
    ("End", lambda s: mt5_time(s["end"])),
    ("Duration", "duration"),
    ("Exposure Time [%]", "exposure_time_pct"),
    ("Equity Final [$]", "equity_final"),
    ("Equity Peak [$]", "equity_peak"),
    ("Commissions [$]", lambda s: -s["commission"] + 0.0),
    ("Return [%]", "return_pct"),
    ("Buy & Hold Return [%]", "buy_and_hold_return_pct"),
    ("Return (Ann.) [%]", "return_ann_pct"),
    ("Volatility (Ann.) [%]", "volatility_ann_pct"),
    ("CAGR [%]", "cagr_pct"),
    ("Sharpe Ratio", "sharpe_ratio_ann"),
    ("Sortino Ratio", "sortino_ratio"),
    ("Calmar Ratio", "calmar_ratio"),
    ("Alpha [%]", "alpha_pct"),
    ("Beta", "beta"),
    ("Max. Drawdown [%]", "max_drawdown_pct"),
    ("Avg. Drawdown [%]", "avg_drawdown_pct"),
    ("Max. Drawdown Duration", "max_drawdown_duration"),
    ("Avg. Drawdown Duration", "avg_drawdown_duration"),
    ("# Trades", "total_trades"),
    ("Win Rate [%]", "win_rate_pct"),
    ("Best Trade [%]", "best_trade_pct"),
    ("Worst Trade [%]", "worst_trade_pct"),
    ("Avg. Trade [%]", "avg_trade_pct"),
    ("Max. Trade Duration", "max_trade_duration"),
    ("Avg. Trade Duration", "avg_trade_duration"),
    ("Profit Factor (returns)", "profit_factor_returns"),
    ("Expectancy [%]", "expectancy_pct"),
    ("SQN", "sqn"),
    ("Kelly Criterion", "kelly_criterion"),
]

TD_ROWS = [
    ("Trading days per year", "trading_days_per_year"),
    ("Return (Ann., trading days) [%]", "td_return_ann_pct"),
    ("Volatility (Ann., trading days) [%]", "td_volatility_ann_pct"),
    ("Sharpe Ratio (trading days)", "td_sharpe_ratio"),
    ("Sortino Ratio (trading days)", "td_sortino_ratio"),
]


def mt5_time(value: object) -> str:
    """A time as MetaTrader prints it in its reports: ``2017.04.19 09:00``."""
    if value is None:
        return "–"
    return f"{pd.Timestamp(value):%Y.%m.%d %H:%M}"


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


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(rows: list[tuple[str, str]], cls: str = "kv") -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def _rows(spec, stats: dict) -> list[tuple[str, str]]:
    return [(label, _fmt(key(stats) if callable(key) else stats.get(key))) for label, key in spec]


def _count(v: object) -> str:
    """A count; a baseline's expected count (a fraction) is shown as what it is, an expectation."""
    if isinstance(v, float) and not v.is_integer():
        return f"≈{v:,.0f}"
    return _fmt(v)


def _prediction_tables(pred: dict) -> str:
    classes = pred["classes"]
    events = "/".join(classes[1:])
    names = {"always_undefined": f"always {classes[0]}", "prior_random": "class-prior random"}
    heads = ["", "model", *(names.get(k, k.replace("_", " ")) for k in pred["baselines"])]
    blocks = [pred["model"], *pred["baselines"].values()]  # the EA's own baselines too (logistic regression)
    metrics = [
        ("Accuracy", "accuracy", _fmt),
        ("Balanced accuracy", "balanced_accuracy", _fmt),
        ("Hit rate (signals right)", "hit_rate", _fmt),
        (f"Missed {events} (called {classes[0]})", "missed_rate", _fmt),
        ("Signals", "signals", _count),
        (f"Real {events}", "events", _count),
    ]
    rows = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr>"]
    for label, key, fmt in metrics:
        cells = "".join(f"<td>{fmt(b[key])}</td>" for b in blocks)
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    for c in classes:
        for m in ("precision", "recall", "f1"):
            cells = "".join(f"<td>{_fmt(b['per_class'][c][m])}</td>" for b in blocks)
            rows.append(f"<tr><th>{html.escape(c)} {m}</th>{cells}</tr>")
    return f'<table class="grid">{"".join(rows)}</table>'


def _settings(result: Result) -> list[tuple[str, str]]:
    """MetaTrader's "Settings" block: expert, symbol, period, then the inputs one ``name=value`` a row."""
    data, acct = result.data, result.account
    forward = f"{mt5_time(data['forward_first'])} - {mt5_time(data['forward_last'])}"
    rows = [
        ("Expert", result.ea["class"]),
        ("Symbol", data["symbol"]),
        ("Period", f"{data['timeframe']} ({mt5_time(data['first'])} - {mt5_time(data['last'])})"),
        ("Forward", forward + _retrain(result)),
        ("Modelling", data.get("model_name") or "Open prices only"),
    ]
    if data.get("history_quality") is not None:  # MetaTrader's "History Quality"
        rows.append(("History Quality", history_quality(data)))
    params = result.ea["params"] or {"": ""}
    rows += [("Inputs" if k == 0 else "", f"{n}={v}") for k, (n, v) in enumerate(params.items())]
    rows += [
        ("Currency", acct["currency"]),
        ("Initial Deposit", _fmt(acct["deposit"])),
        ("Leverage", f"1:{acct['leverage']:g}"),
        (
            "Costs",
            f"commission {_fmt(acct['commission'])} per lot per deal, swap "
            f"{acct['swap_long']:g}/{acct['swap_short']:g} points (long/short)",
        ),
        ("Spread", data.get("spread") or _spread_from(data, acct["spread"])),
        ("Data", f"{data.get('source') or '-'}, {data['bars']} bars"),
        ("Seed", str(result.seed)),
    ]
    return rows


def history_quality(data: dict) -> str:
    """The share of forward bars the model's finer data covers, and what became of the others."""
    quality, of = data["history_quality"], data.get("history_quality_of") or "finer data"
    text = f"{quality:.2f}% (forward bars with {of})"
    return text if quality >= 100 else text + "; bars without them were worked on their own OHLC"


def _spread_from(data: dict, fixed: int | None) -> str:
    """The spread line of a report that does not say which spread it traded (a live account's)."""
    if fixed is not None:
        return f"fixed: {fixed} points"
    return "per tick" if data.get("model") == "ticks" else "per bar"


def _retrain(result: Result) -> str:
    every, window = result.periods.get("retrain_every"), result.periods.get("study_window")
    if not every:
        return ""
    on = f"the last {window} bars" if window else "every earlier bar"
    return f"; walk-forward: retrained every {every} bars on {on}"


def _glossary() -> str:
    """One line per figure, grouped as the tables are."""
    parts = ["<h2>Glossary</h2>", f"<p>{html.escape(glossary.CURVES)}</p>"]
    for title, entries in (
        ("MetaTrader 5", glossary.MT5),
        ("backtesting.py", glossary.PEER),
        ("Annualised on trading days", glossary.TRADING_DAYS),
    ):
        items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in entries.items())
        parts.append(f"<h3>{title}</h3><dl>{items}</dl>")
    return "".join(parts)


def _symbols_html(table: dict, currency: str) -> str:
    """The per-symbol figures of a multi-symbol run (report.json's ``data.symbols``)."""
    head = (
        "Symbol",
        "Trades",
        f"Net profit ({currency})",
        "Profit factor",
        "Win rate",
        "Largest loss",
        "Bars lacked",
    )
    rows = []
    for name, s in table.items():
        pf, wr = s.get("profit_factor"), s.get("win_rate")
        cells = (
            name,
            str(s["trades"]),
            f"{s['net_profit']:.2f}",
            "-" if pf is None else f"{pf:.2f}",
            "-" if wr is None else f"{100 * wr:.1f}%",
            f"{s['largest_loss']:.2f}",
            str(s["lacked_bars"]),
        )
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f"<h2>Symbols</h2><table>{header}{''.join(rows)}</table>"


def html_page(result: Result, doc: dict) -> str:
    """The whole report.html of a run (``doc``: its report.json, for the environment)."""
    from backtests import charts  # matplotlib costs a second to import: only when a report is drawn

    s, data, ea = result.stats, result.data, result.ea
    title = f"{ea['class']} · {data['symbol']} {data['timeframe']}"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if not result.complete:
        parts.append(
            '<p class="warn">INCOMPLETE: the run was interrupted; figures cover the bars replayed.</p>'
        )
    parts.append("<h2>Settings</h2>" + _table(_settings(result)))
    parts.append("<h2>Results</h2><div class='cols'>")
    parts.append("<div><h3>MetaTrader 5</h3>" + _table(_rows(MT5_ROWS, s)) + "</div>")
    parts.append("<div><h3>backtesting.py</h3>" + _table(_rows(PY_ROWS, s)))
    parts.append("<h3>Annualised on trading days</h3>" + _table(_rows(TD_ROWS, s)) + "</div></div>")
    curves = result.curves
    if curves is not None and len(curves):
        currency, deposit = result.account["currency"], result.account["deposit"]
        parts.append(_img(charts.balance_equity(curves, currency), "balance and equity"))
        parts.append(_img(charts.drawdown(curves, deposit), "drawdown"))
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
    if result.symbol_charts:  # several symbols: a table and a price chart each
        parts.append(_symbols_html(data.get("symbols", {}), result.account["currency"]))
        for name, chart in result.symbol_charts.items():
            mine = result.trades[result.trades["symbol"] == name] if len(result.trades) else result.trades
            parts.append(
                f"<h3>{html.escape(name)}</h3>" + _img(charts.price(chart, mine, None), f"{name} price")
            )
    else:
        parts.append(
            _img(charts.price(result.chart_data, result.trades, pred["classes"] if pred else None), "price")
        )
    if result.training:
        total_wall = sum(r.get("wall_s") or 0.0 for r in result.training)
        builds = sum(r.get("build_s") or 0.0 for r in result.training)
        outcome = training_outcome(result.training)
        parts.append(
            f"<h2>Training</h2><p>{len(result.training)} epochs, {total_wall:.2f} s wall in total"
            + (f" ({builds:.2f} s of it kernel builds)." if builds else ".")
            + (f" {html.escape(outcome[0].upper() + outcome[1:])}.</p>" if outcome else "</p>")
        )
        parts.append(_img(charts.training(result.training), "training"))
    parts.append("<h2>Timings</h2>" + _table([(k, f"{v:.3f} s") for k, v in result.timings.items()]))
    parts.append("<h2>Environment</h2>" + _table([(k, str(v)) for k, v in doc["environment"].items()]))
    if result.rejected:
        parts.append(f"<p>{len(result.rejected)} orders were rejected (see report.json).</p>")
    if doc.get("robustness"):
        from backtests.robustness.section import robustness_html

        parts.append(robustness_html(doc["robustness"], result.account["currency"]))
    parts.append(_glossary())
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
dl {{ display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 13px; }}
dt {{ font-weight: 600; }} dd {{ margin: 0; }}
</style></head><body>
{body}
</body></html>
"""
