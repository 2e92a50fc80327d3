"""The robustness section's charts as PNG bytes, with the report's chart helpers (``backtests.charts``):
the Monte Carlo fan (percentile bands of the simulated paths around the real one) and the permuted
distribution of a statistic with the real value marked."""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.charts import CHART_STYLE, plt, png_bytes


def fan(distribution: dict, currency: str) -> bytes:
    """5-95 % and 25-75 % bands and the median of the simulated paths, and the real path, over time."""
    f = distribution["fan"]
    time = pd.to_datetime(np.asarray(f["time"], dtype=np.float64), unit="s")
    q = {k: np.asarray(v, dtype=np.float64) for k, v in f["quantiles"].items()}
    what = "balance after each trade" if distribution["method"] == "trades" else "equity at bar closes"
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(10, 3.4))
        ax.fill_between(time, q["5"], q["95"], color="#8ab17d", alpha=0.3, lw=0, label="5-95 %")
        ax.fill_between(time, q["25"], q["75"], color="#2a9d8f", alpha=0.4, lw=0, label="25-75 %")
        ax.plot(time, q["50"], color="#2a9d8f", lw=1, label="median")
        ax.plot(time, f["actual"], color="#264653", lw=1.4, label="this run")
        ax.set_ylabel(currency)
        ax.set_title(
            f"Monte Carlo ({distribution['method']}): {what}, {f['paths']:,} of "
            f"{distribution['simulations']:,} paths"
        )
        ax.legend(loc="upper left", fontsize=7)
        return png_bytes(fig)


def permuted(distribution: dict, real: float, label: str, p_value: float) -> bytes:
    """The histogram of a statistic over the permuted histories, with the real history's value."""
    h = distribution["histogram"]
    edges = np.asarray(h["edges"], dtype=np.float64)
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(5, 2.8))
        ax.stairs(h["counts"], edges, fill=True, color="#8ab17d", alpha=0.7, label="permuted histories")
        ax.axvline(real, color="#9d0208", lw=1.5, label=f"real history (p = {p_value:.4g})")
        ax.set_xlabel(label)
        ax.set_ylabel("permutations")
        ax.legend(loc="best", fontsize=7)
        return png_bytes(fig)
