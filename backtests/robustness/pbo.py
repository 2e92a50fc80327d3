"""The Probability of Backtest Overfitting by combinatorially symmetric cross-validation (CSCV).

Bailey, D. H., Borwein, J., López de Prado, M. and Zhu, Q. J. (2017), "The Probability of Backtest
Overfitting", J. of Computational Finance 20(4), section 2: the ``T × N`` matrix of the ``N`` trials'
per-period returns is cut into ``S`` blocks of consecutive rows; for every choice of ``S/2`` blocks as the
in-sample set ``J`` (the rest, ``J̄``, out of sample) the trial with the best in-sample Sharpe ratio is
found, its out-of-sample Sharpe ratio ranked among all trials' (``ω̄ = rank / (N + 1)``), and the logit
``λ = ln(ω̄ / (1 − ω̄))`` recorded. PBO is the share of choices with ``λ ≤ 0``: how often the in-sample
winner is at or below the median out of sample. Every block is once in and once out of sample in
symmetric pairs, so the estimate does not depend on one arbitrary split.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from backtests.robustness.errors import RobustnessError

MAX_COMBINATIONS = 200_000  # C(S, S/2) above this is refused (S = 20 gives 184,756)
_CHUNK = 2048  # combinations per vectorised step (bounded memory: CHUNK × N floats)


@dataclass(frozen=True)
class Overfitting:
    """CSCV's results: PBO, the distribution of logits, and the in-sample winners' out-of-sample fate."""

    pbo: float  # P(λ ≤ 0)
    splits: int  # S
    combinations: int  # C(S, S/2)
    trials: int  # N
    periods: int  # T used (a multiple of S; the oldest T mod S rows are left out)
    logit_median: float
    prob_oos_loss: float  # share of choices whose in-sample winner has an out-of-sample Sharpe ratio < 0
    degradation_slope: float | None  # least-squares slope of OOS on IS Sharpe of the winners (paper §2.4)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _block_moments(m: np.ndarray, splits: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per block: the column sums and sums of squares ``(S, N)``, and the block length."""
    t, n = m.shape
    size = t // splits
    rows = m[t - size * splits :].reshape(splits, size, n)  # (S, T/S, N): the newest S·(T/S) rows
    return rows.sum(axis=1), (rows * rows).sum(axis=1), size


def _sharpes(s: np.ndarray, sq: np.ndarray, count: int) -> np.ndarray:
    """Sharpe ratios from sums over ``count`` rows; a flat series (zero variance) scores 0.

    Each step writes into the array of the step before (the same operations, in the same order, as
    ``sqrt(max(sq - s·mean, 0) / (count - 1))``): the arrays of a chunk are too large for the caches, and
    a new one per step cost more than the arithmetic."""
    mean = s / count
    sd = s * mean
    np.subtract(sq, sd, out=sd)
    np.maximum(sd, 0.0, out=sd)
    np.divide(sd, count - 1, out=sd)
    np.sqrt(sd, out=sd)
    floor = np.abs(mean)
    np.maximum(floor, 1.0, out=floor)
    np.multiply(floor, 1e-15, out=floor)
    out = np.zeros_like(mean)
    np.divide(mean, sd, out=out, where=np.greater(sd, floor, out=np.empty(sd.shape, dtype=bool)))
    return out


def probability_of_overfitting(returns: np.ndarray, splits: int = 16) -> Overfitting:
    """CSCV over ``returns (T, N)``: T periods (rows) of N trials (columns); ``splits`` S even, ≥ 2."""
    m = np.asarray(returns, dtype=np.float64)
    if m.ndim != 2:
        raise RobustnessError(f"PBO needs a (periods, trials) matrix, got shape {m.shape}")
    t, n = m.shape
    if splits < 2 or splits % 2:
        raise RobustnessError(f"PBO splits must be an even number >= 2, got {splits}")
    if n < 2:
        raise RobustnessError(f"PBO needs at least 2 trials (passes), got {n}")
    if t < 2 * splits:
        raise RobustnessError(
            f"PBO with {splits} splits needs at least {2 * splits} periods (2 per block), got {t}"
        )
    if not np.isfinite(m).all():
        raise RobustnessError("PBO: the return matrix holds NaN or infinite values")
    total = _count(splits)
    if total > MAX_COMBINATIONS:
        raise RobustnessError(f"PBO with {splits} splits needs {total} combinations; give at most 20 splits")
    bs, bsq, size = _block_moments(m, splits)
    half = splits // 2
    combos = np.array(list(combinations(range(splits), half)), dtype=np.int64)  # (C, S/2)
    logits, is_best, oos_best = [], [], []
    for a in range(0, len(combos), _CHUNK):
        chunk = combos[a : a + _CHUNK]
        mask = np.zeros((len(chunk), splits))
        np.put_along_axis(mask, chunk, 1.0, axis=1)  # (C', S): 1 for the in-sample blocks
        r_in = _sharpes(mask @ bs, mask @ bsq, half * size)  # (C', N)
        r_out = _sharpes((1 - mask) @ bs, (1 - mask) @ bsq, half * size)
        rows = np.arange(len(chunk))
        best = np.argmax(r_in, axis=1)  # the first of equal in-sample bests
        omega = _average_rank(r_out, r_out[rows, best]) / (n + 1)
        logits.append(np.log(omega / (1 - omega)))
        is_best.append(r_in[rows, best])
        oos_best.append(r_out[rows, best])
    lam, r_is, r_oos = (np.concatenate(v) for v in (logits, is_best, oos_best))
    spread = float(np.var(r_is))
    slope = float(np.mean((r_is - r_is.mean()) * (r_oos - r_oos.mean())) / spread) if spread > 1e-24 else None
    return Overfitting(
        pbo=float(np.mean(lam <= 0)),
        splits=splits,
        combinations=len(lam),
        trials=n,
        periods=size * splits,
        logit_median=float(np.median(lam)),
        prob_oos_loss=float(np.mean(r_oos < 0)),
        degradation_slope=slope,
    )


def _average_rank(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """The rank of ``chosen[i]`` among row ``values[i]`` (1..N, ties sharing their average rank, as
    ``scipy.stats.rankdata``'s default): the values below it, plus the middle of its run of equals. Only
    the in-sample winner's rank is needed, so counting is enough; sorting each row cost 10× more."""
    below = np.count_nonzero(values < chosen[:, None], axis=1)
    equal = np.count_nonzero(values == chosen[:, None], axis=1)
    return below + (equal + 1) / 2


def _count(splits: int) -> int:
    from math import comb

    return comb(splits, splits // 2)
