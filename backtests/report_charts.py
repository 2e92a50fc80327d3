"""report.html's views beside the main chart (Bokeh): MetaTrader's trade breakdown (net profit by entry hour
and weekday, MAE/MFE against the result, holding times), the forward confusion matrix, and the training
curves with each epoch's seconds (kernel builds apart)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from backtests.plots import DOWN, UP


def trade_breakdown(trades: pd.DataFrame, currency: str):
    """MetaTrader's trade views: net profit by entry hour and weekday, MAE/MFE against the result, and the
    holding times in bars."""
    entry = pd.DatetimeIndex(trades["entry_time"])
    net = trades["net_profit"].to_numpy(np.float64)
    panels = []
    for key, labels, title in (
        (entry.hour, [str(h) for h in range(24)], "Net profit by entry hour (UTC)"),
        (
            entry.day_of_week,
            ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
            "Net profit by entry weekday (UTC)",
        ),
    ):
        sums = pd.Series(net).groupby(np.asarray(key)).sum().reindex(range(len(labels)), fill_value=0.0)
        fig = figure(x_range=labels, height=230, title=title, tools="save,reset", name="breakdown")
        src = ColumnDataSource({"x": labels, "net": sums.to_numpy(), "color": np.where(sums >= 0, UP, DOWN)})
        fig.vbar("x", 0.8, "net", color="color", source=src)
        fig.add_tools(HoverTool(tooltips=[("", "@x"), (f"net {currency}", "@net{0,0.00}")]))
        panels.append(fig)
    fig = figure(
        height=230, title=f"MAE / MFE against the result ({currency})", tools="pan,box_zoom,reset,save"
    )
    src = ColumnDataSource(
        {
            "mae": trades["mae"].to_numpy(np.float64),
            "mfe": trades["mfe"].to_numpy(np.float64),
            "net": net,
            "ticket": trades["ticket"].to_numpy(np.int64),
        }
    )
    a = fig.scatter("mae", "net", size=4, color=DOWN, alpha=0.6, legend_label="MAE", source=src)
    b = fig.scatter("mfe", "net", size=4, color=UP, alpha=0.6, legend_label="MFE", source=src)
    fig.add_tools(HoverTool(renderers=[a, b], tooltips=[("trade", "#@ticket"), ("net", "@net{0,0.00}")]))
    panels.append(fig)
    held = (trades["exit_bar"] - trades["entry_bar"]).to_numpy()
    counts, edges = np.histogram(held, bins=min(40, max(5, len(np.unique(held)))))
    fig = figure(height=230, title="Holding time (bars)", tools="save,reset")
    fig.quad(top=counts, bottom=0, left=edges[:-1], right=edges[1:], color="#8ab17d")
    panels.append(fig)
    return gridplot(panels, ncols=2, sizing_mode="stretch_width")


def confusion(cm: list[list[int]], classes: list[str]):
    """The forward confusion matrix: counts and each cell's share of its true class (the row)."""
    m = np.asarray(cm, dtype=np.float64)
    rows = m.sum(axis=1, keepdims=True)
    share = np.divide(m, rows, out=np.zeros_like(m), where=rows > 0)
    true, pred = np.meshgrid(classes, classes, indexing="ij")
    src = ColumnDataSource(
        {
            "true": true.ravel(),
            "pred": pred.ravel(),
            "n": m.ravel().astype(np.int64),
            "alpha": 0.15 + 0.85 * share.ravel(),
            "text": [f"{int(v)} ({s:.0%})" for v, s in zip(m.ravel(), share.ravel(), strict=True)],
        }
    )
    fig = figure(
        x_range=list(classes),
        y_range=list(reversed(classes)),
        width=360,
        height=320,
        tools="save",
        title="Confusion matrix (forward; % of the true row)",
        x_axis_label="predicted",
        y_axis_label="true",
        name="confusion",
    )
    fig.rect("pred", "true", 1, 1, fill_color="#264653", fill_alpha="alpha", line_color="white", source=src)
    fig.text("pred", "true", text="text", text_align="center", text_baseline="middle", source=src)
    return fig


def training(epochs: list[dict]):
    """Training (solid) and validation (dashed) loss per epoch, one colour per training round, the kept
    epoch ringed; beside it the seconds of each epoch with the kernel builds apart."""
    df = pd.DataFrame(epochs)
    if "round" not in df:
        df["round"] = 1
    palette = ("#264653", "#e76f51", "#2a9d8f", "#8338ec", "#fb5607", "#3a86ff", "#6a994e", "#ff006e")
    loss = figure(
        height=260,
        title="Loss per epoch",
        x_axis_label="epoch",
        tools="pan,box_zoom,reset,save",
        name="training",
    )
    for k, (rnd, part) in enumerate(df.groupby("round")):
        colour = palette[k % len(palette)]
        loss.line(
            part["epoch"], part["loss"].astype(float), color=colour, legend_label=f"training, round {rnd}"
        )
        if "val_loss" in part and part["val_loss"].notna().any():
            loss.line(
                part["epoch"],
                part["val_loss"].astype(float),
                color=colour,
                line_dash="dashed",
                legend_label=f"validation, round {rnd}",
            )
        if "kept" in part:
            kept = part[part["kept"].fillna(False).astype(bool)]
            y = kept["val_loss"] if "val_loss" in kept and kept["val_loss"].notna().all() else kept["loss"]
            loss.scatter(kept["epoch"], y.astype(float), size=12, fill_color=None, line_color="black")
    loss.legend.click_policy = "hide"
    wall = df["wall_s"].astype(float).to_numpy()
    build = df["build_s"].astype(float).fillna(0.0).to_numpy() if "build_s" in df else np.zeros(len(df))
    x = np.arange(1, len(df) + 1)
    secs = figure(
        height=260, title="Seconds per epoch (all rounds)", x_axis_label="epoch", tools="save,reset"
    )
    secs.vbar(x, 0.8, wall - build, 0, color="#8ab17d", legend_label="training")
    if build.any():
        secs.vbar(x, 0.8, wall, wall - build, color="#e9c46a", legend_label="kernel builds")
    return gridplot([loss, secs], ncols=2, sizing_mode="stretch_width")
