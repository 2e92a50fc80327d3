"""Optimizers against their textbook updates, written here independently as scalar loops, on every backend."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nn
from nn.optim import (
    SGD,
    AdaDelta,
    AdaGrad,
    Adam,
    ExponentialDecay,
    Momentum,
    RMSProp,
    StepDecay,
    optimizer_from_config,
)

STEPS, SIZE = 6, 17


def _sgn(x: float) -> float:
    return 1.0 if x > 0 else -1.0 if x < 0 else 0.0


def textbook(kind: str, w0: np.ndarray, grads: list[np.ndarray], hp: dict) -> np.ndarray:
    """The published update rules, one parameter at a time, in Python floats."""
    lr, l1, l2 = hp["lr"], hp.get("l1", 0.0), hp.get("l2", 0.0)
    out = []
    for i, w in enumerate(w0.tolist()):
        a = b = 0.0  # the rule's state: velocity / accumulators / moments
        for t, gt in enumerate(grads, start=1):
            g = float(gt[i]) + l1 * _sgn(w) + l2 * w
            if kind == "sgd":
                w = w - lr * g
            elif kind == "momentum":
                a = hp["momentum"] * a + g
                w = w - lr * (g + hp["momentum"] * a if hp["nesterov"] else a)
            elif kind == "adagrad":
                a = a + g * g
                w = w - lr * g / (math.sqrt(a) + hp["eps"])
            elif kind == "rmsprop":
                a = hp["rho"] * a + (1 - hp["rho"]) * g * g
                w = w - lr * g / (math.sqrt(a) + hp["eps"])
            elif kind == "adadelta":  # Zeiler 2012, Algorithm 1
                a = hp["rho"] * a + (1 - hp["rho"]) * g * g
                delta = -math.sqrt(b + hp["eps"]) / math.sqrt(a + hp["eps"]) * g
                b = hp["rho"] * b + (1 - hp["rho"]) * delta * delta
                w = w + lr * delta
            elif kind == "adam":  # Kingma & Ba 2015, Algorithm 1
                a = hp["beta1"] * a + (1 - hp["beta1"]) * g
                b = hp["beta2"] * b + (1 - hp["beta2"]) * g * g
                m_hat, v_hat = a / (1 - hp["beta1"] ** t), b / (1 - hp["beta2"] ** t)
                w = w - lr * m_hat / (math.sqrt(v_hat) + hp["eps"])
        out.append(w)
    return np.array(out)


CASES = [
    {"type": "sgd", "lr": 0.1},
    {"type": "momentum", "lr": 0.05, "momentum": 0.9, "nesterov": False},
    {"type": "momentum", "lr": 0.05, "momentum": 0.8, "nesterov": True},
    {"type": "adagrad", "lr": 0.1, "eps": 1e-8},
    {"type": "rmsprop", "lr": 0.01, "rho": 0.9, "eps": 1e-8},
    {"type": "adadelta", "lr": 1.0, "rho": 0.95, "eps": 1e-6},
    {"type": "adam", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
]


def _run(backend_name: str, optimizer, w0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    be = nn.get_backend(backend_name)
    w = be.asarray(w0)
    slots = [be.zeros((w0.size,)) for _ in range(optimizer.slots)]
    for g in grads:
        optimizer.step(be, w, be.asarray(g), slots)
    return be.to_numpy(w).astype(np.float64)


@pytest.mark.parametrize("reg", [{}, {"l1": 0.01, "l2": 0.02}], ids=["plain", "l1_l2"])
@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c['type']}{'_nesterov' if c.get('nesterov') else ''}"
)
def test_optimizer_reproduces_textbook_update(backend, rng, case, reg):
    hp = {**case, **reg}
    w0 = rng.normal(size=SIZE)
    w0[3] = 0.0  # sign(0) = 0: L1 leaves an exact zero alone
    grads = [rng.normal(size=SIZE) for _ in range(STEPS)]
    got = _run(backend, optimizer_from_config(hp), w0, grads)
    tol = 1e-12 if backend == "numpy" else 2e-5
    np.testing.assert_allclose(got, textbook(case["type"], w0, grads, hp), rtol=tol, atol=tol)


def test_optimizer_config_round_trip():
    for case in CASES:
        opt = optimizer_from_config(
            {**case, "l1": 0.1, "schedule": {"type": "step", "step_size": 3, "gamma": 0.1}}
        )
        assert optimizer_from_config(opt.config()).config() == opt.config()
    assert isinstance(optimizer_from_config("adam"), Adam)
    assert Adam().lr == 3e-4 and Adam().beta1 == 0.9 and Adam().beta2 == 0.999


def test_seed_adam_missing_bias_correction(backend):
    """Seed bug 2: dividing by 1−β instead of 1−β^t makes later steps larger than lr for a constant gradient.

    With bias correction, m̂ = g and v̂ = g² exactly for a constant g, so every step moves w by lr.
    """
    w = _run(backend, Adam(lr=0.01, eps=1e-12), np.zeros(3), [np.array([0.5, -2.0, 4.0])] * 5)
    np.testing.assert_allclose(w, [-0.05, 0.05, -0.05], rtol=1e-5)


def test_seed_adagrad_missing_gradient(backend):
    """Seed bug 1: lr/√G without the gradient factor always steps the same way; ours follows −sign(g)."""
    w = _run(backend, AdaGrad(lr=0.1, eps=1e-12), np.zeros(2), [np.array([0.5, -0.5])])
    np.testing.assert_allclose(w, [-0.1, 0.1], rtol=1e-5)


def test_seed_l1_constant_shift(backend):
    """Seed bug 3: L1 is λ1·sign(w) (shrink towards 0 from both sides), not a constant shift of every w."""
    w = _run(backend, SGD(lr=0.5, l1=0.2), np.array([1.0, -1.0, 0.0]), [np.zeros(3)])
    np.testing.assert_allclose(w, [0.9, -0.9, 0.0], rtol=1e-6)


def test_seed_epsilon_underflow():
    """Seed bug 4: an epsilon of 1e-37 is lost in float32 arithmetic; it is refused with a clear message."""
    with pytest.raises(ValueError, match="eps"):
        Adam(eps=1e-37)
    with pytest.raises(ValueError, match="eps"):
        AdaGrad(eps=0.0)


def test_gradient_clipping_by_global_norm(backend):
    g = np.array([3.0, 4.0])  # norm 5
    clipped = _run(backend, SGD(lr=1.0, clipnorm=1.0), np.zeros(2), [g])
    np.testing.assert_allclose(clipped, [-0.6, -0.8], rtol=1e-6)
    free = _run(backend, SGD(lr=1.0, clipnorm=10.0), np.zeros(2), [g])
    np.testing.assert_allclose(free, [-3.0, -4.0], rtol=1e-6)


def test_schedules():
    step, expo = StepDecay(step_size=3, gamma=0.5), ExponentialDecay(rate=0.9)
    assert [step(1.0, e) for e in range(7)] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]
    np.testing.assert_allclose([expo(2.0, e) for e in range(3)], [2.0, 1.8, 1.62])
    opt = Momentum(lr=0.1, schedule={"type": "exponential", "rate": 0.5})
    opt.begin_epoch(2)
    assert opt.current_lr == pytest.approx(0.025)
    with pytest.raises(ValueError, match="gamma"):
        StepDecay(gamma=0.0)
    with pytest.raises(ValueError, match="schedule"):
        SGD(schedule={"type": "cosine"})


def test_bad_optimizer_arguments():
    with pytest.raises(ValueError, match="unknown optimizer"):
        optimizer_from_config("adamw")
    with pytest.raises(ValueError, match="lr"):
        RMSProp(lr=-1.0)
    with pytest.raises(ValueError, match="rho"):
        AdaDelta(rho=1.0)
    with pytest.raises(ValueError, match="optimizer 'adam'"):
        optimizer_from_config({"type": "adam", "momentum": 0.9})


def test_type1_schedule_runs_its_first_two_epochs_at_the_initial_rate():
    """The Time-Series-Library's lradj='type1' sets the rate after epoch e (1-based) to lr·0.5^(e−1) for
    the next epoch: epochs 1 and 2 both run at lr, then it halves. ``start=1`` says so."""
    official = StepDecay(step_size=1, gamma=0.5, start=1)
    assert [official(1e-4, e) for e in range(5)] == [1e-4, 1e-4, 5e-5, 2.5e-5, 1.25e-5]
    assert [StepDecay(1, 0.5)(1e-4, e) for e in range(3)] == [1e-4, 5e-5, 2.5e-5]
    assert official.config() == {"type": "step", "step_size": 1, "gamma": 0.5, "start": 1}
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="start must be an integer >= 0"):
            StepDecay(1, 0.5, start=bad)
