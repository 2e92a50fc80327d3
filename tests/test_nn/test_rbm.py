"""RBM training: CD-1 statistics against exact expectations, likelihood, reproducibility, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.rbm import RBMConfig, _batch_bounds, cd_chain, train_rbm
from nn.rbm_exact import all_states, log_partition, mean_log_likelihood
from nn.rbm_ops import HYPER, LR, RBMState
from nn.rbm_ops_numpy import sigmoid


def _state(be, w, b, c):
    nh, nv = w.shape
    hyper = np.zeros(HYPER)
    hyper[LR] = 1.0  # lr 1, momentum 0, no penalties: g_prev holds the raw CD statistics
    return RBMState(w=be.asarray(w), b=be.asarray(b), c=be.asarray(c), w_inc=be.zeros((nh, nv)),
                    b_inc=be.zeros((nv,)), c_inc=be.zeros((nh,)), on_frac=be.asarray(np.full(nh, 0.5)),
                    g_prev=be.zeros((nh, nv)), hyper=be.asarray(hyper))


def _exact_cd1(v1, w, b, c, mean_field):
    """E[h_data·v1ᵀ − q2·v2ᵀ] of one CD-1 step from v1, summing over every hidden (and visible) state."""
    q1 = sigmoid(w @ v1 + c)
    neg = np.zeros_like(w)
    for h in all_states(w.shape[0]):
        ph = np.prod(np.where(h > 0, q1, 1.0 - q1))
        p = sigmoid(b + w.T @ h)
        if mean_field:
            neg += ph * np.outer(sigmoid(c + w @ p), p)
            continue
        for v2 in all_states(w.shape[1]):
            pv = np.prod(np.where(v2 > 0, p, 1.0 - p))
            neg += ph * pv * np.outer(sigmoid(c + w @ v2), v2)
    return np.outer(q1, v1) - neg


@pytest.mark.parametrize("mean_field", [True, False])
def test_cd1_statistics_match_exact_expectation(backend, mean_field):
    be = nn.get_backend(backend)
    rng = np.random.default_rng(3)
    nv, nh, n = 4, 3, 40000
    w, b, c = rng.normal(size=(nh, nv)), rng.normal(size=nv), rng.normal(size=nh)
    v1 = np.array([1.0, 0.0, 1.0, 1.0])
    st = _state(be, w, b, c)
    x = be.asarray(np.tile(v1, (n, 1)))
    q1 = be.rbm_hidden_probs(x, st.w, st.c)
    h_data, v2, q2, _, _ = cd_chain(be, st, x, q1, 1, mean_field, seed=11, counter=0)
    be.rbm_update(st, x, h_data, q1, v2, q2, be.zeros((nv,)), weight_penalty=0.0, sparsity_penalty=0.0,
                  sparsity_target=0.0)
    got = be.to_numpy(st.g_prev)
    want = _exact_cd1(v1, w, b, c, mean_field)
    # each element is a mean of n bounded terms: 5 standard errors of a [−1, 1] variable
    np.testing.assert_allclose(got, want, atol=5.0 / np.sqrt(n))
    assert np.abs(want).max() > 0.05  # the statistics are not trivially zero


def test_exact_log_partition_by_brute_force():
    rng = np.random.default_rng(0)
    w, b, c = rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=2)
    total = sum(np.exp(b @ v + c @ h + h @ w @ v) for v in all_states(3) for h in all_states(2))
    assert log_partition(w, b, c) == pytest.approx(np.log(total))


def _toy(rng, n=300):
    patterns = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 0]], dtype=float)
    x = patterns[rng.integers(0, 3, n)]
    flip = rng.uniform(size=x.shape) < 0.05
    return np.where(flip, 1.0 - x, x)


def test_training_raises_exact_log_likelihood(backend):
    be = nn.get_backend(backend)
    x = _toy(np.random.default_rng(1))
    short = RBMConfig(n_hidden=4, n_rand=20, n_batches=10, max_epochs=1, seed=5)
    start = train_rbm(be, x, short)
    fit = train_rbm(be, x, RBMConfig(n_hidden=4, n_rand=20, n_batches=10, max_epochs=60, seed=5))
    before = mean_log_likelihood(x, start.w, start.b, start.c)
    after = mean_log_likelihood(x, fit.w, fit.b, fit.c)
    assert after > before + 0.3, (before, after)
    assert fit.history[-1].recon_rms < fit.history[0].recon_rms


def test_same_seed_same_weights_and_seed_matters(backend):
    be = nn.get_backend(backend)
    x = _toy(np.random.default_rng(2), 100)
    cfg = RBMConfig(n_hidden=3, n_rand=5, n_batches=4, max_epochs=3, seed=9, mean_field=False, chain_end=2)
    a, b = train_rbm(be, x, cfg), train_rbm(be, x, cfg)
    np.testing.assert_array_equal(a.w, b.w)
    other = train_rbm(be, x, RBMConfig(**{**cfg.__dict__, "seed": 10}))
    assert not np.array_equal(a.w, other.w)


def test_opencl_training_follows_reference(device_backend):
    """Same seed: the device run stays close to the float64 reference over a few epochs."""
    x = _toy(np.random.default_rng(4), 120)
    cfg = RBMConfig(n_hidden=5, n_rand=8, n_batches=6, max_epochs=3, seed=2)
    ref, dev = train_rbm(nn.get_backend("numpy"), x, cfg), train_rbm(nn.get_backend(device_backend), x, cfg)
    assert [h.chain for h in ref.history] == [h.chain for h in dev.history]
    np.testing.assert_allclose(dev.w, ref.w, atol=2e-3)
    assert dev.initial_error == pytest.approx(ref.initial_error, rel=1e-5)


def test_batches_partition_the_cases():
    bounds = _batch_bounds(10, 3)
    assert bounds == [(0, 3), (3, 6), (6, 10)]


@pytest.mark.parametrize(
    ("x", "match"),
    [(np.array([[0.5, 1.5]]), "row 0, column 1"), (np.array([[np.nan]]), "row 0, column 0"),
     (np.zeros((0, 3)), "non-empty")],
)
def test_bad_input_is_one_clear_error(x, match):
    with pytest.raises(ValueError, match=match):
        train_rbm(nn.get_backend("numpy"), x, RBMConfig(n_hidden=2))


@pytest.mark.parametrize(("field", "value"), [("n_hidden", 0), ("momentum_end", 1.5), ("recon", "rms"),
                                              ("learning_rate", float("nan"))])
def test_bad_config_names_the_parameter(field, value):
    with pytest.raises(ValueError, match=field):
        RBMConfig(**{"n_hidden": 3, field: value})


def test_initial_search_in_chunks_and_groups_finds_the_same_weights(backend, monkeypatch):
    """Tries split into groups and cases into chunks (small memory bounds) pick the same best try."""
    import nn.rbm as rbm_mod

    be = nn.get_backend(backend)
    x = _toy(np.random.default_rng(6), 50)
    means = rbm_mod.data_means(x)
    whole = rbm_mod.initial_weights(be, be.asarray(x), means, 3, 7, np.random.default_rng(1))
    monkeypatch.setattr(rbm_mod, "_TRY_ELEMENTS", 3 * 6 * 2)  # groups of 2 tries, chunks of 3 cases
    parts = rbm_mod.initial_weights(be, be.asarray(x), means, 3, 7, np.random.default_rng(1))
    np.testing.assert_array_equal(whole[0], parts[0])
    assert parts[3] == pytest.approx(whole[3], rel=1e-5)


@pytest.mark.parametrize(("recon", "direct"), [("ce", False), ("mse", True), ("ce", True)])
def test_error_measures_and_forms(backend, recon, direct):
    """Cross entropy and the direct (mean-field) form: finite, falling, and equal to a host recomputation
    of the direct MSE at the final weights within the last epoch's drift."""
    be = nn.get_backend(backend)
    x = _toy(np.random.default_rng(8), 120)
    fit = train_rbm(be, x, RBMConfig(n_hidden=4, n_rand=5, n_batches=4, max_epochs=25, seed=3, recon=recon,
                                     direct_error=direct))
    errs = [h.recon_rms for h in fit.history]
    assert all(np.isfinite(errs)) and errs[-1] < errs[0]
    if recon == "mse" and direct:
        from nn.rbm_ops_numpy import sigmoid

        p = sigmoid(sigmoid(x @ fit.w.T + fit.c) @ fit.w + fit.b)
        assert np.sqrt(((p - x) ** 2).mean()) == pytest.approx(errs[-1], rel=0.1)


def test_sampled_feed_of_upper_layers(backend):
    be = nn.get_backend(backend)
    probs = np.random.default_rng(2).uniform(size=(60, 5))
    fit = train_rbm(be, probs, RBMConfig(n_hidden=3, n_rand=3, n_batches=3, max_epochs=3), sample_input=True)
    assert np.isfinite(fit.w).all() and len(fit.history) == 3


@pytest.mark.parametrize(("no_imp", "lr_out"), [(0, 0.5), (50, 0.5), (51, 0.03), (101, 0.02), (151, 0.01),
                                                 (201, 0.005), (251, 0.002), (1000, 0.002)])
def test_epoch_schedule_caps_creep_and_chain(no_imp, lr_out):
    from nn.rbm import epoch_schedule

    cfg = RBMConfig(n_hidden=2, momentum_end=0.9, chain_start=1, chain_end=5, chain_rate=0.1)
    lr, mom, chain = epoch_schedule(0.5, 0.1, 1.0, no_imp, cfg)
    assert lr == pytest.approx(lr_out)
    assert mom == pytest.approx(0.99 * 0.1 + 0.01 * 0.9) and chain == pytest.approx(0.9 + 0.5)
    assert epoch_schedule(0.001, 0.1, 1.0, 300, cfg)[0] == 0.001  # caps never raise the rate


def test_adapt_lr_matches_the_rule():
    from nn.rbm_ops_numpy import adapt_lr

    assert adapt_lr(0.1, 0.6) == pytest.approx(0.12) and adapt_lr(0.1, 0.4) == pytest.approx(0.11)
    assert adapt_lr(0.1, -0.6) == pytest.approx(0.1 / 1.2) and adapt_lr(0.1, -0.4) == pytest.approx(0.1 / 1.1)
    assert adapt_lr(0.1, 0.0) == 0.1 and adapt_lr(0.9, 0.9) == 1.0 and adapt_lr(0.001, -0.9) == 0.001
