"""Each statistic against its paper: worked examples where the paper gives one, hand computations and a
reference implementation (the ``arch`` package) otherwise, and one clear error for data that cannot
support it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from backtests.robustness.bootstrap import stationary_indices
from backtests.robustness.compare import diebold_mariano, mcnemar
from backtests.robustness.errors import RobustnessError
from backtests.robustness.pbo import probability_of_overfitting
from backtests.robustness.sharpe import deflated_sharpe, expected_max_sharpe, probabilistic_sharpe
from backtests.robustness.snooping import data_snooping, kernel_variance


def test_deflated_sharpe_matches_the_papers_numerical_example():
    """Bailey & López de Prado (2014), "The Deflated Sharpe Ratio", section 6's example: 100 trials whose
    annualised Sharpe ratios vary by 1/2, the best at 2.5 annualised over 1,250 daily returns with skewness
    -3 and kurtosis 10: SR*_0 = 0.1132 per day and DSR = 0.9004."""
    sr = 2.5 / math.sqrt(250)
    sr0 = expected_max_sharpe(100, 0.5 / 250)
    assert sr0 == pytest.approx(0.1132, abs=5e-5)
    assert probabilistic_sharpe(sr, sr0, 1250, -3.0, 10.0) == pytest.approx(0.9004, abs=5e-4)


def test_probabilistic_sharpe_of_normal_returns_is_the_textbook_z_test():
    """With γ3 = 0 and γ4 = 3 the PSR's variance is 1 + SR²/2 (Lo 2002's i.i.d. normal case)."""
    sr, t = 0.1, 500
    z = sr * math.sqrt(t - 1) / math.sqrt(1 + sr * sr / 2)
    assert probabilistic_sharpe(sr, 0.0, t, 0.0, 3.0) == pytest.approx(stats.norm.cdf(z), rel=1e-12)


def test_deflated_sharpe_uses_the_sample_moments_and_the_trials_spread():
    rng = np.random.default_rng(3)
    r = rng.standard_t(5, 800) * 0.01 + 0.0008
    srs = rng.normal(0.0, 0.03, 50)
    d = deflated_sharpe(r, srs)
    sr = r.mean() / r.std(ddof=1)
    sr0 = expected_max_sharpe(50, srs.var(ddof=1))
    want = probabilistic_sharpe(sr, sr0, 800, stats.skew(r), stats.kurtosis(r, fisher=False))
    assert (d.sharpe, d.benchmark, d.dsr) == pytest.approx((sr, sr0, want), rel=1e-12)


def test_pbo_of_a_hand_made_two_block_split():
    """S = 2: two choices, each block once in sample. Trial A wins the first block and loses the second,
    trial B the reverse, trial C is flat in both: each in-sample winner is last out of sample, PBO = 1."""
    first = np.array([[0.02, -0.01, 0.0], [0.01, -0.02, 0.0]] * 2)  # (4, 3): A up, B down
    second = -first
    m = np.vstack([first, second])
    m[:, 2] = [0.001, -0.001] * 4  # C: tiny symmetric noise, Sharpe 0 in each block
    o = probability_of_overfitting(m, splits=2)
    assert o.combinations == 2 and o.pbo == 1.0
    # The winner ranks 1 of 3 out of sample: ω = 1/4, λ = ln(1/3).
    assert o.logit_median == pytest.approx(math.log(1 / 3))


def test_pbo_of_pure_noise_is_high_and_of_real_skill_is_low():
    """Noise: the in-sample winner is as likely below the out-of-sample median as above it (CSCV's halves
    share each trial's total, so slightly more often): PBO near 0.5 on average over independent grids,
    though a single grid's estimate varies (0.2 to 0.75 at this size). Skill: PBO near 0."""
    grids = [np.random.default_rng(seed).normal(0.0, 0.01, (400, 30)) for seed in range(20)]
    assert 0.4 < np.mean([probability_of_overfitting(m, 16).pbo for m in grids]) < 0.65
    noise = grids[0]
    skilled = noise.copy()
    skilled[:, 17] += 0.006  # one trial with a real edge
    assert probability_of_overfitting(skilled, 16).pbo < 0.05


@pytest.mark.parametrize(
    "shape, splits", [((10, 3), 16), ((100, 1), 16), ((100, 3), 3), ((100, 3), 0)], ids=str
)
def test_pbo_refuses_what_cannot_be_cross_validated(shape, splits):
    with pytest.raises(RobustnessError):
        probability_of_overfitting(np.ones(shape), splits)


def test_stationary_bootstrap_blocks_are_geometric_with_the_given_mean():
    idx = stationary_indices(np.random.default_rng(1), 1000, 200, 8.0)
    assert idx.shape == (200, 1000) and idx.min() >= 0 and idx.max() < 1000
    continues = (np.diff(idx, axis=1) % 1000) == 1
    assert 1 / (1 - continues.mean()) == pytest.approx(8.0, rel=0.05)  # mean block length
    assert np.array_equal(idx, stationary_indices(np.random.default_rng(1), 1000, 200, 8.0))


def test_kernel_variance_is_the_politis_romano_sum():
    rng = np.random.default_rng(2)
    d = rng.normal(size=(40, 2))
    t, p = 40, 1 / 5
    x = d - d.mean(axis=0)
    want = (x * x).sum(axis=0) / t
    for i in range(1, t):
        kappa = (1 - i / t) * (1 - p) ** i + (i / t) * (1 - p) ** (t - i)
        want += 2 * kappa * (x[: t - i] * x[i:]).sum(axis=0) / t
    assert kernel_variance(d, 5.0) == pytest.approx(want, rel=1e-10)


def test_spa_and_reality_check_agree_with_the_arch_package():
    """arch's SPA is the non-studentised test; with the same data, block and many replicates its three
    p-values and ours agree to the bootstrap's noise, and its upper bound is White's Reality Check."""
    arch = pytest.importorskip("arch.bootstrap")
    rng = np.random.default_rng(1)
    d = rng.normal(0, 1, (500, 20))
    d[:, 3] += 0.1
    d[:, 7] -= 0.3
    ours = data_snooping(d, reps=4000, block=10, seed=3, studentize=False)
    spa = arch.SPA(np.zeros(500), -d, block_size=10, reps=4000, seed=3)
    spa.compute()
    p = spa.pvalues
    assert ours.spa_lower_p == pytest.approx(p["lower"], abs=0.025)
    assert ours.spa_p == pytest.approx(p["consistent"], abs=0.025)
    assert ours.spa_upper_p == pytest.approx(p["upper"], abs=0.025)
    assert ours.reality_check_p == pytest.approx(p["upper"], abs=0.025)


def test_spa_finds_a_real_edge_and_not_noise():
    rng = np.random.default_rng(8)
    noise = rng.normal(0, 1, (400, 30))
    assert data_snooping(noise, reps=500, seed=1).spa_p > 0.05
    noise[:, 4] += 0.4
    edge = data_snooping(noise, reps=500, seed=1)
    assert edge.spa_p < 0.01 and edge.best == 4


def test_mcnemar_matches_agrestis_worked_example():
    """Agresti (2002), Categorical Data Analysis, section 10.1.1: presidential approval of 1,600 people in
    two surveys, 150 approve then disapprove and 86 the reverse: z² = (86 − 150)² / 236 = 17.36."""
    model = np.array([True] * 794 + [True] * 150 + [False] * 86 + [False] * 570)
    baseline = np.array([True] * 794 + [False] * 150 + [True] * 86 + [False] * 570)
    t = mcnemar(model, baseline)
    assert (t.model_only, t.baseline_only) == (150, 86)
    assert t.statistic == pytest.approx(17.356, abs=1e-3)
    assert t.p_value == pytest.approx(2 * stats.binom.cdf(86, 236, 0.5), rel=1e-9)
    assert mcnemar(model, model).p_value == 1.0


def test_diebold_mariano_with_the_hln_correction_by_hand():
    """h = 2: V = (γ0 + 2γ1)/T, DM = d̄/√V, times √((T + 1 − 2h + h(h − 1)/T)/T), Student's t with T − 1."""
    e1 = np.array([0.5, -1.0, 0.3, 0.8, -0.2, 1.1, -0.4, 0.6, 0.9, -0.7])
    e2 = np.array([0.4, -0.6, 0.5, 0.9, -0.1, 0.7, -0.5, 0.3, 1.2, -0.2])
    d = e1**2 - e2**2
    t, h = 10, 2
    x = d - d.mean()
    g0, g1 = (x @ x) / t, (x[1:] @ x[:-1]) / t
    dm = d.mean() / math.sqrt((g0 + 2 * g1) / t)
    hln = dm * math.sqrt((t + 1 - 2 * h + h * (h - 1) / t) / t)
    r = diebold_mariano(e1**2, e2**2, horizon=2)
    assert r.statistic == pytest.approx(hln, rel=1e-12)
    assert r.p_value == pytest.approx(2 * stats.t.sf(abs(hln), t - 1), rel=1e-12)


def test_diebold_mariano_refuses_identical_losses_in_one_line():
    with pytest.raises(RobustnessError, match="zero"):
        diebold_mariano(np.ones(20), np.ones(20))


def test_pbo_ranks_the_out_of_sample_winner_as_scipys_average_ranks_do_ties_included():
    """CSCV needs one rank per split, the in-sample winner's: counting replaces sorting every row."""
    from backtests.robustness.pbo import _average_rank

    rng = np.random.default_rng(3)
    values = rng.integers(0, 4, (400, 30)).astype(np.float64)  # many ties
    values[::7] = 0.0  # whole rows equal (flat passes score 0)
    chosen = rng.integers(0, 30, 400)
    rows = np.arange(400)
    expected = stats.rankdata(values, axis=1)[rows, chosen]
    np.testing.assert_array_equal(_average_rank(values, values[rows, chosen]), expected)


def test_cscv_sharpe_ratios_are_the_plain_formula_bit_for_bit():
    """``pbo._sharpes`` works in place; each ratio is still sqrt(max(sq - s·mean, 0) / (n - 1)) over the
    mean, and 0 for a flat or constant column."""
    from backtests.robustness.pbo import _sharpes

    rng = np.random.default_rng(11)
    s = rng.normal(0, 0.1, (64, 9))
    sq = s * s / 40 + rng.uniform(0, 1e-3, s.shape)
    s[:, 0], sq[:, 0] = 0.0, 0.0  # flat
    sq[:, 1] = s[:, 1] * s[:, 1] / 40  # constant: zero variance up to rounding
    mean = s / 40
    sd = np.sqrt(np.maximum(sq - s * mean, 0.0) / 39)
    expected = np.where(sd > 1e-15 * np.maximum(1.0, np.abs(mean)), mean / np.where(sd > 0, sd, 1), 0.0)
    got = _sharpes(s, sq, 40)
    assert np.array_equal(got, expected) and not got[:, 0].any()
