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


def test_atr_is_the_terminals_simple_average_of_true_ranges():
    """iATR (ATR.mq5; https://www.metatrader5.com/en/terminal/help/indicators/oscillators/atr): the first
    value at bar ``period`` averages the true ranges of bars 1..period (bar 0 has no previous close)."""
    high = np.array([2.0, 3.0, 4.0, 5.0, 6.0])
    low = np.array([1.0, 1.0, 2.0, 2.0, 5.0])
    close = np.array([1.5, 2.0, 3.0, 4.0, 5.5])
    # TR: bar 1 max(3, 1.5) - min(1, 1.5) = 2; bar 2 = 4 - 2 = 2; bar 3 = 5 - 2 = 3; bar 4 = 6 - 4 = 2
    np.testing.assert_allclose(ind.true_range(high, low, close), [1.0, 2.0, 2.0, 3.0, 2.0])
    np.testing.assert_allclose(ind.atr(high, low, close, 2), [np.nan, np.nan, 2.0, 2.5, 2.5])
    # Wilder's own smoothing stays an option: 2, then 2 + (3 - 2)/2, then 2.5 + (2 - 2.5)/2
    np.testing.assert_allclose(
        ind.atr(high, low, close, 2, smoothing="wilder"), [np.nan, np.nan, 2.0, 2.5, 2.25]
    )


def test_sma_difference_is_exactly_zero_where_the_averages_are_equal():
    """A running float sum made SMA(2) - SMA(4) = +2.3e-13 at bar 4066 of the sample, where both averages
    are 1.15871 exactly, so a crossover rule saw a cross one bar early; sums on the price grid are exact."""
    from datafeeds import read_sample

    close = read_sample().close.to_numpy()
    points = np.rint(close[4063:4067] * 1e5).astype(int)
    assert points[-2:].sum() * 2 == points.sum()  # the two averages are equal as numbers
    assert ind.sma(close, 2)[4066] - ind.sma(close, 4)[4066] == 0.0
    grid = np.array([1.1, 1.3, 1.2, 1.2] * 50)
    assert (ind.sma(grid, 2)[3::4] == ind.sma(grid, 4)[3::4]).all()


def test_sma_off_the_price_grid_has_no_drifting_running_sum(rng):
    x = rng.normal(size=20_000) * 1e3 + 1e6 / 3
    want = np.array([np.sum(x[i - 9 : i + 1]) / 10 for i in range(19_000, 20_000)])
    np.testing.assert_allclose(ind.sma(x, 10)[19_000:], want, rtol=0, atol=1e-9)


def test_bands_by_hand():
    """iBands (BB.mq5; .../help/indicators/trend_indicators/bb): SMA ± deviation · population standard
    deviation, drawn from bar ``period``."""
    mid, up, low = ind.bands([1.0, 2.0, 3.0, 4.0, 5.0], 3, 2.0)
    sd = np.sqrt(2.0 / 3.0)  # window (2, 3, 4) around 3: (1 + 0 + 1) / 3
    np.testing.assert_allclose(mid, [np.nan, np.nan, np.nan, 3.0, 4.0])
    np.testing.assert_allclose(up, [np.nan, np.nan, np.nan, 3.0 + 2 * sd, 4.0 + 2 * sd])
    np.testing.assert_allclose(low, [np.nan, np.nan, np.nan, 3.0 - 2 * sd, 4.0 - 2 * sd])


def test_stochastic_by_hand():
    """iStochastic (Stochastic.mq5; .../help/indicators/oscillators/so): %K = Σ(close − LL) / Σ(HH − LL) over
    ``slowing`` bars, %D its SMA; first %K at bar k + slowing − 2, a flat range reads 100."""
    high = np.array([3.0, 4.0, 5.0, 4.0, 6.0])
    low = np.array([1.0, 2.0, 3.0, 2.0, 3.0])
    close = np.array([2.0, 3.0, 4.0, 3.0, 6.0])
    main, signal = ind.stochastic(high, low, close, 3, 2, 2)
    # HH/LL of 3 bars: bar 2 (5, 1), bar 3 (5, 2), bar 4 (6, 2)
    k3 = ((4 - 1) + (3 - 2)) / ((5 - 1) + (5 - 2)) * 100
    k4 = ((3 - 2) + (6 - 2)) / ((5 - 2) + (6 - 2)) * 100
    np.testing.assert_allclose(main, [np.nan, np.nan, np.nan, k3, k4])
    np.testing.assert_allclose(signal, [np.nan] * 4 + [(k3 + k4) / 2])
    flat = np.ones(6)
    assert ind.stochastic(flat, flat, flat, 3, 2, 2)[0][-1] == 100.0


def test_momentum_by_hand():
    """iMomentum (.../help/indicators/oscillators/mom): close / close ``period`` bars ago · 100."""
    np.testing.assert_allclose(ind.momentum([2.0, 4.0, 5.0, 8.0], 2), [np.nan, np.nan, 250.0, 200.0])


def test_adx_by_hand():
    """iADX (ADX.mq5; .../help/indicators/trend_indicators/admi): ±DM over the bar's true range, EMAs with
    2/(period+1) seeded with 0 at bar 0; ±DI drawn from bar ``period``, ADX from ``2·period``."""
    high = np.array([10.0, 12.0, 11.0, 14.0, 13.0])
    low = np.array([8.0, 9.0, 7.0, 10.0, 12.0])
    close = np.array([9.0, 11.0, 8.0, 13.0, 12.5])
    a = 2 / 3
    # +DM/TR·100: bar 1 2/3, bar 3 3/6; -DM/TR·100: bar 2 2/4; bar 4 has no movement (both 0)
    pdi = [0.0]
    ndi = [0.0]
    for p_, n_ in ((200 / 3, 0.0), (0.0, 50.0), (50.0, 0.0), (0.0, 0.0)):
        pdi.append(a * p_ + (1 - a) * pdi[-1])
        ndi.append(a * n_ + (1 - a) * ndi[-1])
    adx = [0.0]
    for i in range(1, 5):
        adx.append(a * 100 * abs(pdi[i] - ndi[i]) / (pdi[i] + ndi[i]) + (1 - a) * adx[-1])
    main, plus, minus = ind.adx(high, low, close, 2)
    np.testing.assert_allclose(plus, [np.nan, np.nan, *pdi[2:]])
    np.testing.assert_allclose(minus, [np.nan, np.nan, *ndi[2:]])
    np.testing.assert_allclose(main, [np.nan] * 4 + [adx[4]])
    assert adx[4] == pytest.approx(54.2070, abs=1e-4)


def test_wpr_by_hand():
    """iWPR (WPR.mq5; .../help/indicators/oscillators/wpr): −100·(HH − close)/(HH − LL); a flat window keeps
    the previous value, 0 when it is the first."""
    high = np.array([3.0, 4.0, 5.0, 5.5, 5.0, 5.0])
    low = np.array([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])
    close = np.array([2.0, 3.0, 4.0, 5.0, 5.0, 5.0])
    want = [np.nan, -100 / 3, -100 / 3, -0.5 * 100 / 2.5, -100.0, -100.0]
    np.testing.assert_allclose(ind.wpr(high, low, close, 2), want)
    flat = np.ones(3)
    np.testing.assert_array_equal(ind.wpr(flat, flat, flat, 2), [np.nan, 0.0, 0.0])


def test_obv_by_hand():
    """iOBV (OBV.mq5; .../help/indicators/volume_indicators/obv): bar 0's volume, then ± each bar's volume
    by the direction of its close."""
    np.testing.assert_array_equal(
        ind.obv([1.0, 2.0, 2.0, 1.0, 3.0], [10, 20, 30, 40, 50]), [10.0, 30.0, 30.0, -10.0, 40.0]
    )


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
    "bands_upper": lambda h, lo, c: ind.bands(c)[1],
    "stochastic_signal": lambda h, lo, c: ind.stochastic(h, lo, c)[1],
    "momentum": lambda h, lo, c: ind.momentum(c),
    "adx": lambda h, lo, c: ind.adx(h, lo, c)[0],
    "minus_di": lambda h, lo, c: ind.adx(h, lo, c)[2],
    "wpr": lambda h, lo, c: ind.wpr(h, lo, c),
    "obv": lambda h, lo, c: ind.obv(c, np.arange(len(c)) % 7 + 1),
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


def test_sma_of_values_below_a_millionth_is_not_rounded_to_zero():
    """A series of tiny values (squared returns, a variance) is on no price grid coarser than its own
    digits: averaging it on the integer grid (1e-6 of a whole unit was "on the grid") read 0 everywhere."""
    r2 = np.array([3e-7, 5e-7, 2e-7, 4e-7])
    np.testing.assert_allclose(ind.sma(r2, 2), [np.nan, 4e-7, 3.5e-7, 3e-7], rtol=1e-12)
    squared = np.array([1.2e-9, 3.4e-9, 0.6e-9])  # off every grid of up to 8 decimals
    np.testing.assert_allclose(ind.sma(squared, 3)[-1], 5.2e-9 / 3, rtol=1e-12)
    shib = np.array([0.00001234, 0.00001236])  # an 8-digit quote keeps its grid
    assert ind.sma(shib, 2)[-1] == 0.00001235


RECURSIVE = {
    "ema": lambda h, lo, c: ind.ema(c, 3),
    "smma": lambda h, lo, c: ind.smma(c, 3),
    "rsi": lambda h, lo, c: ind.rsi(c, 3),
    "macd_main": lambda h, lo, c: ind.macd(c, 2, 3, 2)[0],
    "atr_wilder": lambda h, lo, c: ind.atr(h, lo, c, 3, smoothing="wilder"),
    "adx": lambda h, lo, c: ind.adx(h, lo, c, 3)[0],
    "plus_di": lambda h, lo, c: ind.adx(h, lo, c, 3)[1],
}


@pytest.mark.parametrize("name", sorted(RECURSIVE))
def test_a_recursive_indicator_is_nan_from_a_nan_price_on(name):
    """``y[i] = a·x[i] + (1 − a)·y[i−1]`` is NaN from a NaN price on, as the terminal's own recursion
    would be; pandas' ewm skipped the NaN and carried the last value (EMA 1.0 at the NaN bar, RSI 100)."""
    c = np.array([1.0, 1.2, 1.1, 1.3, 1.4, 1.2, np.nan, 1.5, 1.6, 1.4, 1.7, 1.8])
    h, lo = c + 0.05, c - 0.05
    clean = RECURSIVE[name](h[:6], lo[:6], c[:6])
    out = RECURSIVE[name](h, lo, c)
    np.testing.assert_array_equal(out[:6], clean)  # before the NaN: unchanged
    assert np.isnan(out[6:]).all(), out


@pytest.mark.parametrize("price", [1.10003, 0.98761, 1.11111, 1.05432])
def test_cci_of_equal_typical_prices_is_zero_whatever_the_rounding(price):
    """Bars of one shape (high +2 points, low −1) have equal typical prices, so the deviation is 0 and
    iCCI's rule reads 0; (h + l + c) / 3 rounds so that their mean is an ulp off, which read ±66.67."""
    n = 20
    close = np.full(n, price)
    out = ind.cci(np.round(close + 2e-5, 5), np.round(close - 1e-5, 5), close, 14)
    np.testing.assert_array_equal(out[13:], 0.0)
