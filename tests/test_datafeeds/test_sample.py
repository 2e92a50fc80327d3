import numpy as np
import pandas as pd
import pytest

from datafeeds import BrokerClock, Timeframe, load_candles, meta_of, read_sample
from datafeeds.sample import SampleSource, sample_path


def test_sample_is_read_from_the_installed_backtesting_package():
    path = sample_path()
    assert path.parts[-3:] == ("backtesting", "test", "EURUSD.csv")
    df = read_sample()
    assert len(df) == 5000
    assert df.index[0] == pd.Timestamp("2017-04-19 09:00", tz="UTC")
    assert df.index[-1] == pd.Timestamp("2018-02-07 15:00", tz="UTC")
    first = df.iloc[0]
    assert (first["open"], first["high"], first["low"], first["close"]) == (1.0716, 1.0722, 1.07083, 1.07219)
    assert first["tick_volume"] == 1413 and first["spread"] == 0 and first["real_volume"] == 0
    meta = meta_of(df)
    assert (meta.symbol, meta.timeframe, meta.digits, meta.clock) == (
        "EURUSD",
        Timeframe.H1,
        5,
        BrokerClock(),
    )


def test_sample_times_are_utc_new_york_close_weeks():
    df = read_sample()
    ny = df.index.tz_convert("America/New_York")
    sundays = ny[ny.day_of_week == 6]
    # Every week opens at 17:00 New York, before and after the DST switch of 2017-11-05.
    first_of_day = pd.Series(sundays.hour, index=sundays.normalize()).groupby(level=0).min()
    assert set(first_of_day) == {17}


def test_fixed_spread_option_and_default_source():
    assert (SampleSource(spread=8).load("EURUSD", "H1")["spread"] == 8).all()
    pd.testing.assert_frame_equal(load_candles(), read_sample())
    with pytest.raises(ValueError, match="spread"):
        SampleSource(spread=-1)


def test_sample_in_a_broker_clock_gives_terminal_like_d1_bars():
    d1 = SampleSource(clock="+2/us").load("EURUSD", "D1")
    broker = d1.index.tz_convert("Etc/GMT-2")  # UTC+2 wall clock (ignores DST, used only for weekdays here)
    assert not (d1.index.tz_convert("America/New_York").hour != 17).any()  # every D1 bar opens 17:00 NY
    assert set(broker.day_of_week) <= {0, 1, 2, 3, 4, 6}
    assert np.array_equal(d1["tick_volume"].sum(), read_sample()["tick_volume"].sum())


def test_sample_holds_only_eurusd():
    with pytest.raises(LookupError, match="only EURUSD"):
        SampleSource().load("GBPUSD", "H1")
    with pytest.raises(ValueError, match="cannot resample EURUSD H1 to M15"):
        SampleSource().load("EURUSD", "M15")
