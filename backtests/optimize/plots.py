"""Interactive charts of an optimisation (Bokeh), for its report.html and for a notebook: the criterion over
two parameters (heat map), every pass across all searched parameters (parallel coordinates, coloured by
the criterion), and for walk-forward the stitched out-of-sample equity with its windows and each window's
in-sample against out-of-sample return.

Every pass keeps its own mark with its pass number in the hover, so a reader finds a pass of results.csv
on the chart and back. ``plot_passes`` and ``plot_walk_forward`` show or save them like ``Result.plot``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import BasicTicker, ColorBar, ColumnDataSource, FactorRange, HoverTool, LinearColorMapper
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from backtests.plots import TOOLS, ms, save_or_show


def _labels(values) -> list[str]:
    return [str(v) for v in values]


def heatmap(table: pd.DataFrame, x: str, y: str, label: str, maximize: bool):
    """The criterion over two parameters; with more parameters each cell shows the best pass of that
    pair (its pass number in the hover). Blank: refused or undefined."""
    done = table[table["criterion"].notna()]
    best = done.sort_values("criterion", ascending=not maximize, kind="stable").drop_duplicates([x, y])
    xs = _labels(sorted(done[x].unique(), key=_order))
    ys = _labels(sorted(done[y].unique(), key=_order))
    src = ColumnDataSource(
        {
            "x": _labels(best[x]),
            "y": _labels(best[y]),
            "criterion": best["criterion"].to_numpy(np.float64),
            "pass": best["pass"].to_numpy(np.int64),
        }
    )
    palette = Viridis256 if maximize else Viridis256[::-1]
    lo, hi = float(best["criterion"].min()), float(best["criterion"].max())
    mapper = LinearColorMapper(palette=palette, low=lo, high=hi if hi > lo else lo + 1.0)
    fig = figure(
        x_range=FactorRange(*xs),
        y_range=FactorRange(*ys),
        height=max(260, min(700, 60 + 22 * len(ys))),
        sizing_mode="stretch_width",
        tools="hover,save,reset",
        title=f"{label} by {x} and {y} (each cell: the best pass of the pair; blank: refused or undefined)",
        name="heatmap",
        tooltips=[(x, "@x"), (y, "@y"), (label, "@criterion{0,0.0000}"), ("pass", "@pass")],
    )
    fig.rect(
        "x", "y", 1, 1, source=src, fill_color={"field": "criterion", "transform": mapper}, line_color=None
    )
    fig.add_layout(ColorBar(color_mapper=mapper, ticker=BasicTicker()), "right")
    fig.xaxis.axis_label, fig.yaxis.axis_label = x, y
    fig.xaxis.major_label_orientation = 1.2 if len(xs) > 12 else 0.0
    return fig


def _order(v):
    """Sort numbers as numbers and anything else as text."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def parallel(table: pd.DataFrame, names: list[str], label: str, maximize: bool):
    """Every defined pass as a line across the searched parameters and the criterion, each axis scaled to
    0..1 (text parameters by their order of values); the line's colour is the criterion. Hover: the pass."""
    done = table[table["criterion"].notna()]
    axes = [*names, "criterion"]
    scaled = {}
    for name in axes:
        values = done[name]
        number = pd.to_numeric(values, errors="coerce")
        if number.notna().all():
            lo, hi = float(number.min()), float(number.max())
            scaled[name] = (
                (number.to_numpy(np.float64) - lo) / (hi - lo) if hi > lo else np.full(len(done), 0.5)
            )
        else:
            order = sorted(values.astype(str).unique(), key=_order)
            rank = {v: k for k, v in enumerate(order)}
            scaled[name] = np.array([rank[str(v)] for v in values], dtype=np.float64) / max(1, len(order) - 1)
    xs = [list(range(len(axes)))] * len(done)
    ys = [[float(scaled[a][k]) for a in axes] for k in range(len(done))]
    lo, hi = (float(done["criterion"].min()), float(done["criterion"].max())) if len(done) else (0.0, 1.0)
    mapper = LinearColorMapper(
        palette=Viridis256 if maximize else Viridis256[::-1], low=lo, high=max(hi, lo + 1e-12)
    )
    src = ColumnDataSource(
        {
            "xs": xs,
            "ys": ys,
            "criterion": done["criterion"].to_numpy(np.float64),
            "pass": done["pass"].to_numpy(np.int64),
            "params": [", ".join(f"{n}={row[n]}" for n in names) for _, row in done.iterrows()],
        }
    )
    fig = figure(
        height=320,
        sizing_mode="stretch_width",
        tools="pan,wheel_zoom,reset,save",
        title=f"Every pass across the parameters (colour: {label}; each axis from its lowest to highest)",
        name="parallel",
        x_range=(-0.2, len(axes) - 0.8),
    )
    lines = fig.multi_line(
        "xs", "ys", source=src, line_color={"field": "criterion", "transform": mapper}, line_alpha=0.6
    )
    fig.add_tools(
        HoverTool(
            renderers=[lines], tooltips=[("pass", "@pass"), ("", "@params"), (label, "@criterion{0,0.0000}")]
        )
    )
    fig.xaxis.ticker = list(range(len(axes)))
    fig.xaxis.major_label_overrides = {k: a for k, a in enumerate(axes)}
    fig.yaxis.visible = False
    fig.add_layout(ColorBar(color_mapper=mapper, ticker=BasicTicker()), "right")
    return fig


def passes_layout(table: pd.DataFrame, names: list[str], label: str, maximize: bool, pair=None):
    """The heat map (of ``pair``, else the first two numeric parameters) above the parallel coordinates."""
    done = table[table["criterion"].notna()]
    numeric = [n for n in names if pd.to_numeric(done[n], errors="coerce").notna().all()]
    pair = pair or tuple((numeric if len(numeric) >= 2 else names)[:2])
    parts = [heatmap(table, pair[0], pair[1], label, maximize)] if len(pair) == 2 and len(done) else []
    if len(done):
        parts.append(parallel(table, names, label, maximize))
    return column(*parts, sizing_mode="stretch_width")


def stitched_equity(equity: pd.Series, boundaries: list, currency: str):
    """The walk-forward's stitched out-of-sample equity; dashed lines: each test window's first bar."""
    fig = figure(
        height=280,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title=f"Walk-forward: stitched out-of-sample equity{f' ({currency})' if currency else ''}; "
        "dashed: each test window's start",
        name="oos_equity",
    )
    src = ColumnDataSource({"time": ms(equity.index), "equity": equity.to_numpy(np.float64)})
    fig.line("time", "equity", source=src, color="#2a9d8f")
    top, bottom = float(equity.max()), float(equity.min())
    starts = ms(pd.DatetimeIndex(pd.to_datetime(boundaries, utc=True)))
    fig.segment(starts, bottom, starts, top, color="#999999", line_dash="dashed")
    fig.add_tools(
        HoverTool(
            tooltips=[("time", "@time{%F %H:%M}"), ("equity", "@equity{0,0.00}")],
            formatters={"@time": "datetime"},
            mode="vline",
        )
    )
    return fig


def is_vs_oos(windows: pd.DataFrame):
    """In-sample against out-of-sample annualised return (% of the deposit a year) of each window."""
    labels = _labels(windows["window"])
    factors = [(w, side) for w in labels for side in ("in sample", "out of sample")]
    values = [
        v
        for pair in zip(windows["is_return_ann_pct"], windows["oos_return_ann_pct"], strict=True)
        for v in pair
    ]
    src = ColumnDataSource(
        {
            "x": factors,
            "value": np.asarray(values, dtype=np.float64),
            "color": ["#264653", "#e76f51"] * len(labels),
        }
    )
    fig = figure(
        x_range=FactorRange(*factors),
        height=260,
        sizing_mode="stretch_width",
        tools="hover,save,reset",
        title="Annualised return of each window's winner, in and out of sample (% of the deposit a year)",
        name="is_vs_oos",
        tooltips=[("window", "@x"), ("return", "@value{0.00} %")],
    )
    fig.vbar("x", 0.9, "value", source=src, color="color")
    fig.xaxis.major_label_orientation = 1.2
    return fig


def walk_forward_layout(wf, currency: str):
    return column(
        stitched_equity(wf.equity, list(wf.windows["test_first"]), currency),
        is_vs_oos(wf.windows),
        sizing_mode="stretch_width",
    )


def plot_passes(table: pd.DataFrame, names: list[str] | None = None, filename: str | Path | None = None,
                *, show: bool | None = None, pair: tuple[str, str] | None = None):  # fmt: skip
    """An ``optimize`` table (best first) as the report's charts: heat map and parallel coordinates.
    ``names``: the searched parameters (default: the columns between ``pass`` and ``criterion``)."""
    from backtests.optimize.criteria import get_criterion

    cols = list(table.columns)
    names = names or cols[cols.index("pass") + 1 : cols.index("criterion")]
    crit = get_criterion(table.attrs.get("criterion", "balance"))
    layout = passes_layout(table, names, crit.label, crit.maximize, pair)
    return save_or_show(layout, filename, show, title="Optimisation")


def plot_walk_forward(
    wf, currency: str = "", filename: str | Path | None = None, *, show: bool | None = None
):
    """A ``walk_forward`` result as the report's charts: stitched equity and each window's returns."""
    return save_or_show(walk_forward_layout(wf, currency), filename, show, title="Walk-forward")
