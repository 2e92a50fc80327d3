import numpy as np
import pandas as pd
import pytest

from datafeeds import RATES_DTYPE, BrokerClock, CandleMeta, Timeframe, from_rates, make_frame, to_rates


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


@pytest.mark.parametrize("rule,switch", [("us", 1_699_164_000), ("eu", 1_698_541_200)])
def test_broker_hour_repeated_at_the_autumn_switch_reads_as_the_earlier_one(rule, switch):
    # 2023-11-05 06:00 UTC (New York) and 2023-10-29 01:00 UTC (EU): clocks go back one hour.
    clock = BrokerClock(2, rule)
    hours = switch + 3600 * np.arange(-3, 4)
    broker = clock.to_broker_seconds(hours)
    assert list(np.diff(broker) // 3600) == [1, 1, 0, 1, 1, 1]  # the broker hour after the switch repeats
    back = clock.to_utc_seconds(broker)
    assert back[3] == switch - 3600  # the ambiguous reading resolves to the pre-switch hour
    keep = np.arange(len(hours)) != 3
    assert np.array_equal(back[keep], hours[keep])
    assert np.array_equal(clock.to_broker_seconds(back), broker)  # broker seconds survive the round trip


@pytest.mark.parametrize(
    "name,value", [("M1", 1), ("H1", 16385), ("D1", 16408), ("W1", 32769), ("MN1", 49153)]
)
def test_timeframe_constants_match_metatrader(name, value):
    assert Timeframe.parse(name) == value
    assert Timeframe.parse(value).name == name


def test_unknown_timeframe_lists_valid_names():
    with pytest.raises(ValueError, match="H1"):
        Timeframe.parse("H5")


@pytest.mark.parametrize(
    "column,values,shown",
    [
        ("tick_volume", [1, -2, 3], "-2"),
        ("spread", [1.0, np.nan, 2.0], "nan"),
        ("real_volume", [1, 2, 3.5], "3.5"),
    ],
)
def test_integer_columns_refuse_values_a_cast_would_garble(column, values, shown):
    index = pd.date_range("2017-06-06 10:00", periods=3, freq="h")
    data = {"open": [1.1] * 3, "high": [1.2] * 3, "low": [1.0] * 3, "close": [1.1] * 3, column: values}
    with pytest.raises(ValueError, match=rf"from 'mine': {column} {shown} at row \d is not a whole number"):
        make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, source="mine"))
    data[column] = [1.0, 2.0, 3.0]  # whole floats are fine
    assert make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1))[column].tolist() == [1, 2, 3]


def test_one_utc_reading_of_time_bounds():
    import datetime as dt

    import pandas as pd

    from datafeeds.clock import utc_bound, utc_seconds

    noon = 1675166400  # 2023-01-31 12:00 UTC
    assert utc_seconds("2023-01-31 12:00") == noon  # naive means UTC
    assert utc_seconds(pd.Timestamp("2023-01-31 14:00", tz="Europe/Athens")) == noon
    assert utc_seconds(dt.datetime(2023, 1, 31, 12, 0, 0, 999_999)) == noon  # rounded down
    assert utc_seconds(None) is None and utc_bound(None) is None
    assert utc_bound("2023-01-31 12:00").tz is not None
    for bad in ("", "soon", "NaT", [1]):
        with pytest.raises(ValueError, match="cannot read start"):
            utc_seconds(bad, "start")
