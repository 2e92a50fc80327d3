"""report.html: MetaTrader's settings, results, orders and deals tables, backtesting.py's stats, the
glossary, and the interactive charts (``backtests.plots``).

Self-contained: BokehJS and every chart's data are inline (``backtests.webpage``), nothing is fetched from
elsewhere; an EA's own report section keeps its PNG images as data URIs.
"""

from __future__ import annotations

import base64
import html

import pandas as pd

from backtests import glossary, statistics
from backtests.result import Result
from backtests.webpage import embed, frame_table, kv_table, page


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
    return kv_table(rows, cls)


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
    if result.periods.get("forward_rule"):  # why this period: the default depends on whether the EA studies
        forward += f" ({result.periods['forward_rule']})"
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
    for section, title in statistics.SECTIONS.items():
        entries = statistics.glossary(section)
        items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in entries)
        parts.append(f"<h3>{title}</h3><dl>{items}</dl>")
    return "".join(parts)


TABLE_ROWS = 1000  # rows of the orders and deals tables on the page; the CSV files hold every row


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


def _of_symbol(table: pd.DataFrame, symbol: str) -> pd.DataFrame:
    """The rows of a trades or orders table that belong to ``symbol`` (all of them without the column)."""
    if not len(table) or "symbol" not in table.columns:
        return table
    return table[table["symbol"] == symbol]


def html_page(result: Result, doc: dict) -> str:
    """The whole report.html of a run (``doc``: its report.json, for the environment)."""
    from backtests import plots, report_charts
    from backtests.report import mt5_table

    s, data, ea = result.stats, result.data, result.ea
    currency = result.account["currency"]
    title = f"{ea['class']} · {data['symbol']} {data['timeframe']}"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if not result.complete:
        parts.append(
            '<p class="warn">INCOMPLETE: the run was interrupted; figures cover the bars replayed.</p>'
        )
    parts.append("<h2>Settings</h2>" + _table(_settings(result)))
    parts.append("<h2>Results</h2><div class='cols'>")
    parts.append("<div><h3>MetaTrader 5</h3>" + _table(statistics.rows(s, "mt5")) + "</div>")
    parts.append("<div><h3>backtesting.py</h3>" + _table(statistics.rows(s, "backtesting.py")))
    trading_days = statistics.rows(s, "trading_days")
    parts.append("<h3>Annualised on trading days</h3>" + _table(trading_days) + "</div></div>")
    parts.append(
        "<h2>Chart</h2><p class='note'>Drag to pan, scroll to zoom (the three panels share the time axis); "
        "hover a trade for its ticket; click a legend entry to hide it.</p>"
    )
    parts.append(embed(plots.result_layout(result), "result"))
    if len(result.trades):
        breakdown = report_charts.trade_breakdown(result.trades, currency)
        parts.append("<h2>Trades</h2>" + embed(breakdown, "breakdown"))
    pred = result.predictions
    if pred is not None:
        parts.append(f"<h2>Predictions on the forward period ({pred['bars']} bars)</h2><div class='cols'>")
        parts.append(_prediction_tables(pred))
        matrix = report_charts.confusion(pred["confusion"], pred["classes"])
        parts.append(embed(matrix, "confusion") + "</div>")
    if result.section is not None:
        parts.append(f"<h2>{html.escape(result.section.title)}</h2>")
        for name, chart in result.section.charts.items():  # an EA's Bokeh chart, or a PNG it drew
            parts.append(_img(chart, name) if isinstance(chart, bytes) else embed(chart, name))
    if result.symbol_charts:  # several symbols: a table and a price chart each
        parts.append(_symbols_html(data.get("symbols", {}), currency))
        for name, chart in result.symbol_charts.items():
            mine = _of_symbol(result.trades, name)
            figure = plots.price_figure(chart, mine, _of_symbol(result.orders, name), None, 5000)
            parts.append(f"<h3>{html.escape(name)}</h3>" + embed(figure, f"price-{name}"))
    if result.training:
        total_wall = sum(r.get("wall_s") or 0.0 for r in result.training)
        builds = sum(r.get("build_s") or 0.0 for r in result.training)
        outcome = training_outcome(result.training)
        parts.append(
            f"<h2>Training</h2><p>{len(result.training)} epochs, {total_wall:.2f} s wall in total"
            + (f" ({builds:.2f} s of it kernel builds)." if builds else ".")
            + (f" {html.escape(outcome[0].upper() + outcome[1:])}.</p>" if outcome else "</p>")
        )
        parts.append(embed(report_charts.training(result.training), "training"))
    digits = int(data.get("digits") or 5)
    for name, table in (("Orders", result.orders), ("Deals", result.deals)):
        parts.append(f"<h2>{name}</h2>")
        parts.append(frame_table(mt5_table(table, digits), TABLE_ROWS) if len(table) else "<p>none</p>")
    parts.append("<h2>Timings</h2>" + _table([(k, f"{v:.3f} s") for k, v in result.timings.items()]))
    parts.append("<h2>Environment</h2>" + _table([(k, str(v)) for k, v in doc["environment"].items()]))
    if result.rejected:
        parts.append(f"<p>{len(result.rejected)} orders were rejected (see rejected.csv).</p>")
    if doc.get("robustness"):
        from backtests.robustness.section import robustness_html

        parts.append(robustness_html(doc["robustness"], currency))
    parts.append(_glossary())
    return page(title, "\n".join(parts))
