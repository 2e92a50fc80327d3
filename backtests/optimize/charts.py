"""Optimisation charts as PNG bytes: the criterion heat map, parameter-vs-criterion, walk-forward equity."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend must be chosen first
import numpy as np
import pandas as pd

from backtests.charts import CHART_STYLE, png_bytes


def heatmap(table: pd.DataFrame, x: str, y: str, label: str, maximize: bool) -> bytes:
    """The criterion over two parameters; with more parameters each cell shows the best pass of that pair."""
    data = table[table["criterion"].notna()]
    pivot = data.pivot_table(index=y, columns=x, values="criterion", aggfunc="max" if maximize else "min")
    with plt.rc_context({**CHART_STYLE, "axes.grid": False}):
        width = min(12.0, 2 + 0.5 * max(4, pivot.shape[1]))
        height = min(9.0, 2 + 0.35 * max(4, pivot.shape[0]))
        fig, ax = plt.subplots(figsize=(width, height))
        cmap = "viridis" if maximize else "viridis_r"
        im = ax.imshow(pivot.to_numpy(dtype=float), origin="lower", aspect="auto", cmap=cmap)
        ax.set_xticks(range(pivot.shape[1]), [str(v) for v in pivot.columns], rotation=90)
        ax.set_yticks(range(pivot.shape[0]), [str(v) for v in pivot.index])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title(f"{label} by {x} and {y} (blank: refused or undefined)")
        fig.colorbar(im, ax=ax, shrink=0.8)
        return png_bytes(fig)


def param_scatter(table: pd.DataFrame, names: list[str], label: str) -> bytes:
    """One panel per parameter: every pass's criterion against that parameter's value."""
    data = table[table["criterion"].notna()]
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    with plt.rc_context(CHART_STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            values = data[name]
            numeric = pd.to_numeric(values, errors="coerce")
            if numeric.notna().all():
                ax.scatter(numeric, data["criterion"], s=10, alpha=0.6, color="#264653")
            else:  # text choices: one column of points per choice
                cats = sorted({str(v) for v in values})
                pos = [cats.index(str(v)) for v in values]
                ax.scatter(pos, data["criterion"], s=10, alpha=0.6, color="#264653")
                ax.set_xticks(range(len(cats)), cats, rotation=45)
            ax.set_xlabel(name)
            ax.set_ylabel(label)
        for ax in list(axes.flat)[len(names) :]:
            ax.set_visible(False)
        return png_bytes(fig)


def stitched_equity(equity: pd.Series, boundaries: list[pd.Timestamp], currency: str) -> bytes:
    """The walk-forward out-of-sample equity, with each test window's start marked."""
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(10, 3.6))
        ax.plot(equity.index, equity.to_numpy(), color="#2a9d8f", lw=1.0)
        for t in boundaries:
            ax.axvline(t, color="#999999", lw=0.6, ls="--")
        ax.set_ylabel(currency)
        ax.set_title("Walk-forward: stitched out-of-sample equity (dashed: window starts)")
        return png_bytes(fig)


def is_vs_oos(windows: pd.DataFrame) -> bytes:
    """In-sample against out-of-sample annualised return per window."""
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(8, 3.2))
        x = np.arange(len(windows))
        ax.bar(x - 0.2, windows["is_return_ann_pct"], 0.4, label="in sample", color="#264653")
        ax.bar(x + 0.2, windows["oos_return_ann_pct"], 0.4, label="out of sample", color="#e76f51")
        ax.set_xticks(x, [str(w) for w in windows["window"]])
        ax.set_xlabel("window")
        ax.set_ylabel("% of deposit per year")
        ax.axhline(0, color="black", lw=0.6)
        ax.legend(loc="best")
        return png_bytes(fig)
