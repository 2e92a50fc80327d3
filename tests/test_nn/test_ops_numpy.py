"""The float64 reference ops against central finite differences and closed forms, on awkward sizes."""

from __future__ import annotations

import numpy as np
import pytest

from nn.backend import ACTIVATIONS, Activation
from nn.ops_numpy import NumpyBackend
from nn.random import uniform01

AWKWARD = (1, 3, 5, 17, 130)
SMALL = (1, 3, 5, 17)  # finite differences cost 2 evaluations per element: keep these tensors small
KINDS = [Activation("linear", 0.7, 0.2), *(Activation.of(k) for k in ACTIVATIONS if k != "linear")]


@pytest.fixture
def be() -> NumpyBackend:
    return NumpyBackend()


def _away_from_kinks(x: np.ndarray) -> np.ndarray:
    """relu/lrelu/mae are not differentiable at 0: keep samples at least 0.05 away from it."""
    return np.where(np.abs(x) < 0.05, x + np.sign(x + 1e-12) * 0.1, x)


@pytest.mark.parametrize("act", [a for a in KINDS if a.output_derivable], ids=lambda a: a.kind)
@pytest.mark.parametrize("batch", SMALL)
def test_dense_gradients_match_finite_differences(be, rng, finite_difference, act, batch):
    n_in, n_out = 5, 3
    x = _away_from_kinks(rng.normal(size=(batch, n_in)))
    w = rng.normal(scale=0.5, size=(n_out, n_in))
    b = rng.normal(scale=0.5, size=n_out)
    r = rng.normal(size=(batch, n_out))  # L = Σ r ⊙ y: its gradient w.r.t. y is r

    def loss() -> float:
        return float((be.dense_forward(x, w, b, act) * r).sum())

    y = be.dense_forward(x, w, b, act)
    gw, gb = np.full_like(w, np.nan), np.full_like(b, np.nan)  # poisoned: the op must overwrite
    gx = be.dense_backward(x, w, y, r, act, gw, gb, need_input_grad=True)
    np.testing.assert_allclose(gx, finite_difference(loss, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, finite_difference(loss, w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, finite_difference(loss, b), rtol=1e-6, atol=1e-8)
    assert be.dense_backward(x, w, y, r, act, gw, gb, need_input_grad=False) is None


def test_dense_refuses_activation_not_derivable_from_output(be):
    with pytest.raises(ValueError, match="gelu"):
        be.dense_forward(np.ones((2, 2)), np.ones((2, 2)), np.zeros(2), Activation("gelu"))


@pytest.mark.parametrize("act", KINDS, ids=lambda a: a.kind)
@pytest.mark.parametrize("size", AWKWARD)
def test_activation_gradients_match_finite_differences(be, rng, finite_difference, act, size):
    x = _away_from_kinks(rng.normal(scale=2.0, size=(size, 2)))
    r = rng.normal(size=x.shape)
    y = be.activation_forward(x, act)
    gx = be.activation_backward(x, y, r, act)
    fd = finite_difference(lambda: float((be.activation_forward(x, act) * r).sum()), x)
    np.testing.assert_allclose(gx, fd, rtol=1e-6, atol=1e-8)


def test_activation_closed_forms(be):
    x = np.array([-3.0, -0.5, 0.0, 0.5, 3.0])
    np.testing.assert_allclose(be.activation_forward(x, Activation("sigmoid")), 1 / (1 + np.exp(-x)))
    np.testing.assert_allclose(be.activation_forward(x, Activation("softplus")), np.log(1 + np.exp(x)))
    np.testing.assert_allclose(be.activation_forward(x, Activation.of("lrelu")), np.where(x > 0, x, 0.01 * x))
    np.testing.assert_allclose(be.activation_forward(x, Activation("linear", 2.0, -1.0)), 2 * x - 1)
    # GELU at ±1 from the normal CDF: Φ(1) = 0.8413447460685429
    np.testing.assert_allclose(
        be.activation_forward(np.array([1.0, -1.0]), Activation("gelu")),
        [0.8413447460685429, -(1 - 0.8413447460685429)],
        rtol=1e-12,
    )
    big = np.array([-800.0, 800.0])  # no overflow warnings and exact limits
    np.testing.assert_array_equal(be.activation_forward(big, Activation("sigmoid")), [0.0, 1.0])
    np.testing.assert_array_equal(be.activation_forward(big, Activation("softplus")), [0.0, 800.0])


@pytest.mark.parametrize("classes", AWKWARD)
def test_softmax_gradient_matches_finite_differences(be, rng, finite_difference, classes):
    x = rng.normal(size=(3, classes))
    r = rng.normal(size=x.shape)
    gx = be.softmax_backward(be.softmax_forward(x), r)
    np.testing.assert_allclose(
        gx, finite_difference(lambda: float((be.softmax_forward(x) * r).sum()), x), rtol=1e-6, atol=1e-9
    )


def test_seed_softmax_overflow(be):
    """Seed bug 6: the unshifted exp overflows; a stable softmax gives the exact answer for huge logits."""
    x = np.array([[1000.0, 1000.0, -1000.0], [800.0, 0.0, 799.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = be.softmax_forward(x)
    np.testing.assert_allclose(y[0], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(y[1], [1 / (1 + np.exp(-1.0)), 0.0, np.exp(-1.0) / (1 + np.exp(-1.0))])
    np.testing.assert_allclose(y.sum(axis=1), 1.0)


def test_dropout_mask_uses_counter_based_hash(be):
    shape, rate = (17, 5), 0.3
    m = be.dropout_mask(shape, rate, seed=7, counter=3)
    u = uniform01(7, 3, np.arange(85, dtype=np.uint32)).reshape(shape)
    np.testing.assert_array_equal(m, np.where(u >= rate, 1 / (1 - rate), 0.0))
    assert not np.array_equal(m, be.dropout_mask(shape, rate, seed=7, counter=4))
    big = be.dropout_mask((1000, 130), rate, seed=1, counter=0)
    assert abs((big > 0).mean() - (1 - rate)) < 0.01
    assert abs(big.mean() - 1.0) < 0.02  # inverted dropout keeps the expectation
    np.testing.assert_array_equal(be.dropout_mask((3, 3), 0.0, 1, 1), np.ones((3, 3)))
    with pytest.raises(ValueError, match="rate"):
        be.dropout_mask((2,), 1.0, 0, 0)


@pytest.mark.parametrize("batch", [3, 5, 17])
def test_batchnorm_training_gradient_matches_finite_differences(be, rng, finite_difference, batch):
    f = 4
    x = rng.normal(loc=1.0, scale=2.0, size=(batch, f))
    gamma, beta = rng.normal(size=f), rng.normal(size=f)
    r = rng.normal(size=(batch, f))

    def loss() -> float:
        rm, rv = np.zeros(f), np.ones(f)
        return float((be.batchnorm_forward(x, gamma, beta, rm, rv, True, 0.1, 1e-5)[0] * r).sum())

    _, xhat, inv_std = be.batchnorm_forward(x, gamma, beta, np.zeros(f), np.ones(f), True, 0.1, 1e-5)
    gg, gb = np.full(f, np.nan), np.full(f, np.nan)
    gx = be.batchnorm_backward(r, xhat, inv_std, gamma, gg, gb)
    np.testing.assert_allclose(gx, finite_difference(loss, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gg, finite_difference(loss, gamma), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, finite_difference(loss, beta), rtol=1e-6, atol=1e-8)


def test_batchnorm_statistics_and_running_update(be, rng):
    x = rng.normal(loc=3.0, scale=2.0, size=(17, 5))
    rm, rv = np.full(5, 0.5), np.full(5, 2.0)
    y, _, _ = be.batchnorm_forward(x, np.ones(5), np.zeros(5), rm, rv, True, 0.1, 1e-5)
    np.testing.assert_allclose(y.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=0), x.var(axis=0) / (x.var(axis=0) + 1e-5))
    np.testing.assert_allclose(rm, 0.9 * 0.5 + 0.1 * x.mean(axis=0))
    np.testing.assert_allclose(rv, 0.9 * 2.0 + 0.1 * x.var(axis=0, ddof=1))
    # Inference uses (and leaves alone) the running statistics.
    before = rm.copy(), rv.copy()
    y2, _, _ = be.batchnorm_forward(x, np.ones(5), np.zeros(5), rm, rv, False, 0.1, 1e-5)
    np.testing.assert_allclose(y2, (x - rm) / np.sqrt(rv + 1e-5))
    np.testing.assert_array_equal(rm, before[0])
    np.testing.assert_array_equal(rv, before[1])


def test_batchnorm_single_row_uses_running_stats_with_exact_gradient(be, rng, finite_difference):
    f = 3
    x = rng.normal(size=(1, f))
    gamma, beta, rm, rv = rng.normal(size=f), rng.normal(size=f), rng.normal(size=f), rng.uniform(1, 2, f)
    r = rng.normal(size=(1, f))
    y, xhat, inv_std = be.batchnorm_forward(x, gamma, beta, rm, rv, True, 0.1, 1e-5)
    np.testing.assert_allclose(y, gamma * (x - rm) / np.sqrt(rv + 1e-5) + beta)
    gx = be.batchnorm_backward(r, xhat, inv_std, gamma, np.zeros(f), np.zeros(f))

    def loss() -> float:
        y = be.batchnorm_forward(x, gamma, beta, rm.copy(), rv.copy(), True, 0.1, 1e-5)[0]
        return float((y * r).sum())

    np.testing.assert_allclose(gx, finite_difference(loss, x), rtol=1e-6)


@pytest.mark.parametrize("kind", ["mse", "mae", "softmax_cce", "bce"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 3), (5, 130)], ids=str)
def test_loss_gradients_match_finite_differences(be, rng, finite_difference, kind, shape):
    if kind == "softmax_cce":
        pred = rng.normal(size=shape)
        target = rng.dirichlet(np.ones(shape[1]), size=shape[0])
    elif kind == "bce":
        pred = rng.uniform(0.05, 0.95, size=shape)
        target = rng.uniform(size=shape)
    else:
        pred = _away_from_kinks(rng.normal(size=shape))
        target = np.zeros(shape)
    value, grad = be.loss(kind, pred, target)
    assert value.shape == (1,)
    np.testing.assert_allclose(
        grad, finite_difference(lambda: float(be.loss(kind, pred, target)[0][0]), pred), rtol=1e-6, atol=1e-9
    )


def test_loss_values_closed_forms(be):
    p, t = np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([[0.0, 1.0], [1.0, 0.0]])
    assert be.loss("mse", p, t)[0][0] == pytest.approx(np.mean((p - t) ** 2))
    assert be.loss("mae", p, t)[0][0] == pytest.approx(0.3)
    assert be.loss("bce", p, t)[0][0] == pytest.approx(-(2 * np.log(0.8) + 2 * np.log(0.6)) / 4)
    logits = np.log(p)  # softmax(log p) = p for rows summing to 1
    assert be.loss("softmax_cce", logits, t)[0][0] == pytest.approx(-(np.log(0.8) + np.log(0.6)) / 2)
    # Extreme logits stay finite (log-sum-exp) and the gradient is p - t.
    value, grad = be.loss("softmax_cce", np.array([[1000.0, -1000.0]]), np.array([[0.0, 1.0]]))
    assert value[0] == pytest.approx(2000.0)
    np.testing.assert_allclose(grad, [[1.0, -1.0]])
    with pytest.raises(ValueError, match="huber"):
        be.loss("huber", p, t)


def test_bce_clips_saturated_probabilities(be):
    value, grad = be.loss("bce", np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    assert np.isfinite(value[0]) and value[0] == pytest.approx(-np.log(1e-7), rel=1e-6)
    assert grad[0, 0] > 0 and grad[0, 1] < 0  # still pushes back towards the target


def test_clip_by_global_norm(be):
    g = np.array([3.0, 4.0, 0.0])
    be.clip_by_global_norm_(g, 10.0)
    np.testing.assert_array_equal(g, [3.0, 4.0, 0.0])
    be.clip_by_global_norm_(g, 1.0)
    np.testing.assert_allclose(g, [0.6, 0.8, 0.0])
    z = np.zeros(4)
    be.clip_by_global_norm_(z, 1.0)
    np.testing.assert_array_equal(z, 0.0)


def test_memory_ops(be, rng):
    flat = be.zeros((10,))
    v = be.view(flat, 3, (2, 3))
    be.fill_(v, 2.0)
    assert flat.sum() == 12.0 and flat[3] == 2.0 and flat[9] == 0.0
    with pytest.raises(ValueError, match="outside"):
        be.view(flat, 5, (2, 3))
    src = be.asarray(rng.normal(size=(130, 3)))
    rows = be.asarray(np.array([129, 0, 5, 5]))
    assert rows.dtype == np.int32
    np.testing.assert_array_equal(be.gather_rows(src, rows), src[[129, 0, 5, 5]])
    acc = be.zeros((1,))
    be.add_(acc, np.array([1.5]))
    be.add_(acc, np.array([1.0]))
    assert acc[0] == 2.5
    assert be.to_numpy(acc) is not acc


def test_seed_cce_output_gradient(be, rng):
    """Seed bug 5: with softmax + cross-entropy the output gradient is exactly (p − t)/B."""
    logits = rng.normal(size=(5, 3))
    target = np.eye(3)[[0, 2, 1, 1, 0]]
    _, grad = be.loss("softmax_cce", logits, target)
    np.testing.assert_allclose(grad, (be.softmax_forward(logits) - target) / 5, rtol=1e-14)
