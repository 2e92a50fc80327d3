"""Where and how finely the look-ahead check compares an indicator's prefixes with its whole history
(``backtests.replay.causal_indicator``, ``check_causal``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd


def before_pauses(time: pd.DatetimeIndex, first: int, count: int) -> set[int]:
    """The prefixes ending on the last bar before each of the first ``count`` pauses in trading (a
    weekend, a holiday: a step between bars longer than the usual one) from where the values begin. A
    look-ahead written on those bars only (the weekend's gap, read with ``shift(-1)`` on Friday's last bar)
    shows at no other prefix: one H1 bar in 120, which neither the run nor three spread probes meet."""
    if len(time) < 3:
        return set()
    steps = np.diff(time.asi8)
    after = np.flatnonzero(steps > np.median(steps))  # bar i is followed by a pause
    return {int(i) + 1 for i in after[after >= first][:count] if i + 1 < len(time)}


def typical_magnitude(full: np.ndarray) -> np.ndarray:
    """Each column's median magnitude over its finite non-zero values (0 for a column of none). A float32
    network's rounding is a few ulps of the terms it sums, not of its output: an output crossing zero
    (1e-4 from terms of order 1) moves far more than its own ulps for another batch, and a fixed 1e-8
    floor refused it; a variance of minute returns (1e-9) moved by a look-ahead passed that floor
    whole."""
    if not full.size:
        return np.zeros(full.shape[1:])
    cols = np.abs(full.reshape(len(full), -1))
    cols = np.where(np.isfinite(cols) & (cols > 0), cols, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column of no such values
        typical = np.nan_to_num(np.nanmedian(cols, axis=0))
    return typical.reshape(full.shape[1:])
