"""Resampling of dependent series: the stationary bootstrap and percentile intervals.

Politis, D. N. and Romano, J. P. (1994), "The Stationary Bootstrap", JASA 89(428): a resample is built
from blocks of consecutive observations that start at uniformly random positions and whose lengths are
geometric with mean ``block`` (each next index is the previous one plus one, wrapping around the end, with
probability ``1 − 1/block``, else a fresh random start). Unlike fixed blocks, the resampled series is
stationary; with ``block = 1`` it is the ordinary i.i.d. bootstrap.
"""

from __future__ import annotations

import math

import numpy as np

from backtests.robustness.errors import RobustnessError


def default_block(n: int) -> int:
    """A mean block length of about ``n^(1/3)`` (the rate that minimises the bootstrap variance's error
    for the stationary bootstrap, Politis & White 2004), at least 1."""
    return max(1, round(n ** (1.0 / 3.0)))


def stationary_indices(rng: np.random.Generator, n: int, reps: int, block: float) -> np.ndarray:
    """``(reps, n)`` indices of ``reps`` stationary-bootstrap resamples of a series of ``n`` observations."""
    if n < 1:
        raise RobustnessError("the stationary bootstrap needs at least one observation")
    if not block >= 1:
        raise RobustnessError(f"the mean block length must be at least 1, got {block}")
    idx = rng.integers(0, n, size=(reps, n))
    if block == 1:
        return idx
    restart = rng.random((reps, n)) < 1.0 / block
    restart[:, 0] = True
    # Each position continues the block that began at the last restart: start index + steps since then.
    pos = np.arange(n)
    last = np.maximum.accumulate(np.where(restart, pos, 0), axis=1)  # (reps, n)
    start = np.take_along_axis(idx, last, axis=1)
    return (start + pos - last) % n


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """The equal-tailed percentile interval of bootstrap ``values`` (NaN replicates left out)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return None, None
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(v, [tail, 100.0 - tail])
    return float(lo), float(hi)


def check_count(name: str, value: int, low: int, high: int) -> int:
    """An integer count option within ``low..high`` (one line naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
        raise RobustnessError(f"{name} {value!r}: give a whole number from {low} to {high:,}")
    return int(value)


def check_block(name: str, value: float | None, n: int) -> float:
    """A mean block length (None: ``default_block(n)``) between 1 and the series' length."""
    if value is None:
        return float(default_block(n))
    v = float(value)
    if not (math.isfinite(v) and 1 <= v <= max(1, n)):
        raise RobustnessError(
            f"{name} {value!r}: give a block length from 1 to {max(1, n)} (the series' length)"
        )
    return v
