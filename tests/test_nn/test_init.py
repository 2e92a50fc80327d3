"""Initialisers: the seed's uniform range, Xavier/Glorot and He scales, reproducibility; get_backend."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.init import initial_values
from nn.layer import ParamSpec


def _draw(init: str, fan_in: int = 400, fan_out: int = 100, seed: int = 0) -> np.ndarray:
    spec = ParamSpec("w", (fan_out, fan_in), init, fan_in=fan_in, fan_out=fan_out)
    return initial_values(spec, np.random.default_rng(seed))


def test_seed_uniform_is_the_mql5_grid():
    """MQL5: (MathRand() + 1) / 32768 − 0.5, MathRand() in 0..32767: multiples of 1/32768 in (−0.5, 0.5]."""
    w = _draw("seed_uniform")
    assert w.min() > -0.5 and w.max() <= 0.5
    np.testing.assert_array_equal((w + 0.5) * 32768, np.round((w + 0.5) * 32768))
    assert abs(w.mean()) < 0.01 and abs(w.var() - 1 / 12) < 0.005


@pytest.mark.parametrize(
    ("init", "variance"),
    [
        ("xavier_uniform", 2 / 500),
        ("xavier_normal", 2 / 500),
        ("he_uniform", 2 / 400),
        ("he_normal", 2 / 400),
    ],
)
def test_variance_scaled_initialisers(init, variance):
    w = _draw(init)
    assert w.var() == pytest.approx(variance, rel=0.03)
    if init.endswith("uniform"):
        assert np.abs(w).max() <= np.sqrt(3 * variance)


def test_initialisers_are_reproducible():
    np.testing.assert_array_equal(_draw("he_normal", seed=3), _draw("he_normal", seed=3))
    assert not np.array_equal(_draw("he_normal", seed=3), _draw("he_normal", seed=4))
    assert (_draw("ones") == 1).all() and (_draw("zeros") == 0).all()


def test_fan_is_required():
    with pytest.raises(ValueError, match="fan_in"):
        initial_values(ParamSpec("w", (3, 3), "xavier_uniform"), np.random.default_rng(0))


def test_get_backend():
    be = nn.get_backend("numpy")
    assert be.name == "numpy" and be.dtype == np.float64 and isinstance(be, nn.backend.Backend)
    assert nn.get_backend(be) is be
    with pytest.raises(ValueError, match="float64 reference"):
        nn.get_backend("numpy", dtype="float32")
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        nn.get_backend("cuda")


def test_progress_bar_goes_to_stderr_only(capsys):
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,), backend="numpy")
    model.fit(np.ones((4, 2)), np.zeros((4, 2)), epochs=2, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "epoch" in err
