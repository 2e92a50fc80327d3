import numpy as np
import pandas as pd
import pytest

from datafeeds import BrokerClock, Timeframe, meta_of, read_sample, resample, validate

M15_TIMES = [
    "2017-06-06 10:00",
    "2017-06-06 10:15",
    "2017-06-06 10:30",
    "2017-06-06 10:45",
    "2017-06-06 11:15",  # 11:00 is missing: the H1 bar is still labelled 11:00
    "2017-06-06 11:30",
]
M15_OHLC = [
    (1.1000, 1.1010, 1.0995, 1.1005),
    (1.1005, 1.1020, 1.1000, 1.1015),
    (1.1015, 1.1018, 1.0990, 1.0992),
    (1.0992, 1.1001, 1.0985, 1.0999),
    (1.0999, 1.1030, 1.0998, 1.1025),
    (1.1025, 1.1026, 1.1011, 1.1012),
]


@pytest.fixture
def m15(candles):
    return candles(
        M15_TIMES,
        M15_OHLC,
        timeframe="M15",
        tick_volume=[10, 20, 30, 40, 5, 6],
        spread=[5, 3, 7, 4, 9, 8],
        real_volume=[100, 200, 0, 50, 0, 0],
    )


def test_m15_to_h1_matches_hand_computed_bars(m15):
    h1 = resample(m15, "H1")
    assert list(h1.index) == [
        pd.Timestamp("2017-06-06 10:00", tz="UTC"),
        pd.Timestamp("2017-06-06 11:00", tz="UTC"),
    ]
    assert h1[["open", "high", "low", "close"]].to_numpy().tolist() == [
        [1.1000, 1.1020, 1.0985, 1.0999],
        [1.0999, 1.1030, 1.0998, 1.1012],
    ]
    assert h1["tick_volume"].tolist() == [100, 11]
    assert h1["real_volume"].tolist() == [350, 0]
    assert h1["spread"].tolist() == [3, 8]  # the lowest spread of the constituent bars
    assert meta_of(h1).timeframe is Timeframe.H1
    assert h1.dtypes.equals(m15.dtypes)
    validate(h1)


@pytest.mark.parametrize("rule,expected", [("max", [7, 9]), ("mean", [5, 8]), ("last", [4, 8])])
def test_other_spread_rules(m15, rule, expected):
    assert resample(m15, "H1", spread=rule)["spread"].tolist() == expected


def test_d1_buckets_at_broker_midnight_across_dst(candles):
    times = [
        "2017-11-03 20:00",  # Friday 23:00 broker (UTC+3 in summer time)
        "2017-11-03 20:30",
        "2017-11-05 22:00",  # Monday 00:00 broker (UTC+2 after New York's switch on Nov 5)
        "2017-11-05 23:00",
    ]
    ohlc = [(1.2, 1.3, 1.1, 1.25), (1.25, 1.26, 1.24, 1.24), (1.3, 1.4, 1.2, 1.35), (1.35, 1.5, 1.3, 1.45)]
    m30 = candles(times, ohlc, timeframe="M30", clock=BrokerClock(2, "us"))
    d1 = resample(m30, "D1")
    assert list(d1.index) == [
        pd.Timestamp("2017-11-02 21:00", tz="UTC"),  # broker 2017-11-03 00:00
        pd.Timestamp("2017-11-05 22:00", tz="UTC"),  # broker 2017-11-06 00:00
    ]
    assert d1[["open", "high", "low", "close"]].to_numpy().tolist() == [
        [1.2, 1.3, 1.1, 1.24],
        [1.3, 1.5, 1.2, 1.45],
    ]
    # The same bars bucketed in UTC put the two Sunday-evening bars on Sunday.
    utc = resample(m30, "D1", clock=BrokerClock())
    assert [t.strftime("%m-%d %H") for t in utc.index] == ["11-03 00", "11-05 00"]
    assert meta_of(utc).clock == BrokerClock()


def test_w1_opens_on_sunday_and_mn1_on_the_first(candles):
    days = ["2017-05-31", "2017-06-04", "2017-06-05", "2017-06-09", "2017-06-11", "2017-07-03"]
    ohlc = [
        (1.00, 1.05, 0.95, 1.01),
        (1.10, 1.15, 1.05, 1.11),
        (1.20, 1.25, 1.15, 1.21),
        (1.30, 1.45, 1.25, 1.31),
        (1.40, 1.45, 1.35, 1.41),
        (1.50, 1.55, 1.45, 1.51),
    ]
    d1 = candles(days, ohlc, timeframe="D1", tick_volume=[1, 2, 3, 4, 5, 6])
    w1 = resample(d1, "W1")
    assert [t.strftime("%Y-%m-%d %a") for t in w1.index] == [
        "2017-05-28 Sun",
        "2017-06-04 Sun",
        "2017-06-11 Sun",
        "2017-07-02 Sun",
    ]
    assert w1["tick_volume"].tolist() == [1, 9, 5, 6]
    assert w1["open"].tolist() == [1.0, 1.1, 1.4, 1.5]
    assert w1["close"].tolist() == [1.01, 1.31, 1.41, 1.51]
    mn1 = resample(d1, "MN1")
    assert [t.strftime("%Y-%m-%d") for t in mn1.index] == ["2017-05-01", "2017-06-01", "2017-07-01"]
    assert mn1["high"].tolist() == [1.05, 1.45, 1.55]
    assert mn1["low"].tolist() == [0.95, 1.05, 1.45]


@pytest.mark.parametrize("source,target", [("H1", "M15"), ("M3", "M5"), ("W1", "MN1"), ("D1", "H12")])
def test_refuses_higher_to_lower_or_non_multiple(candles, source, target):
    df = candles(["2017-06-04"], [(1.1, 1.2, 1.0, 1.1)], timeframe=source)
    with pytest.raises(ValueError, match=f"cannot resample EURUSD {source} to {target}"):
        resample(df, target)


def test_sample_d1_agrees_with_an_independent_groupby():
    h1 = read_sample()
    d1 = resample(h1, "D1")
    g = h1.groupby(h1.index.floor("D"))
    ref = pd.DataFrame(
        {
            "open": g["open"].first(),
            "high": g["high"].max(),
            "low": g["low"].min(),
            "close": g["close"].last(),
            "tick_volume": g["tick_volume"].sum(),
        }
    )
    assert np.array_equal(d1.index.asi8, ref.index.as_unit("ns").asi8)
    for col in ref.columns:
        assert np.array_equal(d1[col].to_numpy(), ref[col].to_numpy().astype(d1[col].dtype)), col


def test_empty_frame_resamples_to_an_empty_frame_of_the_target_timeframe(m15):
    empty = m15.iloc[:0]
    out = resample(empty, "D1")
    assert len(out) == 0 and meta_of(out).timeframe is Timeframe.D1 and out.dtypes.equals(m15.dtypes)
