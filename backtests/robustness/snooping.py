"""Data-snooping tests of the best of many strategies: White's Reality Check and Hansen's SPA test.

White, H. (2000), "A Reality Check for Data Snooping", Econometrica 68(5); Hansen, P. R. (2005), "A Test
for Superior Predictive Ability", J. of Business & Economic Statistics 23(4). Null hypothesis: no strategy
beats the benchmark (``max_k E[d_k] ≤ 0``, with ``d_k,t`` strategy ``k``'s performance minus the
benchmark's in period ``t``). Both bootstrap the whole ``T × K`` matrix with one stationary-bootstrap
resample per replicate (Politis & Romano 1994), so the dependence across strategies and over time is kept:

- Reality Check: ``V = max_k √T·d̄_k`` against ``V*_b = max_k √T·(d̄*_b,k − d̄_k)``.
- SPA (Hansen's "consistent" p-value): studentised, ``T_SPA = max(max_k √T·d̄_k/ω̂_k, 0)`` against
  ``max(max_k √T·(d̄*_b,k − μ̂_k)/ω̂_k, 0)`` where ``μ̂_k = d̄_k`` only for strategies not far below the
  benchmark (``d̄_k ≥ −√(ω̂²_k/T · 2 ln ln T)``) and 0 for the others, so hopeless strategies do not
  inflate the p-value as they do White's. ``ω̂²_k`` is the stationary bootstrap's own variance estimator
  (Politis & Romano 1994, eq. for the kernel ``κ``; as Hansen 2005 §2.3 and the ``arch`` package do).
Lower and upper bounds (μ̂ = max(d̄, 0) and μ̂ = d̄) are given too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from backtests.robustness.bootstrap import default_block, stationary_indices
from backtests.robustness.errors import RobustnessError

_REPS_CHUNK = 256  # bootstrap replicates per matrix product (bounded memory: CHUNK × T weights)


@dataclass(frozen=True)
class Snooping:
    """p-values of White's Reality Check and Hansen's SPA for the best of ``strategies``."""

    reality_check_p: float
    spa_p: float  # Hansen's consistent p-value
    spa_lower_p: float
    spa_upper_p: float
    statistic: float  # T_SPA
    best: int  # column of the largest studentised mean
    strategies: int
    periods: int
    block: float
    reps: int
    seed: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def kernel_variance(d: np.ndarray, block: float) -> np.ndarray:
    """``ω̂²_k`` of each column of ``d (T, K)``: γ̂0 + 2·Σ_i κ(i)·γ̂_i with the stationary bootstrap's
    kernel κ(i) = (1 − i/T)·(1 − p)^i + (i/T)·(1 − p)^(T − i), p = 1/block; autocovariances by FFT."""
    t = d.shape[0]
    x = d - d.mean(axis=0)
    size = 1 << (2 * t - 1).bit_length()
    f = np.fft.rfft(x, n=size, axis=0)
    gamma = np.fft.irfft(f * np.conj(f), n=size, axis=0)[:t] / t  # (T, K): γ̂_0 .. γ̂_{T-1}
    i = np.arange(1, t)
    p = 1.0 / block
    kappa = (1 - i / t) * (1 - p) ** i + (i / t) * (1 - p) ** (t - i)
    var = gamma[0] + 2.0 * (kappa[:, None] * gamma[1:]).sum(axis=0)
    return np.where(var > 0, var, gamma[0])


def data_snooping(
    d: np.ndarray, *, reps: int = 1000, block: float | None = None, seed: int = 0, studentize: bool = True
) -> Snooping:
    """Reality Check and SPA p-values for ``d (T, K)``: each strategy's per-period performance minus the
    benchmark's (higher is better). ``block``: the stationary bootstrap's mean block length (default
    ``T^(1/3)``). ``studentize=False`` divides by 1 instead of ``ω̂_k`` (the ``arch`` package's SPA,
    which the tests compare with)."""
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    t, k = d.shape
    if t < 3 or k < 1:
        raise RobustnessError(f"the SPA test needs at least 3 periods and 1 strategy, got {t} x {k}")
    if not np.isfinite(d).all():
        raise RobustnessError("the SPA test: the performance matrix holds NaN or infinite values")
    block = float(default_block(t) if block is None else block)
    mean = d.mean(axis=0)
    omega = np.sqrt(kernel_variance(d, block))
    live = omega > 1e-15 * np.maximum(1.0, np.abs(mean))  # a flat strategy cannot be studentised
    if not live.any():
        raise RobustnessError("the SPA test: every strategy's performance has zero variance")
    scale = omega if studentize else np.ones_like(omega)
    root = math.sqrt(t)
    stat = max(float(np.max(root * mean[live] / scale[live])), 0.0)
    v = float(np.max(root * mean))
    threshold = -np.sqrt(omega**2 / t * 2.0 * math.log(math.log(t))) if t > 2 else -np.inf
    centres = {
        "lower": np.maximum(mean, 0.0),
        "consistent": np.where(mean >= threshold, mean, 0.0),
        "upper": mean,
    }
    rng = np.random.default_rng(seed)
    exceed = {key: 0 for key in centres}
    rc_exceed = 0
    for a in range(0, reps, _REPS_CHUNK):
        n = min(_REPS_CHUNK, reps - a)
        idx = stationary_indices(rng, t, n, block)
        weights = np.zeros((n, t))
        np.add.at(weights, (np.repeat(np.arange(n), t), idx.reshape(-1)), 1.0)
        boot = weights @ d / t  # (n, K): each replicate's means
        rc_exceed += int(np.sum(np.max(root * (boot - mean), axis=1) > v))
        for key, mu in centres.items():
            z = root * (boot[:, live] - mu[live]) / scale[live]
            exceed[key] += int(np.sum(np.maximum(np.max(z, axis=1), 0.0) > stat))
    best = int(np.flatnonzero(live)[np.argmax(mean[live] / scale[live])])
    return Snooping(
        reality_check_p=rc_exceed / reps,
        spa_p=exceed["consistent"] / reps,
        spa_lower_p=exceed["lower"] / reps,
        spa_upper_p=exceed["upper"] / reps,
        statistic=stat,
        best=best,
        strategies=k,
        periods=t,
        block=block,
        reps=reps,
        seed=seed,
    )
