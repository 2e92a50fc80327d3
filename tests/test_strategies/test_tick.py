"""``Tick``: MetaTrader's MqlTick as ``on_tick`` receives it, an immutable tuple with its time in UTC ns."""

import math

import pandas as pd
import pytest

from strategies import Tick


def test_a_tick_keeps_its_time_in_utc_and_its_prices():
    tick = Tick("2024-01-02 02:00:00.123+02:00", 1.1, 1.1002)
    assert tick.time == pd.Timestamp("2024-01-02 00:00:00.123", tz="UTC")
    assert tick.time_ns == tick.time.value and (tick.bid, tick.ask) == (1.1, 1.1002)
    assert math.isnan(tick.last) and tick.volume == 0.0
    naive = Tick(pd.Timestamp("2024-01-02 00:00:00.123"), 1.1, 1.1002)  # naive times are UTC
    assert naive == tick == Tick.at(tick.time_ns, 1.1, 1.1002)
    assert Tick("2024-01-02", 1.1, 1.1002, last=1.1001, volume=2).volume == 2.0


def test_a_tick_cannot_be_changed():
    tick = Tick("2024-01-02", 1.1, 1.1002)
    with pytest.raises(AttributeError):
        tick.bid = 1.2
