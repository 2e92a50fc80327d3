"""Prediction intervals and tests from the report's per-bar series: the point figures are the report's,
McNemar's counts are the bars where only one is right, Diebold-Mariano compares per-bar losses."""

from __future__ import annotations

import numpy as np
import pytest

from backtests.metrics import prediction_report
from backtests.robustness.errors import RobustnessError
from backtests.robustness.predictions import prediction_robustness


def _evaluated(n=600, seed=0, skill=0.6):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 3, n)
    y_pred = np.where(rng.random(n) < skill, y_true, rng.integers(0, 3, n))
    base = np.where(rng.random(n) < 0.4, y_true, rng.integers(0, 3, n))
    y_true[:5] = -1  # bars without a label
    return {"classes": ["none", "up", "down"], "y_true": y_true, "y_pred": y_pred, "proba": None,
            "baselines": {"logistic_regression": base}}  # fmt: skip


def test_intervals_hold_the_reports_figures_and_mcnemar_counts_disagreements():
    ev = _evaluated()
    pred = prediction_report(ev, 100, 600)
    r = prediction_robustness(pred, reps=500, seed=1)
    model = r["balanced_accuracy"]["model"]
    assert model["value"] == pytest.approx(pred["model"]["balanced_accuracy"], abs=1e-6)
    assert model["low"] < model["value"] < model["high"]
    base = r["balanced_accuracy"]["logistic_regression"]
    assert base["value"] == pytest.approx(
        pred["baselines"]["logistic_regression"]["balanced_accuracy"], abs=1e-6
    )
    t, p = (np.asarray(ev[k])[100:] for k in ("y_true", "y_pred"))
    b = np.asarray(ev["baselines"]["logistic_regression"])[100:]
    ok = t >= 0
    test = r["mcnemar"]["logistic_regression"]
    assert test["model_only"] == int(np.sum(ok & (p == t) & (b != t)))
    assert test["baseline_only"] == int(np.sum(ok & (p != t) & (b == t)))
    assert test["p_value"] < 0.001  # 60 % skill against 40 %
    assert r == prediction_robustness(pred, reps=500, seed=1)


def test_forecast_losses_get_mse_intervals_and_diebold_mariano():
    rng = np.random.default_rng(2)
    n = 500
    model = rng.gamma(2.0, 1.0, n)
    naive = model * 1.3 + rng.gamma(1.0, 0.2, n)  # the naive forecast loses more on every bar
    ev = {**_evaluated(n), "losses": {"model": model, "naive": naive, "linear_forecast": model.copy()},
          "loss_horizon": 4}  # fmt: skip
    ev["losses"]["model"][:50] = np.nan  # bars without a complete forecast yet
    pred = prediction_report(ev, 0, n)
    r = prediction_robustness(pred, reps=300, seed=0)
    assert r["mse"]["model"]["value"] == pytest.approx(np.nanmean(ev["losses"]["model"]))
    dm = r["diebold_mariano"]
    assert (
        dm["naive"]["p_value"] < 1e-6 and dm["naive"]["mean_difference"] < 0 and dm["naive"]["horizon"] == 4
    )
    assert "zero" in dm["linear_forecast"]["error"]  # identical losses: no test, and the reason


def test_too_few_bars_or_no_series_is_one_line():
    pred = prediction_report(_evaluated(), 595, 600)
    with pytest.raises(RobustnessError, match="at least 10 forward bars"):
        prediction_robustness(pred)
    with pytest.raises(RobustnessError, match="no per-bar series"):
        prediction_robustness({k: v for k, v in pred.items() if k != "series"})
