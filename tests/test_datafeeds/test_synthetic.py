import numpy as np
import pandas as pd
import pytest

from datafeeds import BrokerClock, Timeframe, meta_of, synthetic_candles, validate
from datafeeds.validate import market_closed


def test_same_seed_same_frame_and_different_seed_different_frame():
    a = synthetic_candles("EURUSD", "M5", 3000, seed=11)
    b = synthetic_candles("EURUSD", "M5", 3000, seed=11)
    c = synthetic_candles("EURUSD", "M5", 3000, seed=12)
    pd.testing.assert_frame_equal(a, b)
    assert not a["close"].equals(c["close"])


@pytest.mark.parametrize("tf", ["M1", "M15", "H1", "H4", "D1", "W1", "MN1"])
def test_every_timeframe_is_valid_with_only_expected_gaps(tf):
    df = synthetic_candles("EURUSD", tf, 1500, seed=1)
    report = validate(df)
    assert len(df) == 1500 and meta_of(df).timeframe is Timeframe.parse(tf)
    assert report.unexpected_gaps == []


def test_no_bars_while_the_market_is_closed_and_weekend_gaps_exist():
    df = synthetic_candles("EURUSD", "H1", 24 * 60, seed=2)
    utc = df.index.as_unit("s").asi8
    assert not market_closed(utc, tolerance_minutes=0).any()
    assert len(validate(df).expected_gaps) >= 8


def test_volatility_clusters_and_follows_the_sessions():
    df = synthetic_candles("EURUSD", "H1", 50_000, seed=3)
    r = np.diff(np.log(df["close"].to_numpy()))
    a = np.abs(r)
    assert np.corrcoef(a[:-24], a[24:])[0, 1] > 0.1  # |returns| stay autocorrelated a day later
    kurtosis = np.mean((r - r.mean()) ** 4) / np.var(r) ** 2
    assert kurtosis > 3.5  # fatter tails than a normal distribution
    hour = df.index.hour[1:]
    overlap, asia = a[(hour >= 13) & (hour <= 15)].mean(), a[(hour >= 1) & (hour <= 4)].mean()
    assert overlap > 1.8 * asia
    ticks = df["tick_volume"].to_numpy()
    assert ticks[df.index.hour == 14].mean() > 1.8 * ticks[df.index.hour == 2].mean()


def test_spreads_widen_at_the_new_york_rollover():
    df = synthetic_candles("EURUSD", "H1", 20_000, seed=4)
    ny_hour = df.index.tz_convert("America/New_York").hour
    spread = df["spread"].to_numpy()
    assert np.median(spread[ny_hour == 17]) > 3 * np.median(spread[ny_hour == 10])


def test_symbol_defaults_digits_and_exact_prices():
    jpy = synthetic_candles("USDJPY", "H1", 100, seed=5)
    assert meta_of(jpy).digits == 3 and 50 < jpy["close"].iloc[0] < 200
    scaled = jpy[["open", "high", "low", "close"]].to_numpy() * 1000
    assert np.array_equal(np.rint(scaled) / 1000, jpy[["open", "high", "low", "close"]].to_numpy())


def test_window_and_broker_clock():
    df = synthetic_candles(
        "EURUSD", "D1", None, start="2021-01-01", end="2021-02-01", clock=BrokerClock(2, "us")
    )
    assert df.index[0] >= pd.Timestamp("2021-01-01", tz="UTC")
    assert df.index[-1] < pd.Timestamp("2021-02-01", tz="UTC")
    assert set(df.index.tz_convert("America/New_York").hour) == {17}  # broker midnight at UTC+2/us
    # Broker days Mon 4 .. Fri 29 January, plus Monday 1 February, which opens 22:00 UTC on 31 January;
    # Friday 1 January opened 22:00 UTC on 31 December, before the window.
    assert len(df) == 21


def test_bad_arguments():
    with pytest.raises(ValueError, match="bars"):
        synthetic_candles("EURUSD", "H1", -1)
    with pytest.raises(ValueError, match="annual_vol"):
        synthetic_candles("EURUSD", "H1", 10, annual_vol=0)
