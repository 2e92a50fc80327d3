"""The status line's "today": the broker's server day, read with the bars' broker clock."""

from __future__ import annotations

import pandas as pd

from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC, BrokerClock
from datafeeds.timeframes import Timeframe
from neuronet.live.status import StatusLine, server_day
from strategies.trade import Account


class _Terminal:
    """A live trade context that reports a given equity and no positions."""

    def __init__(self):
        self.equity = 0.0

    def account(self) -> Account:
        return Account(self.equity, self.equity, 0.0, self.equity, 100.0, "USD")

    def positions(self) -> list:
        return []


def _lines(clock, times_equities) -> list[str]:
    meta = CandleMeta("EURUSD", Timeframe.H1, 5, clock)
    terminal, out = _Terminal(), []
    status = StatusLine(out.append, "EURUSD", "H1")
    row = pd.Series({"close": 1.1, "spread": 10.0})
    for when, equity in times_equities:
        terminal.equity = equity
        status.show(pd.Timestamp(when, tz="UTC"), row, meta, terminal, None)
    return [line.split(" today ")[1] for line in out]


def test_today_starts_at_the_servers_midnight_not_the_utc_date():
    clock = BrokerClock(2.0, "us")  # UTC+2 in winter: the server's day begins at 22:00 UTC
    today = _lines(
        clock,
        [
            ("2024-03-07 20:00", 10_000.0),
            ("2024-03-07 21:00", 10_010.0),  # 23:00 on the server: still the 7th
            (
                "2024-03-07 22:00",
                10_025.0,
            ),  # 00:00 on the server: the 8th began, counted from the close before
            ("2024-03-07 23:00", 10_020.0),
            ("2024-03-08 00:00", 10_030.0),  # the UTC date changes: the server's day does not
        ],
    )
    assert today == ["+0.00", "+10.00", "+15.00", "+10.00", "+20.00"]


def test_the_server_day_follows_daylight_saving():
    clock = BrokerClock(2.0, "us")  # UTC+3 once New York is on summer time (from 2024-03-10)
    assert server_day(pd.Timestamp("2024-03-12 21:00", tz="UTC"), clock) == server_day(
        pd.Timestamp("2024-03-13 00:00", tz="UTC"), clock
    )
    assert server_day(pd.Timestamp("2024-03-12 20:59", tz="UTC"), clock) + 1 == server_day(
        pd.Timestamp("2024-03-12 21:00", tz="UTC"), clock
    )
    today = _lines(clock, [("2024-03-12 20:00", 100.0), ("2024-03-12 21:00", 90.0)])
    assert today == ["+0.00", "-10.00"]


def test_a_utc_server_counts_by_the_utc_date():
    today = _lines(
        UTC, [("2024-03-07 22:00", 100.0), ("2024-03-07 23:00", 105.0), ("2024-03-08 00:00", 101.0)]
    )
    assert today == ["+0.00", "+5.00", "-4.00"]
