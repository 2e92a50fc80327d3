import numpy as np
import pytest

from datafeeds import RATES_DTYPE, BrokerClock, CandleMeta, Timeframe, from_rates, to_rates


def _rates(n: int, clock: BrokerClock, start: int = 1_500_000_000) -> np.ndarray:
    """Hourly bars on weekdays, stamped in broker time as a terminal would serve them.

    DST switches happen on Sundays, when FX is closed, so real terminal data never holds the broker hour
    that is skipped or repeated; weekend hours are left out for that reason.
    """
    rng = np.random.default_rng(0)
    utc = start + 3600 * np.arange(n)
    utc = utc[((utc // 86400 + 4) % 7) < 5]  # 1970-01-01 was a Thursday: keep Monday..Friday
    n = len(utc)
    r = np.zeros(n, dtype=RATES_DTYPE)
    r["time"] = clock.to_broker_seconds(utc)
    r["open"] = 1.1 + rng.normal(0, 1e-3, n).round(5)
    r["close"] = r["open"] + rng.normal(0, 1e-3, n).round(5)
    r["high"] = np.maximum(r["open"], r["close"]) + 0.0002
    r["low"] = np.minimum(r["open"], r["close"]) - 0.0002
    r["tick_volume"] = rng.integers(1, 5000, n)
    r["spread"] = rng.integers(0, 30, n)
    r["real_volume"] = rng.integers(0, 2**40, n)
    return r


@pytest.mark.parametrize("clock", [BrokerClock(), BrokerClock(2, "us"), BrokerClock(1, "eu")])
def test_rates_round_trip_is_exact(clock):
    rates = _rates(24 * 400, clock)
    df = from_rates(rates, CandleMeta("EURUSD", Timeframe.H1, 5, clock))
    assert list(df.columns) == ["open", "high", "low", "close", "tick_volume", "spread", "real_volume"]
    assert str(df.index.tz) == "UTC"
    back = to_rates(df)
    assert back.dtype == RATES_DTYPE
    assert np.array_equal(back, rates)


def test_broker_clock_shifts_by_offset_and_dst():
    clock = BrokerClock(2, "us")
    winter = np.array([1_483_228_800])  # 2017-01-01 00:00 UTC
    summer = np.array([1_498_867_200])  # 2017-07-01 00:00 UTC
    assert clock.to_broker_seconds(winter)[0] - winter[0] == 2 * 3600
    assert clock.to_broker_seconds(summer)[0] - summer[0] == 3 * 3600


@pytest.mark.parametrize(
    "name,value", [("M1", 1), ("H1", 16385), ("D1", 16408), ("W1", 32769), ("MN1", 49153)]
)
def test_timeframe_constants_match_metatrader(name, value):
    assert Timeframe.parse(name) == value
    assert Timeframe.parse(value).name == name


def test_unknown_timeframe_lists_valid_names():
    with pytest.raises(ValueError, match="H1"):
        Timeframe.parse("H5")
