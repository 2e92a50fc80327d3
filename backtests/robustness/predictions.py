"""How sure the prediction figures are: bootstrap confidence intervals and tests against each baseline.

From the forward bars' per-bar classes (and a forecaster's per-bar losses) that the prediction report
keeps (``predictions.series``):
- balanced accuracy of the model and of each baseline with per-bar predictions, and the MSE of the
  model's and the baselines' forecasts, each with a 95 % percentile interval from the stationary bootstrap
  over bars (Politis & Romano 1994: blocks of mean length ``block`` bars, default ``n^(1/3)``, because
  neighbouring bars' labels overlap);
- McNemar's test of the model against each classifier baseline on the bars both decided (the constant
  "always class 0" baseline included), and the Diebold-Mariano test (HLN-corrected, horizon = the
  forecast length) of the model's losses against each baseline's.
"""

from __future__ import annotations

import numpy as np

from backtests.robustness.bootstrap import check_block, percentile_interval, stationary_indices
from backtests.robustness.compare import diebold_mariano, mcnemar
from backtests.robustness.errors import RobustnessError

MIN_BARS = 10
_CHUNK = 200  # bootstrap replicates per vectorised step


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray, classes: int) -> np.ndarray:
    """Balanced accuracy (mean recall over the classes present) of each row of ``(B, n)`` arrays."""
    recalls = []
    for c in range(classes):
        real = y_true == c
        support = real.sum(axis=-1)
        hit = (real & (y_pred == c)).sum(axis=-1)
        recalls.append(np.where(support > 0, hit / np.maximum(support, 1), np.nan))
    return np.nanmean(np.stack(recalls), axis=0)


def _interval(stat, columns: list[np.ndarray], reps: int, block: float, rng) -> dict:
    """The statistic on the bars and its bootstrap interval (``stat``: ``(B, n)`` resamples -> ``(B,)``)."""
    n = len(columns[0])
    values = []
    for a in range(0, reps, _CHUNK):
        idx = stationary_indices(rng, n, min(_CHUNK, reps - a), block)
        values.append(stat(*(c[idx] for c in columns)))
    low, high = percentile_interval(np.concatenate(values))
    point = float(stat(*(c[None, :] for c in columns))[0])
    return {"value": point, "low": low, "high": high, "bars": n}


def _scored(series: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true and predicted classes per bar, and the bars that have both (-1: none): those resampled."""
    y_true = np.asarray(series["y_true"], dtype=np.int64)
    y_pred = np.asarray(series["y_pred"], dtype=np.int64)
    return y_true, y_pred, (y_true >= 0) & (y_pred >= 0)


def scored_bars(predictions: dict) -> int:
    """How many bars the prediction bootstrap resamples (its block length is at most that)."""
    return int(_scored(predictions["series"])[2].sum())


def prediction_robustness(
    predictions: dict, *, reps: int = 1000, block: float | None = None, seed: int = 0, level: float = 0.95
) -> dict:
    """Intervals and tests for a prediction report that holds ``series``; raises ``RobustnessError`` when
    it has none or too few forward bars."""
    series = predictions.get("series")
    if not series:
        raise RobustnessError("the prediction report has no per-bar series (a report of an older version)")
    classes = len(predictions["classes"])
    y_true, y_pred, rows = _scored(series)
    if rows.sum() < MIN_BARS:
        raise RobustnessError(
            f"prediction intervals need at least {MIN_BARS} forward bars with a prediction, "
            f"got {int(rows.sum())}"
        )
    block = check_block("--block", block, int(rows.sum()))
    rng = np.random.default_rng([seed, 7])

    def bacc(t, p):
        return balanced_accuracy(t, p, classes)

    out: dict = {"level": level, "reps": reps, "block": block, "seed": seed, "balanced_accuracy": {}}
    out["balanced_accuracy"]["model"] = _interval(bacc, [y_true[rows], y_pred[rows]], reps, block, rng)
    baselines = {"always_" + str(predictions["classes"][0]): np.zeros_like(y_pred)}
    baselines.update({k: np.asarray(v, dtype=np.int64) for k, v in series["baselines"].items()})
    tests = {}
    for name, pred in baselines.items():
        both = rows & (pred >= 0)
        if both.sum() < MIN_BARS:
            continue
        if name in series["baselines"]:
            mask = (y_true >= 0) & (pred >= 0)
            out["balanced_accuracy"][name] = _interval(bacc, [y_true[mask], pred[mask]], reps, block, rng)
        tests[name] = mcnemar(y_pred[both] == y_true[both], pred[both] == y_true[both]).to_dict()
    out["mcnemar"] = tests
    if series.get("losses"):
        out.update(_forecasts(series, reps, block, rng))
    return out


def _forecasts(series: dict, reps: int, block: float, rng) -> dict:
    """MSE intervals of the model and the baselines, and Diebold-Mariano tests of the model against each."""
    losses = {
        k: np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
        for k, vals in series["losses"].items()
    }
    model = losses["model"]
    horizon = int(series.get("loss_horizon") or 1)
    mse, dm = {}, {}
    for name, loss in losses.items():
        ok = np.isfinite(loss)
        if ok.sum() >= MIN_BARS:
            mse[name] = _interval(lambda x: x.mean(axis=-1), [loss[ok]], reps, block, rng)
        both = ok & np.isfinite(model)
        if name != "model" and both.sum() >= max(MIN_BARS, 2 * horizon):
            try:
                dm[name] = diebold_mariano(model[both], loss[both], horizon).to_dict()
            except RobustnessError as exc:
                dm[name] = {"error": str(exc)}
    return {"mse": mse, "diebold_mariano": dm}
