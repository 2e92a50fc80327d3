"""The optimisation's robustness: a grid of pure-noise strategies is not significant, a real edge among
them is; the walk-forward gives each window's PBO; the figures are the same after a resume."""

from __future__ import annotations

import numpy as np
import pytest
from robust_helpers import RandomEA, candles
from threadpoolctl import threadpool_info, threadpool_limits

from backtests.optimize import optimize, walk_forward
from backtests.robustness.errors import RobustnessError
from backtests.robustness.optimisation import check_options, optimisation_robustness
from backtests.robustness.pbo import probability_of_overfitting
from nn.threads import USER_VARIABLES


def test_a_noise_grid_through_the_optimiser_is_not_significant():
    """Twenty random traders (the seed is the searched parameter) on i.i.d. bars: the best by balance is
    luck, and the DSR and the SPA test say so."""
    df = candles(2400, 9)  # 100 days
    table = optimize(df, RandomEA, {"seed": "1:20"}, workers=0, seed=1)
    r = table.attrs["robustness"]
    assert r["passes"] == 20 and r["periods"] == 100 and r["best_pass"] == int(table.iloc[0]["pass"])
    assert not r["deflated_sharpe"]["significant"] and r["deflated_sharpe"]["dsr"] < 0.95
    assert r["spa"]["spa_p"] > 0.05 and r["spa"]["reality_check_p"] > 0.05
    assert 0.0 <= r["pbo"]["pbo"] <= 1.0 and r["pbo"]["combinations"] == 12870


def test_noise_grids_have_high_pbo_and_insignificant_dsr():
    """Many independent noise grids: PBO above 0.4 on average, the DSR significant in about 5 % of them."""
    pbos, significant = [], 0
    for seed in range(20):
        m = np.random.default_rng(seed).normal(0.0, 0.01, (300, 40))
        r = optimisation_robustness(
            ((k, list(m[:, k])) for k in range(40)), int(np.argmax(m.mean(0))), reps=200
        )
        pbos.append(r["pbo"]["pbo"])
        significant += r["deflated_sharpe"]["significant"]
    assert np.mean(pbos) > 0.4 and significant <= 3


def test_a_real_edge_among_noise_is_significant():
    m = np.random.default_rng(3).normal(0.0, 0.01, (300, 40))
    m[:, 11] += 0.006
    r = optimisation_robustness(((k, list(m[:, k])) for k in range(40)), 11, reps=500)
    assert r["deflated_sharpe"]["significant"] and r["pbo"]["pbo"] < 0.05 and r["spa"]["spa_p"] < 0.01


def test_walk_forward_reports_each_windows_pbo():
    df = candles(2400, 5)
    wf = walk_forward(df, RandomEA, {"seed": "1:8"}, 1200, 600, workers=0)
    assert len(wf.windows["pbo"]) == 2 and all(0 <= p <= 1 for p in wf.windows["pbo"])
    assert wf.summary["pbo"] == pytest.approx(np.mean(wf.windows["pbo"]))


def test_too_few_days_is_a_reason_not_a_crash():
    table = optimize(candles(200, 1), RandomEA, {"seed": "1:4"}, workers=0)
    r = table.attrs["robustness"]
    assert "needs at least 32 periods" in r["pbo"]["error"] and "dsr" in r["deflated_sharpe"]


@pytest.mark.parametrize("reps, splits", [(0, 16), (10**9, 16), (1000, 7), (1000, 22)])
def test_bad_options_are_one_line(reps, splits):
    with pytest.raises(RobustnessError) as info:
        check_options(reps, splits)
    assert "\n" not in str(info.value)


def _blas_threads() -> int:
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def test_the_statistics_run_blas_on_one_thread_with_the_figures_of_several(monkeypatch):
    """OpenBLAS's threads spin while they wait for each other, which on busy cores cost more than the
    statistics' small products: they run on one thread, giving the figures BLAS gives on two; a thread
    count the user set is kept."""
    import backtests.robustness.optimisation as robustness

    m = np.random.default_rng(4).normal(0.0, 0.01, (208, 60))
    rows = [(k, list(m[:, k])) for k in range(60)]
    seen = []

    def spy(matrix, splits):
        seen.append(_blas_threads())
        return probability_of_overfitting(matrix, splits)

    with threadpool_limits(limits=2, user_api="blas"):
        on_two = probability_of_overfitting(m, 16).to_dict()
        monkeypatch.setattr(robustness, "probability_of_overfitting", spy)
        for name in USER_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        got = optimisation_robustness(rows, 7, reps=200)
        assert seen == [1] and got["pbo"] == on_two and _blas_threads() == 2  # restored after
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
        assert optimisation_robustness(rows, 7, reps=200) == got and seen == [1, 2]
