"""Spectral layers on the float64 reference: against numpy.fft, finite differences, the harmonic weight."""

from __future__ import annotations

import numpy as np
import pytest

from nn.layers import from_config
from nn.ops_numpy import NumpyBackend
from nn.spectral import ExtendedDFT, InverseExtendedDFT, SpectrumNorm, harmonic_weight

_B = NumpyBackend


def _bound(layer, input_shape):
    layer.build(tuple(input_shape))
    layer.bind(_B(), {}, {}, {})
    return layer


def _fd_input(layer, x, rng, fd):
    r = rng.normal(size=layer.forward(x, True).shape)
    layer.forward(x, True)
    gx = layer.backward(r)
    np.testing.assert_allclose(
        gx, fd(lambda: float(np.sum(layer.forward(x, True) * r)), x), rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize(("seq_len", "pred_len"), [(8, 4), (7, 4), (96, 96), (1, 1), (5, 130)])
def test_extended_dft_is_padded_rfft(seq_len, pred_len, rng):
    x = rng.normal(size=(3, 2, seq_len))
    layer = _bound(ExtendedDFT(pred_len), (2, seq_len))
    y = layer.forward(x, False)
    n = seq_len + pred_len
    want = np.fft.rfft(np.concatenate([x, np.zeros((3, 2, pred_len))], axis=-1), axis=-1) / n
    assert y.shape == (3, 2, n // 2 + 1, 2)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], want, atol=1e-13)


@pytest.mark.parametrize(("seq_len", "pred_len"), [(8, 4), (7, 4), (96, 96), (3, 2)])
def test_inverse_extended_dft_keeps_last_points_of_irfft(seq_len, pred_len, rng):
    n = seq_len + pred_len
    f = n // 2 + 1
    spec = rng.normal(size=(4, f, 2))
    layer = _bound(InverseExtendedDFT(seq_len, pred_len), (f, 2))
    want = np.fft.irfft((spec[..., 0] + 1j * spec[..., 1]) * n, n=n, axis=-1)[:, -pred_len:]
    np.testing.assert_allclose(layer.forward(spec, False), want, atol=1e-12)


def test_round_trip_forecasts_the_padding(rng):
    """Inverse(extended DFT(x)) returns the zero padding: the F block's forecast starts from the spectrum."""
    x = rng.normal(size=(2, 12))
    fwd = _bound(ExtendedDFT(6), (12,))
    inv = _bound(InverseExtendedDFT(12, 6), (10, 2))
    np.testing.assert_allclose(inv.forward(fwd.forward(x, False), False), 0.0, atol=1e-12)


@pytest.mark.parametrize(("seq_len", "pred_len"), [(7, 4), (6, 4)])
def test_dft_gradients(seq_len, pred_len, rng, finite_difference):
    f = (seq_len + pred_len) // 2 + 1
    _fd_input(
        _bound(ExtendedDFT(pred_len), (2, seq_len)), rng.normal(size=(3, 2, seq_len)), rng, finite_difference
    )
    inv = _bound(InverseExtendedDFT(seq_len, pred_len), (2, f, 2))
    _fd_input(inv, rng.normal(size=(3, 2, f, 2)), rng, finite_difference)


@pytest.mark.parametrize("ddof", [0, 1])
def test_spectrum_norm_values_and_gradients(ddof, rng, finite_difference):
    layer = _bound(SpectrumNorm(eps=1e-9, ddof=ddof), (3, 7, 2))
    x = rng.normal(size=(2, 3, 7, 2))
    y = layer.forward(x, True)
    z, yz = x[..., 0] + 1j * x[..., 1], y[..., 0] + 1j * y[..., 1]
    std = np.sqrt(np.abs(z).var(axis=-1, ddof=ddof, keepdims=True) + 1e-9)
    np.testing.assert_allclose(yz, (z - z.mean(axis=-1, keepdims=True)) / std, rtol=1e-12)
    _fd_input(layer, x, rng, finite_difference)


def test_spectrum_denormalize_inverts_and_differentiates(rng, finite_difference):
    layer = _bound(SpectrumNorm(), (2, 9, 2))
    x = rng.normal(size=(3, 2, 9, 2))
    y = layer.forward(x, False)
    np.testing.assert_allclose(layer.denormalize(y), x, rtol=1e-12)
    u = rng.normal(size=y.shape)
    r = rng.normal(size=y.shape)
    layer.denormalize(u)
    g = layer.denormalize_backward(r)
    np.testing.assert_allclose(
        g, finite_difference(lambda: float(np.sum(layer.denormalize(u) * r)), u), atol=1e-8
    )
    with pytest.raises(ValueError, match="spectrum_norm: cannot denormalize"):
        layer.denormalize(y[:1])


@pytest.mark.parametrize("ddof", [0, 1])
def test_normalise_model_denormalise_gradient_reaches_the_statistics(ddof, rng, finite_difference):
    """``denormalize(h(forward(X)))``: the statistics of X appear twice, and the input gradient must follow
    both uses; ``h`` is a fixed complex map so that the round trip is not the identity."""
    layer = _bound(SpectrumNorm(eps=1e-9, ddof=ddof), (2, 6, 2))
    x = rng.normal(size=(3, 2, 6, 2))
    w = rng.normal(size=(6, 6)) + 1j * rng.normal(size=(6, 6))
    r = rng.normal(size=x.shape)

    def h(y):
        z = (y[..., 0] + 1j * y[..., 1]) @ w.T
        return np.stack([z.real, z.imag], axis=-1)

    def loss() -> float:
        return float(np.sum(layer.denormalize(h(layer.forward(x, False))) * r))

    loss()
    gz = layer.denormalize_backward(r)
    gz = gz[..., 0] + 1j * gz[..., 1]
    g_y = gz @ np.conj(w)  # gradient convention: g_y = g_z·conj(w) for z = y·wᵀ
    gx = layer.backward(np.stack([g_y.real, g_y.imag], axis=-1))
    np.testing.assert_allclose(gx, finite_difference(loss, x), atol=1e-6)


def _harmonic_weight_by_hand(x: np.ndarray) -> float:
    """The definition, one row at a time with an explicit DFT sum."""
    n = len(x)
    d = x - x.mean()
    f = n // 2 + 1
    amp = np.array([abs(sum(d[t] * np.exp(-2j * np.pi * k * t / n) for t in range(n))) for k in range(f)])
    lo, hi = 3, f // 3
    k0 = lo + int(np.argmax(amp[lo:hi])) if hi > lo else 0
    return float(sum(amp[h * k0] ** 2 for h in (1, 2, 3)) / (np.sum(amp**2) + 1e-5))


def test_harmonic_weight(rng):
    t = np.arange(96)
    pure = np.sin(2 * np.pi * 5 * t / 96)  # all energy at bin 5
    harmonics = pure + 0.5 * np.sin(2 * np.pi * 10 * t / 96) + 0.25 * np.cos(2 * np.pi * 15 * t / 96)
    noise = rng.normal(size=(3, 96))
    x = np.vstack([pure, harmonics, noise, 3 + 0 * t])
    w = harmonic_weight(_B(), x)
    np.testing.assert_allclose(w[:2], 1.0, atol=1e-6)
    assert np.all(w[2:5] < 0.3) and w[5] == 0.0  # noise spreads its energy; a constant has none
    for row, got in zip(x, w, strict=True):
        assert got == pytest.approx(_harmonic_weight_by_hand(row), rel=1e-9, abs=1e-12)
    short = rng.normal(size=(2, 7))  # F = 4: the fundamental window [3, 1) is empty
    np.testing.assert_allclose(
        harmonic_weight(_B(), short), [_harmonic_weight_by_hand(r) for r in short], atol=1e-12
    )
    with pytest.raises(ValueError, match="harmonic_weight"):
        harmonic_weight(_B(), x[0])


def test_config_round_trip_and_errors():
    for layer in (ExtendedDFT(24), InverseExtendedDFT(96, 24), SpectrumNorm(1e-8, 0)):
        assert from_config(layer.config()).config() == layer.config()
    with pytest.raises(ValueError, match=r"inverse_extended_dft.*\(61, 2\)"):
        InverseExtendedDFT(96, 24).build((60, 2))
    with pytest.raises(ValueError, match="extended_dft: pred_len"):
        ExtendedDFT(0)


def test_frequency_model_learns_a_periodic_series(rng):
    """A small F-block-like model (extended DFT -> complex layers -> inverse DFT) inside ``Sequential``
    learns to forecast a noisy two-tone series well below the naive last-value forecast."""
    from nn.complex import ComplexActivation, ComplexDense, ComplexLayerNorm
    from nn.model import Sequential

    seq_len, pred_len = 24, 8
    t = np.arange(3000)
    series = np.sin(2 * np.pi * t / 12) + 0.5 * np.sin(2 * np.pi * t / 5) + 0.1 * rng.normal(size=t.size)
    starts = rng.integers(0, t.size - seq_len - pred_len, 400)
    x = np.stack([series[i : i + seq_len] for i in starts])
    y = np.stack([series[i + seq_len : i + seq_len + pred_len] for i in starts])
    bins = (seq_len + pred_len) // 2 + 1
    layers = [
        ExtendedDFT(pred_len),
        ComplexDense(32),
        ComplexActivation("relu"),
        ComplexLayerNorm(),
        ComplexDense(bins),
        InverseExtendedDFT(seq_len, pred_len),
    ]
    model = Sequential(
        layers,
        input_shape=(seq_len,),
        loss="mse",
        optimizer={"type": "adam", "lr": 3e-3},
        backend=_B(),
        seed=0,
    )
    history = model.fit(x, y, epochs=12, batch_size=32, progress=False)
    naive = np.mean((y - x[:, -1:]) ** 2)
    assert history.epochs[-1].loss < 0.25 * naive < history.epochs[0].loss
