"""Tests of a model against one baseline on the same bars: McNemar's for classifiers, Diebold-Mariano's
for forecasts.

McNemar, Q. (1947), "Note on the sampling error of the difference between correlated proportions or
percentages", Psychometrika 12(2): only the bars where exactly one of the two is right carry information;
under the null both are right equally often, so the model's share of those ``b + c`` discordant bars is
Binomial(b + c, 1/2). The exact two-sided binomial p-value is given (valid for small counts), with the
chi-square statistic ``(b − c)² / (b + c)``.

Diebold, F. X. and Mariano, R. S. (1995), "Comparing Predictive Accuracy", J. of Business & Economic
Statistics 13(3); Harvey, D., Leybourne, S. and Newbold, P. (1997), "Testing the equality of prediction
mean squared errors", Int. J. of Forecasting 13(2). With ``d_t`` the loss differential (model − baseline)
of ``h``-step forecasts, ``DM = d̄ / √((γ̂0 + 2·Σ_{k<h} γ̂_k) / T)``; HLN's small-sample correction
multiplies it by ``√((T + 1 − 2h + h(h − 1)/T) / T)`` and reads it against Student's t with ``T − 1``
degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from backtests.robustness.errors import RobustnessError


@dataclass(frozen=True)
class McNemar:
    """Paired comparison of two classifiers on the same bars."""

    model_only: int  # b: bars the model got right and the baseline wrong
    baseline_only: int  # c: the other way round
    statistic: float | None  # (b − c)² / (b + c); None without discordant bars
    p_value: float  # exact two-sided binomial
    bars: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def mcnemar(model_right: np.ndarray, baseline_right: np.ndarray) -> McNemar:
    """McNemar's test from per-bar correctness ``(N,)`` booleans of the model and the baseline."""
    a = np.asarray(model_right, dtype=bool)
    z = np.asarray(baseline_right, dtype=bool)
    if a.shape != z.shape:
        raise RobustnessError(f"McNemar: {a.shape} model bars against {z.shape} baseline bars")
    b, c = int(np.sum(a & ~z)), int(np.sum(~a & z))
    if b + c == 0:
        return McNemar(b, c, None, 1.0, len(a))
    p = float(stats.binomtest(b, b + c, 0.5).pvalue)
    return McNemar(b, c, (b - c) ** 2 / (b + c), min(1.0, p), len(a))


@dataclass(frozen=True)
class DieboldMariano:
    """Diebold-Mariano test with the Harvey-Leybourne-Newbold correction."""

    statistic: float  # HLN-corrected DM
    p_value: float  # two-sided, Student's t with T − 1 degrees of freedom
    mean_difference: float  # d̄: model loss − baseline loss (negative: the model is better)
    horizon: int
    observations: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def diebold_mariano(model_loss: np.ndarray, baseline_loss: np.ndarray, horizon: int = 1) -> DieboldMariano:
    """DM-HLN test of equal expected loss from per-forecast losses ``(T,)`` of ``horizon``-step forecasts."""
    d = np.asarray(model_loss, dtype=np.float64) - np.asarray(baseline_loss, dtype=np.float64)
    t = len(d)
    if horizon < 1:
        raise RobustnessError(f"Diebold-Mariano: the horizon must be at least 1, got {horizon}")
    if t < max(3, 2 * horizon):
        raise RobustnessError(
            f"Diebold-Mariano needs at least {max(3, 2 * horizon)} forecasts for horizon {horizon}, got {t}"
        )
    if not np.isfinite(d).all():
        raise RobustnessError("Diebold-Mariano: the losses hold NaN or infinite values")
    x = d - d.mean()
    gamma = [float(x[k:] @ x[: t - k]) / t for k in range(horizon)]
    var = (gamma[0] + 2.0 * sum(gamma[1:])) / t
    if not var > 0:
        raise RobustnessError(
            "Diebold-Mariano: the loss differential has zero (or negative long-run) variance: the model "
            "and the baseline lose the same on every forecast"
        )
    dm = float(d.mean()) / math.sqrt(var)
    h = horizon
    hln = dm * math.sqrt((t + 1 - 2 * h + h * (h - 1) / t) / t)
    p = float(2.0 * stats.t.sf(abs(hln), df=t - 1))
    return DieboldMariano(hln, p, float(d.mean()), h, t)
