from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from datafeeds import (
    UTC,
    BrokerClock,
    CandleDataError,
    Repair,
    from_rates,
    guess_clock,
    make_frame,
    meta_of,
    read_sample,
    to_rates,
    validate,
)
from datafeeds.validate import market_closed

GOOD = (1.1000, 1.1010, 1.0990, 1.1005)


def test_sample_is_valid_with_only_weekend_and_holiday_gaps():
    report = validate(read_sample(), "sample")
    assert len(report.frame) == 5000
    assert report.unexpected_gaps == []
    assert len(report.expected_gaps) == 42  # 40 weekends + Christmas and New Year's Day long weekends
    christmas = [g for g in report.gaps if g.before == pd.Timestamp("2017-12-22 21:00", tz="UTC")]
    assert christmas and christmas[0].expected and christmas[0].missing == 72


def test_missing_bars_inside_a_session_are_reported_not_raised(candles):
    df = candles(["2017-06-06 10:00", "2017-06-06 11:00", "2017-06-06 14:00"], [GOOD] * 3)
    report = validate(df)
    assert [(g.missing, g.expected) for g in report.gaps] == [(2, False)]
    assert report.unexpected_gaps[0].before == pd.Timestamp("2017-06-06 11:00", tz="UTC")
    assert "1 unexpected (2 bars)" in report.format()


def test_weekend_gap_is_expected(candles):
    # Friday 2017-06-09 20:00 UTC (16:00 New York) -> Sunday 21:00 UTC (17:00 New York)
    df = candles(["2017-06-09 20:00", "2017-06-11 21:00"], [GOOD] * 2)
    (gap,) = validate(df).gaps
    assert gap.expected and gap.missing == 48


def test_gap_that_eats_into_friday_afternoon_is_unexpected(candles):
    df = candles(["2017-06-09 12:00", "2017-06-11 21:00"], [GOOD] * 2)
    assert not validate(df).gaps[0].expected


def test_christmas_is_expected_only_with_holidays_on(candles):
    # Monday 2017-12-25 closed all day: Friday 21:00 UTC .. Monday 22:00 UTC
    df = candles(["2017-12-22 21:00", "2017-12-25 22:00"], [GOOD] * 2)
    assert validate(df).gaps[0].expected
    assert not validate(df, holidays=False).gaps[0].expected


def test_market_closed_follows_new_york_dst():
    summer_open = pd.Timestamp("2017-06-11 21:00", tz="UTC").value // 10**9  # 17:00 EDT Sunday
    winter_open = pd.Timestamp("2017-12-10 22:00", tz="UTC").value // 10**9  # 17:00 EST Sunday
    closed = market_closed(np.array([summer_open, winter_open]), tolerance_minutes=0)
    assert not closed.any()
    closed = market_closed(np.array([summer_open, winter_open]) - 60, tolerance_minutes=0)
    assert closed.all()


@pytest.mark.parametrize(
    "row,problem",
    [
        ((1.1, 1.1010, 1.1002, 1.1005), "low above open or close"),
        ((1.1, 1.1003, 1.0990, 1.1005), "high below open or close"),
        ((1.1, np.nan, 1.0990, 1.1005), "missing or non-finite prices"),
        ((1.1, np.inf, 1.0990, 1.1005), "missing or non-finite prices"),
        ((0.0, 1.1010, 0.0, 1.1005), "not positive"),
    ],
)
def test_bad_prices_raise_naming_origin_and_rows(row, problem, candles):
    df = candles(["2017-06-06 10:00", "2017-06-06 11:00", "2017-06-06 12:00"], [GOOD, row, GOOD])
    with pytest.raises(CandleDataError, match=problem) as err:
        validate(df, "broker.csv")
    text = str(err.value)
    assert text.startswith("broker.csv: ")
    assert "2017-06-06 11:00:00" in text and "(1 row)" in text
    assert "\n" not in text


def test_error_shows_at_most_five_rows_and_a_count(candles):
    times = [f"2017-06-06 {h:02d}:00" for h in range(10)]
    df = candles(times, [(1.1, 1.1, 1.2, 1.1)] * 10)
    with pytest.raises(CandleDataError) as err:
        validate(df, "x")
    assert "(10 rows)" in str(err.value) and "and 5 more" in str(err.value)
    assert str(err.value).count("2017-06-06") == 5


def test_line_numbers_are_named_when_known(candles):
    df = candles(["2017-06-06 10:00", "2017-06-06 11:00"], [GOOD, (1.1, 1.0, 1.0, 1.1)])
    with pytest.raises(CandleDataError, match="line 7 2017-06-06 11:00"):
        validate(df, "f.csv", lines=np.array([6, 7]))


def test_duplicates_and_disorder_raise_then_repair_reports(candles):
    df = candles(
        ["2017-06-06 10:00", "2017-06-06 12:00", "2017-06-06 11:00", "2017-06-06 11:00"],
        [GOOD, GOOD, (1.2, 1.3, 1.1, 1.2), (1.3, 1.4, 1.2, 1.3)],
    )
    with pytest.raises(CandleDataError, match="go backwards"):
        validate(df)
    with pytest.raises(CandleDataError, match="duplicate bar times"):
        validate(df, repair=Repair(sort=True))
    report = validate(df, repair=Repair(sort=True, drop_duplicates=True))
    assert list(report.frame.index.hour) == [10, 11, 12]
    assert report.frame["open"].iloc[1] == 1.2  # the first of the duplicates is kept
    assert report.changes[0] == "sorted bars into time order"
    assert "dropped 1 duplicate bars: 2017-06-06 11:00" in report.changes[1]
    assert len(df) == 4  # the input is never modified
    assert meta_of(report.frame).symbol == "EURUSD"


def test_drop_invalid_reports_each_dropped_row(candles):
    df = candles(
        ["2017-06-06 10:00", "2017-06-06 11:00", "2017-06-06 12:00"],
        [GOOD, (1.1, 1.0, 1.0, 1.1), GOOD],
        spread=[1, 2, -3],
    )
    report = validate(df, repair=Repair(drop_invalid=True))
    assert list(report.frame.index.hour) == [10]
    assert any("high below open or close: 2017-06-06 11:00" in c for c in report.changes)
    assert any("negative spread: 2017-06-06 12:00" in c for c in report.changes)
    assert "repaired" in report.format()


def test_times_off_the_timeframe_grid_are_invalid(candles):
    df = candles(["2017-06-06 10:00", "2017-06-06 11:30"], [GOOD] * 2)
    with pytest.raises(CandleDataError, match="off the H1 grid"):
        validate(df)
    df = candles(["2017-06-06 10:00", "2017-06-06 11:00:00.250"], [GOOD] * 2)
    with pytest.raises(CandleDataError, match="fractions of a second"):
        validate(df)


def test_wrong_dtype_is_named(candles):
    df = candles(["2017-06-06 10:00"], [GOOD])
    df["spread"] = df["spread"].astype(np.float64)
    with pytest.raises(CandleDataError, match="spread is float64, expected int32"):
        validate(df, "x")


def test_frame_without_metadata_is_refused(candles):
    df = candles(["2017-06-06 10:00"], [GOOD])
    df.attrs.clear()
    with pytest.raises(ValueError, match="no candle metadata"):
        validate(df)


def _stamped_in(clock: BrokerClock, drop: slice | None = None) -> pd.DataFrame:
    """The sample as a file exported in ``clock`` and then read as if its times were UTC."""
    sample = read_sample()
    in_clock = make_frame(sample, sample.index, replace(meta_of(sample), clock=clock))
    rates = to_rates(in_clock)
    if drop is not None:
        rates = np.delete(rates, np.arange(len(rates))[drop])
    return from_rates(rates, meta_of(sample))


@pytest.mark.parametrize(
    "clock", [BrokerClock(2, "us"), BrokerClock(2, "eu"), BrokerClock(3), BrokerClock(-5, "us")]
)
def test_guess_clock_finds_the_server_clock_of_a_file_read_as_utc(clock):
    report = validate(_stamped_in(clock))
    assert report.unexpected_gaps  # the weekends are shifted off the New York close
    assert guess_clock(report) == clock


def test_guess_clock_stays_quiet_for_utc_data_and_real_holes():
    assert guess_clock(validate(read_sample())) is None  # nothing unexpected
    holed = validate(_stamped_in(BrokerClock(2, "us"), drop=slice(100, 103)))  # three bars of a Tuesday
    assert guess_clock(holed) is None
    assert guess_clock(validate(_stamped_in(UTC, drop=slice(100, 103)))) is None
