"""Sharpe ratios corrected for non-normal returns and for the number of strategies tried.

Bailey, D. H. and López de Prado, M. (2012), "The Sharpe Ratio Efficient Frontier", J. of Risk 15(2): the
Probabilistic Sharpe Ratio (PSR) is the probability that the true Sharpe ratio exceeds a benchmark ``SR*``
given the estimate's sample length, skewness and kurtosis. Bailey, D. H. and López de Prado, M. (2014),
"The Deflated Sharpe Ratio: Correcting for Selection Bias, Backtest Overfitting and Non-Normality",
J. of Portfolio Management 40(5): the Deflated Sharpe Ratio (DSR) is the PSR whose benchmark is the Sharpe
ratio the best of ``N`` unskilled trials would reach by luck alone, given the spread of the trials' Sharpe
ratios (the False Strategy theorem, their eq. 2). All Sharpe ratios here are per period, not annualised,
as the papers use them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from backtests.robustness.errors import RobustnessError

EULER_GAMMA = 0.5772156649015329  # the Euler-Mascheroni constant of the False Strategy theorem


def sharpe(returns: np.ndarray) -> float:
    """Mean over standard deviation (ddof=1) of per-period returns ``(T,)``; raises on zero variance."""
    r = np.asarray(returns, dtype=np.float64)
    if len(r) < 2:
        raise RobustnessError(f"a Sharpe ratio needs at least 2 returns, got {len(r)}")
    sd = float(r.std(ddof=1))
    if not sd > 0:
        raise RobustnessError("the returns have zero variance: their Sharpe ratio is undefined")
    return float(r.mean()) / sd


def probabilistic_sharpe(sr: float, benchmark: float, t: int, skew: float, kurtosis: float) -> float:
    """PSR(SR*) = Φ((SR − SR*)·√(T − 1) / √(1 − γ3·SR + (γ4 − 1)/4·SR²)) (Bailey & López de Prado 2012,
    eq. 11; 2014, eq. 1): ``kurtosis`` is γ4, the plain (not excess) kurtosis, 3 for normal returns."""
    if t < 2:
        raise RobustnessError(f"the probabilistic Sharpe ratio needs at least 2 returns, got {t}")
    var = 1.0 - skew * sr + (kurtosis - 1.0) / 4.0 * sr * sr
    if not var > 0:
        raise RobustnessError("the Sharpe ratio's variance estimate is not positive for these moments")
    return float(stats.norm.cdf((sr - benchmark) * math.sqrt(t - 1) / math.sqrt(var)))


def expected_max_sharpe(trials: int, variance: float, mean: float = 0.0) -> float:
    """E[max SR] of ``trials`` unskilled strategies whose Sharpe ratios have this variance (Bailey & López
    de Prado 2014, eq. 2): √V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e))), γ Euler's constant."""
    if trials < 2:
        raise RobustnessError(f"the expected maximum Sharpe ratio needs at least 2 trials, got {trials}")
    z = (1.0 - EULER_GAMMA) * stats.norm.ppf(1.0 - 1.0 / trials)
    z += EULER_GAMMA * stats.norm.ppf(1.0 - 1.0 / (trials * math.e))
    return mean + math.sqrt(max(variance, 0.0)) * float(z)


@dataclass(frozen=True)
class Deflated:
    """The Deflated Sharpe Ratio of a selected strategy and what went into it (per-period figures)."""

    sharpe: float  # the selected strategy's Sharpe ratio
    benchmark: float  # SR*_0: the expected best Sharpe ratio of ``trials`` unskilled ones
    dsr: float  # PSR(SR*_0): the probability that the true Sharpe ratio beats SR*_0
    trials: int
    trials_variance: float  # V[SR_n] over the trials
    observations: int
    skew: float
    kurtosis: float

    @property
    def significant(self) -> bool:
        """DSR ≥ 0.95: the paper's rejection of "the edge is luck" at the 5 % level."""
        return self.dsr >= 0.95

    def to_dict(self) -> dict:
        return {**asdict(self), "significant": self.significant}


def deflated_sharpe(returns: np.ndarray, trial_sharpes: np.ndarray) -> Deflated:
    """DSR of the strategy with per-period ``returns (T,)`` selected among trials whose Sharpe ratios are
    ``trial_sharpes (N,)`` (its own included); skewness and kurtosis are the sample's (biased, as the paper's
    moments)."""
    r = np.asarray(returns, dtype=np.float64)
    srs = np.asarray(trial_sharpes, dtype=np.float64)
    srs = srs[np.isfinite(srs)]
    sr = sharpe(r)
    if len(srs) < 2:
        raise RobustnessError(
            f"the Deflated Sharpe Ratio needs at least 2 trials with a Sharpe ratio, got {len(srs)}"
        )
    var = float(srs.var(ddof=1))
    g3, g4 = float(stats.skew(r)), float(stats.kurtosis(r, fisher=False))
    sr0 = expected_max_sharpe(len(srs), var)
    return Deflated(sr, sr0, probabilistic_sharpe(sr, sr0, len(r), g3, g4), len(srs), var, len(r), g3, g4)
