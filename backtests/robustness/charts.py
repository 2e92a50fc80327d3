"""The robustness section's interactive charts (Bokeh): the Monte Carlo fan (percentile bands of the
simulated paths around the real one) and the permuted distribution of a statistic with the real value
marked. Built from the plain lists of ``Robustness.to_dict()``, so report.html and robustness.html (written
from a report folder) draw the same charts."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Span
from bokeh.plotting import figure

from backtests.plots import TOOLS


def fan(distribution: dict, currency: str):
    """5-95 % and 25-75 % bands and the median of the simulated paths, and the real path, over time."""
    f = distribution["fan"]
    q = {k: np.asarray(v, dtype=np.float64) for k, v in f["quantiles"].items()}
    src = ColumnDataSource(
        {
            "time": np.asarray(f["time"], dtype=np.float64) * 1000.0,
            "actual": np.asarray(f["actual"], dtype=np.float64),
        }
        | {f"q{k}": v for k, v in q.items()}
    )
    what = "balance after each trade" if distribution["method"] == "trades" else "equity at bar closes"
    fig = figure(
        height=280,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title=f"Monte Carlo ({distribution['method']}): {what}, {f['paths']:,} of "
        f"{distribution['simulations']:,} paths ({currency})",
        name=f"fan_{distribution['method']}",
    )
    fig.varea("time", "q5", "q95", source=src, color="#8ab17d", alpha=0.3, legend_label="5-95 %")
    fig.varea("time", "q25", "q75", source=src, color="#2a9d8f", alpha=0.4, legend_label="25-75 %")
    fig.line("time", "q50", source=src, color="#2a9d8f", legend_label="median")
    real = fig.line("time", "actual", source=src, color="#264653", line_width=1.6, legend_label="this run")
    fig.add_tools(
        HoverTool(
            renderers=[real],
            tooltips=[
                ("time", "@time{%F %H:%M}"),
                ("this run", "@actual{0,0.00}"),
                ("median", "@q50{0,0.00}"),
                ("5-95 %", "@q5{0,0.00} .. @q95{0,0.00}"),
            ],
            formatters={"@time": "datetime"},
            mode="vline",
        )
    )
    fig.legend.location = "top_left"
    fig.legend.click_policy = "hide"
    return fig


def permuted(distribution: dict, real: float, label: str, p_value: float):
    """The histogram of a statistic over the permuted histories, with the real history's value."""
    h = distribution["histogram"]
    edges = np.asarray(h["edges"], dtype=np.float64)
    src = ColumnDataSource(
        {"left": edges[:-1], "right": edges[1:], "count": np.asarray(h["counts"], dtype=np.int64)}
    )
    fig = figure(
        height=240,
        width=420,
        tools="hover,save,reset",
        title=f"{label}: permuted histories and the real one (p = {p_value:.4g})",
        name="permuted",
        tooltips=[("from", "@left{0,0.0000}"), ("to", "@right{0,0.0000}"), ("permutations", "@count")],
    )
    fig.quad(left="left", right="right", top="count", bottom=0, source=src, color="#8ab17d", alpha=0.7)
    fig.add_layout(Span(location=float(real), dimension="height", line_color="#9d0208", line_width=2))
    fig.xaxis.axis_label, fig.yaxis.axis_label = label, "permutations"
    return fig
