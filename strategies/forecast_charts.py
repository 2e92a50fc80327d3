"""ForecastEA's report charts, interactive (Bokeh): truth against forecast for sampled forward bars, the
error at each horizon of the model and its two baselines, and ATFNet's harmonic weight over time.

Built from the section's plain lists (``ForecastEA.forecast_section``), as report.json keeps them, so the
page draws what the JSON says; report.html embeds them like its own charts (BokehJS inline, offline)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.layouts import gridplot
from bokeh.models import HoverTool
from bokeh.plotting import figure

COLOURS = {"model": "#264653", "naive": "#e76f51", "linear": "#2a9d8f"}


def _examples(examples: list[dict]):
    """Each sampled bar: its history (grey), the truth (black) and the forecast (blue), by bars from it."""
    figs = []
    for ex in examples:
        n, t = len(ex["history"]), len(ex["actual"])
        fig = figure(
            width=300,
            height=220,
            tools="pan,wheel_zoom,reset,save",
            title=pd.Timestamp(ex["time"]).strftime("%Y.%m.%d %H:%M"),
            name="forecast_example",
        )
        fig.line(np.arange(-n, 0), ex["history"], color="#999999")
        fig.line(np.arange(t), ex["actual"], color="#111111", legend_label="actual")
        line = fig.line(
            np.arange(t), ex["forecast"], color="#3a86ff", line_width=1.5, legend_label="forecast"
        )
        fig.add_tools(
            HoverTool(renderers=[line], tooltips=[("bars ahead", "$x{0}"), ("forecast", "$y{0.00000}")])
        )
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "8pt"
        figs.append(fig)
    return gridplot(figs, ncols=min(4, max(1, len(figs))))


def _horizon_error(section: dict):
    """Mean absolute error (price) of the model and the baselines at each horizon."""
    fig = figure(
        height=260,
        sizing_mode="stretch_width",
        tools="hover,save,reset",
        title="Error by horizon: MAE (price) of the forecast and the baselines",
        name="horizon_error",
        tooltips=[("bars ahead", "$x{0}"), ("MAE", "$y{0.000000}")],
    )
    for name, err in section["errors"].items():
        fig.line(section["horizon_steps"], err["mae"], legend_label=name, color=COLOURS.get(name, "#8338ec"))
        fig.scatter(section["horizon_steps"], err["mae"], color=COLOURS.get(name, "#8338ec"), size=4)
    fig.xaxis.axis_label, fig.yaxis.axis_label = "bars ahead", "MAE (price)"
    return fig


def _weight(section: dict):
    """ATFNet's harmonic weight w (0: the time-domain branch only, 1: the frequency branch only)."""
    times = pd.to_datetime([t[:19] for t in section["weight"]["time"]])
    fig = figure(
        height=200,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        y_range=(0, 1),
        tools="xpan,xwheel_zoom,reset,save",
        title="Harmonic weight w over the forward bars",
        name="harmonic_weight",
    )
    fig.line(times, np.asarray(section["weight"]["value"], dtype=np.float64))
    return fig


def forecast_charts(section: dict) -> dict:
    """The section's charts by name: ``forecast_vs_actual``, ``horizon_error`` and, where the model has a
    harmonic weight (ATFNet), ``harmonic_weight``."""
    charts = {"forecast_vs_actual": _examples(section["examples"]), "horizon_error": _horizon_error(section)}
    if np.isfinite(np.asarray(section["weight"]["value"], dtype=np.float64)).any():
        charts["harmonic_weight"] = _weight(section)
    return charts
