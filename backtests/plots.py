"""Interactive charts of a run (Bokeh): the price with every trade, pending order, class and indicator, the
equity and the drawdown on one linked time axis (the report's other views: ``backtests.report_charts``).

Every chart is built from plain arrays, so ``Result.plot()`` and report.html draw the same figures. Long runs
stay light: candles are merged into at most ``max_candles`` candles (each spans its bars' open, high, low and
close) and the curves into as many points (the balance and equity at each group's last close, the worst
equity at its lowest, the drawdown at its deepest: nothing a reader looks for is smoothed away), while every
trade keeps its own markers. BokehJS is written inline, so a page opens offline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from bokeh.io import output_notebook, save
from bokeh.io import show as bokeh_show
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure
from bokeh.resources import Resources

RESOURCES = Resources(mode="inline", components=["bokeh"])  # BokehJS itself: no widgets, tables or WebGL
TOOLS = "xpan,xwheel_zoom,box_zoom,reset,save"
UP, DOWN, GREY = "#2a9d8f", "#e76f51", "#6c757d"
PENDING = ("buy_limit", "sell_limit", "buy_stop", "sell_stop", "buy_stop_limit", "sell_stop_limit")


def ms(times) -> np.ndarray:
    """Times as Bokeh reads them: float milliseconds since the epoch (UTC)."""
    return pd.DatetimeIndex(times).as_unit("ns").asi8 / 1e6


def groups(n: int, most: int) -> np.ndarray:
    """The first row of each of at most ``most`` consecutive groups of ``n`` rows (all rows when few)."""
    if n <= most:
        return np.arange(n)
    return np.unique(np.linspace(0, n, most, endpoint=False).astype(np.int64))


def candles(chart: dict, most: int) -> tuple[ColumnDataSource, float]:
    """OHLC candles, merged into at most ``most``: each spans its group's first open, highest high, lowest
    low and last close. Returns the source and the candle width in ms."""
    t = ms(chart["time"])
    starts = groups(len(t), most)
    o = np.asarray(chart["open"], dtype=np.float64)[starts]
    h = np.maximum.reduceat(np.asarray(chart["high"], dtype=np.float64), starts)
    lo = np.minimum.reduceat(np.asarray(chart["low"], dtype=np.float64), starts)
    ends = np.append(starts[1:], len(t)) - 1
    c = np.asarray(chart["close"], dtype=np.float64)[ends]
    step = float(np.median(np.diff(t[starts]))) if len(starts) > 1 else 3.6e6
    src = ColumnDataSource(
        {
            "time": t[starts],
            "open": o,
            "high": h,
            "low": lo,
            "close": c,
            "color": np.where(c >= o, UP, DOWN),
            "bars": ends - starts + 1,
        }
    )
    return src, step * 0.7


def _trade_sources(trades: pd.DataFrame) -> tuple[ColumnDataSource, ColumnDataSource]:
    """One row per trade for its entry marker and one for its exit, both carrying what the hover shows."""
    if not len(trades):
        return ColumnDataSource({"time": [], "price": [], "ticket": []}), ColumnDataSource(
            {"time": [], "price": [], "ticket": []}
        )
    buy = trades["type"].to_numpy() == "buy"
    common = {
        "ticket": trades["ticket"].to_numpy(np.int64),
        "type": trades["type"].astype(str).to_numpy(),
        "lots": trades["lots"].to_numpy(np.float64),
        "sl": trades["sl"].to_numpy(np.float64),
        "tp": trades["tp"].to_numpy(np.float64),
        "net": trades["net_profit"].to_numpy(np.float64),
        "reason": trades["exit_reason"].astype(str).to_numpy(),
    }
    entry = ColumnDataSource(
        {
            **common,
            "time": ms(trades["entry_time"]),
            "price": trades["entry_price"].to_numpy(np.float64),
            "angle": np.where(buy, 0.0, np.pi),
            "color": np.where(buy, UP, DOWN),
        }
    )
    exit_ = ColumnDataSource(
        {
            **common,
            "time": ms(trades["exit_time"]),
            "price": trades["exit_price"].to_numpy(np.float64),
            "x0": ms(trades["entry_time"]),
            "y0": trades["entry_price"].to_numpy(np.float64),
            "color": np.where(common["net"] > 0, UP, DOWN),
        }
    )
    return entry, exit_


TRADE_TIPS = [
    ("trade", "#@ticket @type @lots{0.00} lots"),
    ("price", "@price{0.00000}"),
    ("SL / TP", "@sl{0.00000} / @tp{0.00000}"),
    ("net profit", "@net{0,0.00}"),
    ("exit", "@reason"),
]


def price_figure(chart: dict, trades: pd.DataFrame, orders: pd.DataFrame, classes, most: int):
    """Candles, indicators, trades (entry triangles, exit crosses joined by a line coloured by the result,
    SL and TP dashes), pending orders (their price while they lived) and true/predicted classes."""
    fig = figure(
        height=380,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title="Price (bid), trades, orders, indicators",
        name="price",
    )
    src, width = candles(chart, most)
    fig.segment("time", "high", "time", "low", color="color", source=src)
    fig.vbar("time", width, "open", "close", fill_color="color", line_color="color", source=src)
    on_price, _ = split_indicators(chart)
    _lines(fig, chart, on_price, most)
    entry, exit_ = _trade_sources(trades)
    if len(trades):
        fig.segment("x0", "y0", "time", "price", color="color", line_width=1.2, alpha=0.8, source=exit_)
        for level, colour in (("sl", DOWN), ("tp", UP)):
            fig.scatter(
                "time", level, marker="dash", size=9, color=colour, source=entry, legend_label=level.upper()
            )
        hits = [
            fig.scatter(
                "time",
                "price",
                marker="triangle",
                angle="angle",
                size=9,
                color="color",
                source=entry,
                legend_label="entry",
                name="entries",
            ),
            fig.scatter(
                "time",
                "price",
                marker="x",
                size=9,
                color="color",
                line_width=2,
                source=exit_,
                legend_label="exit",
                name="exits",
            ),
        ]
        fig.add_tools(HoverTool(renderers=hits, tooltips=TRADE_TIPS))
    pending = orders[orders["type"].isin(PENDING)] if len(orders) else orders
    if len(pending):
        done = pending["time_done"].fillna(pd.Timestamp(chart["time"][-1]))
        psrc = ColumnDataSource(
            {
                "t0": ms(pending["time_setup"]),
                "t1": ms(done),
                "price": pending["price"].to_numpy(np.float64),
                "ticket": pending["ticket"].astype("int64").to_numpy(),
                "type": pending["type"].astype(str).to_numpy(),
                "state": pending["state"].astype(str).to_numpy(),
            }
        )
        seg = fig.segment(
            "t0",
            "price",
            "t1",
            "price",
            line_dash="dashed",
            color="#ffb703",
            line_width=2,
            source=psrc,
            legend_label="pending order",
        )
        fig.add_tools(
            HoverTool(
                renderers=[seg], tooltips=[("order", "#@ticket @type @price{0.00000}"), ("state", "@state")]
            )
        )
    if classes is not None and "y_true" in chart:
        _classes(fig, chart, classes, most)
    if len(fig.legend):  # a run without trades, orders or classes draws no legend
        fig.legend.click_policy = "hide"
        fig.legend.location = "top_left"
    return fig


PALETTE = ("#264653", "#8338ec", "#ff006e", "#3a86ff", "#fb5607", "#6a994e")


def split_indicators(chart: dict) -> tuple[dict, dict]:
    """The EA's declared lines that live on the price's scale (a moving average, bands: drawn over the
    candles) and the others (an oscillator, a probability: drawn in a panel of their own, which would
    otherwise flatten the candles into a line)."""
    lo = float(np.nanmin(chart["low"])) if len(chart["low"]) else 0.0
    hi = float(np.nanmax(chart["high"])) if len(chart["high"]) else 0.0
    span = hi - lo
    on_price, apart = {}, {}
    for name, values in (chart.get("indicators") or {}).items():
        v = np.asarray(values, dtype=np.float64)
        finite = v[np.isfinite(v)]
        inside = len(finite) and lo - span <= float(np.median(finite)) <= hi + span
        (on_price if inside else apart)[name] = v
    return on_price, apart


def _lines(fig, chart: dict, lines: dict, most: int) -> None:
    picks = groups(len(chart["time"]), most)
    times = ms(chart["time"])[picks]
    for k, (name, values) in enumerate(lines.items()):
        fig.line(times, values[picks], color=PALETTE[k % len(PALETTE)], legend_label=name, line_width=1.2)


def indicator_figure(chart: dict, lines: dict, x_range, most: int):
    """The EA's lines that are not on the price's scale, below the price on the same time axis."""
    fig = figure(
        height=160,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        x_range=x_range,
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title="Indicators",
        name="indicators",
    )
    _lines(fig, chart, lines, most)
    fig.legend.location = "top_left"
    fig.legend.click_policy = "hide"
    return fig


def _classes(fig, chart: dict, classes: list[str], most: int) -> None:
    """True classes (filled) and predicted ones (hollow) of the last ``most`` bars: a rising class under
    the bar, a falling one over it."""
    t, hi, lo = ms(chart["time"])[-most:], np.asarray(chart["high"])[-most:], np.asarray(chart["low"])[-most:]
    pad = float(np.nanmax(hi) - np.nanmin(lo)) * 0.01 or 1e-4
    for arr, hollow in ((chart["y_true"], False), (chart["y_pred"], True)):
        arr = np.asarray(arr)[-most:]
        for k, name in enumerate(classes[1:], start=1):
            hit = arr == k
            if not hit.any():
                continue
            side = direction(name)
            y = lo[hit] - pad * (2 if hollow else 1) if side >= 0 else hi[hit] + pad * (2 if hollow else 1)
            colour = {1: UP, -1: DOWN, 0: GREY}[side]
            fig.scatter(
                t[hit],
                y,
                marker={1: "triangle", -1: "inverted_triangle", 0: "circle"}[side],
                size=6,
                line_color=colour,
                fill_color=None if hollow else colour,
                legend_label=f"{'predicted' if hollow else 'true'} {name}",
            )


def direction(name: str) -> int:
    """+1 for a class that means a rise, -1 for a fall, 0 for anything else."""
    word = name.lower()
    return 1 if word in ("buy", "up", "long") else -1 if word in ("sell", "down", "short") else 0


def curve_figures(equity: pd.DataFrame, currency: str, x_range, most: int) -> list:
    """Balance, equity and the worst equity of each bar; below, the drawdown (%), on ``x_range``."""
    t = ms(equity.index)
    starts = groups(len(t), most)
    ends = np.append(starts[1:], len(t)) - 1
    worst = equity["equity_worst"] if "equity_worst" in equity else equity["equity"]
    src = ColumnDataSource(
        {
            "time": t[ends],
            "equity": equity["equity"].to_numpy()[ends],
            "balance": equity["balance"].to_numpy()[ends],
            "worst": np.minimum.reduceat(worst.to_numpy(np.float64), starts),
            "dd": -np.maximum.reduceat(equity["drawdown_pct"].to_numpy(np.float64), starts),
        }
    )
    eq = figure(
        height=220,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        x_range=x_range,
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title=f"Balance and equity ({currency})",
        name="equity",
    )
    eq.line("time", "worst", color=DOWN, alpha=0.6, legend_label="equity at worst prices", source=src)
    eq.line("time", "equity", color=UP, legend_label="equity at close", source=src)
    eq.step(
        "time", "balance", color="#264653", line_width=1.5, legend_label="balance", mode="after", source=src
    )
    eq.add_tools(
        HoverTool(
            tooltips=[
                ("time", "@time{%F %H:%M}"),
                ("equity", "@equity{0,0.00}"),
                ("balance", "@balance{0,0.00}"),
            ],
            formatters={"@time": "datetime"},
            mode="vline",
        )
    )
    eq.legend.location = "top_left"
    eq.legend.click_policy = "hide"
    dd = figure(
        height=150,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        x_range=x_range,
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title="Drawdown from the running peak (%)",
        name="drawdown",
    )
    dd.varea("time", "dd", 0, color=DOWN, alpha=0.6, source=src)
    return [eq, dd]


def result_layout(result, max_candles: int = 5000):
    """The linked price, equity and drawdown charts of a run (``Result.plot`` and report.html)."""
    chart = result.chart_data
    pred = result.predictions
    classes = pred["classes"] if pred else None
    price = price_figure(chart, result.trades, result.orders, classes, max_candles)
    _, apart = split_indicators(chart)
    below = [indicator_figure(chart, apart, price.x_range, max_candles)] if apart else []
    return column(
        price,
        *below,
        *curve_figures(result.equity, result.account.get("currency", ""), price.x_range, max_candles),
        sizing_mode="stretch_width",
    )


def save_or_show(layout, filename: str | Path | None, show: bool | None, title: str):
    """Save ``layout`` as a self-contained HTML file (BokehJS inline) and/or show it (in a notebook when one
    runs, else in the browser); returns the layout."""
    in_notebook = _in_notebook()
    if filename is not None:
        # Bokeh's bundler keeps only the parts of BokehJS the layout uses out of the full inline set
        save(layout, filename=str(filename), resources=Resources(mode="inline"), title=title)
    if show if show is not None else (filename is None):
        if in_notebook:
            output_notebook(Resources(mode="inline"), hide_banner=True)
        bokeh_show(layout)
    return layout


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"
