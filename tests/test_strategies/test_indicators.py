"""Indicators against hand-computed values and independent loops, and a causality check for each."""

import numpy as np
import pytest

from strategies import indicators as ind


def _ema_loop(x, alpha, start, seed):
    out = np.full(len(x), np.nan)
    out[start] = seed
    for i in range(start + 1, len(x)):
        out[i] = alpha * x[i] + (1 - alpha) * out[i - 1]
    return out


def test_sma_by_hand():
    np.testing.assert_allclose(ind.sma([1, 2, 3, 4, 5], 3), [np.nan, np.nan, 2, 3, 4])


def test_ema_is_seeded_with_the_first_price():
    np.testing.assert_allclose(ind.ema([1.0, 2.0, 3.0], 3), [1.0, 1.5, 2.25])


def test_smma_seeded_with_sma():
    np.testing.assert_allclose(ind.smma([1, 2, 3, 4], 2), [np.nan, 1.5, 2.25, 3.125])


def test_lwma_weights_newest_most():
    np.testing.assert_allclose(ind.lwma([1, 2, 3, 0], 3), [np.nan, np.nan, 14 / 6, (2 + 6 + 0) / 6])


def test_ma_rejects_unknown_method():
    with pytest.raises(ValueError, match="moving-average method"):
        ind.ma([1, 2], 2, "hull")


def test_rsi_wilder_by_hand():
    out = ind.rsi([1, 2, 1, 2, 3], 2)
    np.testing.assert_allclose(out, [np.nan, np.nan, 50.0, 75.0, 87.5])


def test_rsi_all_gains_reads_100_and_flat_reads_50():
    assert ind.rsi(np.arange(10.0), 3)[-1] == 100.0
    assert ind.rsi(np.ones(10), 3)[-1] == 50.0


def test_cci_by_hand():
    tp = np.array([1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0])
    out = ind.cci(tp, tp, tp, 3)
    np.testing.assert_allclose(out[:4], [np.nan, np.nan, 100.0, 100.0])
    assert out[-1] == 0.0  # zero deviation


def test_atr_wilder_by_hand():
    high = np.array([2.0, 3.0, 4.0, 5.0])
    low = np.array([1.0, 1.0, 2.0, 2.0])
    close = np.array([1.5, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(ind.true_range(high, low, close), [1.0, 2.0, 2.0, 3.0])
    np.testing.assert_allclose(ind.atr(high, low, close, 2), [np.nan, np.nan, 2.0, 2.5])
    np.testing.assert_allclose(ind.atr(high, low, close, 2, smoothing="sma"), [np.nan, 1.5, 2.0, 2.5])


def test_macd_main_ema_difference_and_sma_signal(rng):
    close = 1.1 + np.cumsum(rng.normal(0, 1e-3, 200))
    main, signal = ind.macd(close, 12, 26, 9)
    want = _ema_loop(close, 2 / 13, 0, close[0]) - _ema_loop(close, 2 / 27, 0, close[0])
    np.testing.assert_allclose(main[25:], want[25:], rtol=1e-12)
    assert np.isnan(main[:25]).all()
    assert np.isnan(signal[: 25 + 8]).all()
    np.testing.assert_allclose(signal[40], want[32:41].mean(), rtol=1e-12)


def test_recursive_smoothing_matches_a_plain_loop(rng):
    x = rng.normal(size=500)
    np.testing.assert_allclose(ind.smma(x, 7), _ema_loop(x, 1 / 7, 6, x[:7].mean()), rtol=1e-12, atol=1e-15)


ALL = {
    "sma": lambda h, lo, c: ind.sma(c, 10),
    "ema": lambda h, lo, c: ind.ema(c, 10),
    "smma": lambda h, lo, c: ind.smma(c, 10),
    "lwma": lambda h, lo, c: ind.lwma(c, 10),
    "rsi": lambda h, lo, c: ind.rsi(c, 14),
    "cci": lambda h, lo, c: ind.cci(h, lo, c, 14),
    "atr": lambda h, lo, c: ind.atr(h, lo, c, 14),
    "macd_main": lambda h, lo, c: ind.macd(c)[0],
    "macd_signal": lambda h, lo, c: ind.macd(c)[1],
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_appending_future_bars_never_changes_past_values(name, rng):
    c = 1.1 + np.cumsum(rng.normal(0, 1e-3, 400))
    h = c + rng.uniform(0, 1e-3, 400)
    lo = c - rng.uniform(0, 1e-3, 400)
    full = ALL[name](h, lo, c)
    for cut in (30, 137, 399):
        part = ALL[name](h[:cut], lo[:cut], c[:cut])
        np.testing.assert_allclose(part, full[:cut], rtol=1e-10, atol=1e-12, equal_nan=True)


def test_bad_period_is_named():
    with pytest.raises(ValueError, match="period must be a positive integer"):
        ind.sma([1, 2, 3], 0)
