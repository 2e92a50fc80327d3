"""Figures of many simulated balance or equity paths at once: the final value, the maximal drawdown in money
and in percent of its peak, and the longest time under water.

A path is ``(S, K)`` values at ``K`` times (seconds since the epoch), the first column the start (the
deposit). The drawdowns are MetaTrader's maximal and relative drawdowns (``backtests.metrics.drawdowns``)
on these points; a drawdown lasts from the time of its peak to the first point back at or above the peak,
or to the last point (backtesting.py's drawdown duration).
"""

from __future__ import annotations

import numpy as np


def path_figures(paths: np.ndarray, times: np.ndarray) -> dict[str, np.ndarray]:
    """``final``, ``max_drawdown``, ``max_drawdown_pct`` and ``under_water_s``, each ``(S,)``."""
    v = np.asarray(paths, dtype=np.float64)
    k = v.shape[1]
    peak = np.maximum.accumulate(v, axis=1)  # (S, K)
    fall = peak - v
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(peak > 0, fall / peak * 100.0, 0.0)
    under = fall > 0
    steps = np.arange(k)
    last_peak = np.maximum.accumulate(np.where(under, 0, steps), axis=1)  # (S, K): index of the last peak
    span = np.zeros_like(v)
    if k > 1:
        before = last_peak[:, :-1]  # the last peak strictly before each later point
        t = np.asarray(times, dtype=np.float64)
        span[:, 1:] = np.where(under[:, 1:] | under[:, :-1], t[1:] - t[before], 0.0)
    return {
        "final": v[:, -1].copy(),
        "max_drawdown": fall.max(axis=1),
        "max_drawdown_pct": pct.max(axis=1),
        "under_water_s": span.max(axis=1),
    }
