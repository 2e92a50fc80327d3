"""Fractal labels (the corrected inequalities), feature windows and the training-only scaler."""

import numpy as np
import pandas as pd
import pytest

from datafeeds.clock import BrokerClock
from strategies.features import (
    BUY,
    SELL,
    UNDEFINED,
    UNKNOWN,
    Scaler,
    bar_features,
    fractal_labels,
    server_calendar,
    windows,
)


def test_three_bar_labels_use_the_correct_inequalities():
    high = np.array([1.0, 3.0, 2.0, 2.0, 2.0, 5.0, 5.0, 1.0])
    low = np.array([5.0, 4.0, 1.0, 1.0, 3.0, 4.0, 4.0, 4.0])
    labels = fractal_labels(high, low)
    assert labels[0] == UNKNOWN and labels[-1] == UNKNOWN
    assert labels[1] == SELL  # older 1 < 3, newer 2 <= 3
    # Lower fractal at bar 2: older low 4 > 1 and newer low 1 >= 1 (non-strict on the newer side).
    assert labels[2] == BUY
    # Bar 3: older low equals (1 > 1 is false) -> not a lower fractal.
    assert labels[3] == UNDEFINED
    # Bar 5: older high 2 < 5 and newer high 5 <= 5 -> upper fractal; bar 6: older equal -> not.
    assert labels[5] == SELL and labels[6] == UNDEFINED


def test_the_reversed_buy_rule_of_the_article_is_not_used():
    # A local *maximum* of lows must never be a buy signal (the printed Part 2/5 inequalities would say so).
    high = np.array([10.0, 10.0, 10.0])
    low = np.array([1.0, 2.0, 1.0])
    assert fractal_labels(high, low)[1] == UNDEFINED


def test_bar_that_is_both_fractals_is_undefined():
    high = np.array([1.0, 3.0, 1.0])
    low = np.array([1.0, 0.0, 1.0])
    assert fractal_labels(high, low)[1] == UNDEFINED


def test_five_bar_rule_is_strict_towards_newer_bars():
    high = np.array([1.0, 2.0, 3.0, 2.0, 1.0, 3.0, 3.0, 1.0, 0.0])
    low = np.full(9, 0.5)
    labels = fractal_labels(high, low, "5bar")
    assert labels[2] == SELL
    assert list(labels[:2]) == [UNKNOWN, UNKNOWN] and list(labels[-2:]) == [UNKNOWN, UNKNOWN]
    assert labels[5] == UNDEFINED  # the newer neighbour is equal: MT5 requires strictly greater
    assert labels[6] == SELL  # equal to the older neighbour is allowed


def test_unknown_rule_is_rejected():
    with pytest.raises(ValueError, match="fractal rule"):
        fractal_labels(np.ones(5), np.ones(5), "7bar")


def _frame(n, rng):
    close = 1.1 + np.cumsum(rng.normal(0, 1e-3, n))
    open_ = np.concatenate(([1.1], close[:-1]))
    high = np.maximum(open_, close) + 5e-4
    low = np.minimum(open_, close) - 5e-4
    time = pd.date_range("2020-01-06", periods=n, freq="h", tz="UTC")
    return open_, high, low, close, rng.integers(100, 2000, n), time


def test_feature_rows_and_windows(rng):
    o, h, lo, c, v, t = _frame(120, rng)
    f = bar_features(o, h, lo, c, v, t)
    assert f.shape == (120, 12)
    assert f[5, 4] == t[5].hour and f[5, 5] == 1 and f[5, 6] == t[5].month  # 2020-01-06 is a Monday
    x, rows = windows(f, 20)
    assert x.shape[1] == 240
    first = rows[0]
    assert np.isfinite(f[first - 19 : first + 1]).all() and not np.isfinite(f[first - 20]).all()
    np.testing.assert_array_equal(x[0].reshape(20, 12), f[first - 19 : first + 1])


def test_features_are_causal(rng):
    o, h, lo, c, v, t = _frame(200, rng)
    full = bar_features(o, h, lo, c, v, t)
    part = bar_features(o[:150], h[:150], lo[:150], c[:150], v[:150], t[:150])
    np.testing.assert_allclose(part, full[:150], equal_nan=True, rtol=1e-10)


def test_scaler_round_trip_and_constant_columns():
    x = np.array([[1.0, 5.0], [3.0, 5.0]])
    s = Scaler.fit(x)
    np.testing.assert_allclose(s.transform(x), [[-1.0, 0.0], [1.0, 0.0]])
    assert Scaler.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="zero training rows"):
        Scaler.fit(np.empty((0, 2)))


def test_weekday_is_mql5s_with_sunday_zero():
    """``MqlDateTime.day_of_week``: 0 = Sunday ... 6 = Saturday (pandas counts Monday = 0)."""
    t = pd.date_range("2024-03-03", periods=7, freq="D", tz="UTC")  # Sunday .. Saturday
    np.testing.assert_array_equal(server_calendar(t)[:, 1], [0, 1, 2, 3, 4, 5, 6])


def test_calendar_is_read_on_the_server_clock():
    """A UTC+2 (US DST) server's bar at 2024-03-08 22:00 UTC is Saturday 00:00 on its clock (winter), and
    after New York's switch on 2024-03-10 the same UTC hour is 01:00 Monday on a UTC+3 clock."""
    clock = BrokerClock(2.0, "us")
    t = pd.DatetimeIndex(["2024-03-08 22:00", "2024-03-10 22:00", "2024-12-31 22:30"], tz="UTC")
    np.testing.assert_array_equal(server_calendar(t, clock), [[0, 6, 3], [1, 1, 3], [0, 3, 1]])
    features = bar_features(*(np.ones(3),) * 5, t, clock)
    np.testing.assert_array_equal(features[:, 4:7], server_calendar(t, clock))
