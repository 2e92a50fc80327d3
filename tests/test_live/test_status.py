"""The status line's "today": the P&L the daily loss limit counts (``TerminalTrade.day_pnl``), of the
broker's server day read with the bars' broker clock."""

from __future__ import annotations

import pandas as pd

from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC, BrokerClock
from datafeeds.timeframes import Timeframe
from neuronet.live.day_pnl import DayPnl
from neuronet.live.status import StatusLine, server_day
from strategies.trade import Account


class _Terminal:
    """A live trade context with no positions whose P&L of server day ``d`` is ``d``'s day of the month
    (so the line shows which day it asked for), a part of it unknown when ``unknown`` says why."""

    def __init__(self):
        self.equity = 0.0
        self.unknown: tuple[str, ...] = ()

    def account(self) -> Account:
        return Account(self.equity, self.equity, 0.0, self.equity, 100.0, "USD")

    def positions(self) -> list:
        return []

    def day_pnl(self, day: int) -> DayPnl:
        return DayPnl(float(pd.Timestamp(day * 86400, unit="s").day), self.unknown)


def _lines(clock, times, unknown: tuple[str, ...] = ()) -> list[str]:
    meta = CandleMeta("EURUSD", Timeframe.H1, 5, clock)
    terminal, out = _Terminal(), []
    terminal.unknown = unknown
    status = StatusLine(out.append, "EURUSD", "H1")
    row = pd.Series({"close": 1.1, "spread": 10.0})
    for when in times:
        status.show(pd.Timestamp(when, tz="UTC"), row, meta, terminal, None)
    return [line.split(" today ")[1] for line in out]


def test_today_starts_at_the_servers_midnight_not_the_utc_date():
    clock = BrokerClock(2.0, "us")  # UTC+2 in winter: the server's day begins at 22:00 UTC
    today = _lines(
        clock,
        [
            "2024-03-07 20:00",
            "2024-03-07 21:00",  # 23:00 on the server: still the 7th
            "2024-03-07 22:00",  # 00:00 on the server: the 8th began
            "2024-03-08 00:00",  # the UTC date changes: the server's day does not
        ],
    )
    assert today == ["+7.00", "+7.00", "+8.00", "+8.00"]


def test_the_server_day_follows_daylight_saving():
    clock = BrokerClock(2.0, "us")  # UTC+3 once New York is on summer time (from 2024-03-10)
    assert server_day(pd.Timestamp("2024-03-12 21:00", tz="UTC"), clock) == server_day(
        pd.Timestamp("2024-03-13 00:00", tz="UTC"), clock
    )
    assert server_day(pd.Timestamp("2024-03-12 20:59", tz="UTC"), clock) + 1 == server_day(
        pd.Timestamp("2024-03-12 21:00", tz="UTC"), clock
    )
    assert _lines(clock, ["2024-03-12 20:00", "2024-03-12 21:00"]) == ["+12.00", "+13.00"]


def test_a_utc_server_counts_by_the_utc_date():
    today = _lines(UTC, ["2024-03-07 22:00", "2024-03-07 23:00", "2024-03-08 00:00"])
    assert today == ["+7.00", "+7.00", "+8.00"]


def test_a_day_pnl_with_an_unknown_part_is_marked_on_the_status_line():
    today = _lines(UTC, ["2024-03-07 22:00"], unknown=("EURUSD: no M1 bar at the start of the day",))
    assert today == ["+7.00?"]
