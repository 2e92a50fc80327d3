"""A bar whose first minute (or tick) comes after the broker's midnight while the bar opened before it (the
00:00 bar of the EA's timeframe missing, the minutes going on): the swap is charged at the rollover, the
server's midnight, to the positions held over it, so one held from before midnight and closed at that first
minute owes the night, and one opened there owes none at the next bar.

Flat EURUSD minutes at 1.10000 at the minutes given only (UTC server clock, midnight 00:00 UTC), spread 0,
a point 1.00 USD a lot; long swap -10 points a lot a night: -10.00 USD a lot a night, -30.00 on the night
after Wednesday (the triple day).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

import backtests.merged as merged
import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from datafeeds import resample
from datafeeds.symbols import BUILTIN
from datafeeds.ticks import TickMeta, make_ticks
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import H, _at, _in_time_order, _minutes

ROUTES = pytest.mark.parametrize(
    "route",
    ["one-symbol", "screened", "every-minute", "ticks-one-symbol", "ticks-screened", "ticks-every-tick"],
)
DAYS = pytest.mark.parametrize(("day", "nights"), [(0, 1), (1, 3)], ids=["tuesday", "wednesday"])


def _frames(day: int):
    """H1 bars at 21:00, 22:00 and 23:00 of day ``day`` after Tuesday 2024-01-02 and 01:00, 02:00 the next
    day, no bar of 00:00: the 23:00 bar's first minute (or tick) is 00:30 of the next day."""
    base = 24 * H * day
    rows = [(base + m, 1.1) for m in (21 * H, 21 * H + 59, 22 * H, 22 * H + 59)]
    rows += [(base + m, 1.1) for m in (24 * H + 30, 24 * H + 59, 25 * H, 25 * H + 59, 26 * H, 26 * H + 59)]
    m1 = _minutes("EURUSD", rows)
    frame = resample(m1, "H1")
    late = _at(base + 24 * H)
    frame = frame.rename(index={late: late - pd.Timedelta(hours=1)})
    return frame, m1


class _HoldOver(ExpertAdvisor):
    """Buys 1 lot at the decision of ``buy_at`` decisions (counted from 1), closes it at ``close_at``."""

    buy_at = 1
    close_at = 2
    seen: list

    def on_bar(self):
        self.seen.append(self.time_current)
        n = len(self.seen)
        if n == self.buy_at:
            self.buy(1.0)
        elif n == self.close_at:
            for p in self.positions():
                self.close(p.ticket)


def _swap(route, day, monkeypatch, buy_at, close_at):
    frame, m1 = _frames(day)
    ea = type("Hold", (_HoldOver,), {"buy_at": buy_at, "close_at": close_at, "seen": []})
    result = _result(route, frame, m1, ea, monkeypatch)
    base = 24 * H * day
    assert ea.seen[:2] == [_at(base + 22 * H), _at(base + 24 * H + 30)]
    assert len(result.trades) == 1
    return result.trades.iloc[0]


def _result(route, frame, m1, ea, monkeypatch):
    """``ea`` on EURUSD's ``frame`` with its minutes ``m1`` (or a tick at each minute) by ``route``."""
    model, prices = "ohlc1m", m1
    if route.startswith("ticks"):  # a tick at each minute's time, at its price
        ns = m1.index.as_unit("ns").asi8
        bid = m1["open"].to_numpy()
        model, prices = "ticks", make_ticks(ns, bid, bid.copy(), TickMeta("EURUSD", 5, "eurusd_ticks.csv"))
    paths = {"model": model, model if model == "ticks" else "m1": prices}
    if route.endswith("one-symbol"):
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, swap_long=-10.0)
        test = Backtest(frame, ea, account=config, forward=None, **paths)
    else:
        if route.startswith("every") or route.endswith("every-tick"):
            walk = merged_ticks if model == "ticks" else merged
            monkeypatch.setattr(walk, "_stop_out_possible", lambda *args: True)
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0)
        specs = {"EURUSD": replace(BUILTIN["EURUSD"], swap_long=-10.0)}
        paths[model if model == "ticks" else "m1"] = {"EURUSD": prices}
        test = Backtest({"EURUSD": frame}, ea, account=config, forward=None, specs=specs, **paths)
    result = test.run()
    _in_time_order(result)
    return result


@DAYS
@ROUTES
def test_a_position_closed_at_a_late_first_minute_after_midnight_pays_the_nights_swap(
    route, day, nights, monkeypatch
):
    """Bought at 22:00, closed at the 23:00 bar's first minute, 00:30 the next day: held over the rollover,
    it owes -10.00 x nights. The bar's opening checks took the day of the bar's time (23:00, the same day as
    22:00) and charged nothing: the night free, in the user's favour."""
    trade = _swap(route, day, monkeypatch, 1, 2)
    assert trade["exit_time"] == _at(24 * H * day + 24 * H + 30)
    assert trade["swap"] == pytest.approx(-10.0 * nights)
    assert trade["net_profit"] == pytest.approx(-10.0 * nights)


@DAYS
@ROUTES
def test_a_position_opened_at_a_late_first_minute_after_midnight_owes_no_swap_at_the_next_bar(
    route, day, nights, monkeypatch
):
    """Bought at the 23:00 bar's first minute, 00:30, closed at 02:00 the same day: never held over a
    rollover, no swap. The next bar's (01:00) day against the 23:00 bar's charged the night before the
    position existed: -10.00 x nights against the user."""
    trade = _swap(route, day, monkeypatch, 2, 4)
    assert trade["entry_time"] == _at(24 * H * day + 24 * H + 30)
    assert trade["swap"] == 0.0
    assert trade["net_profit"] == 0.0


class _StoppedOverMidnight(ExpertAdvisor):
    """Buys 1 lot with its stop-loss at 1.09500 at the first decision."""

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, sl=1.095)


@pytest.mark.xfail(
    strict=True,
    reason="a rollover inside a bar (its next bar missing) is charged at the next bar's opening only",
)
@ROUTES
def test_a_position_stopped_after_a_midnight_inside_its_bar_pays_the_nights_swap(route, monkeypatch):
    """Tuesday 22:00 bar, then a 23:00 bar that runs to 01:00 (the 00:00 bar missing): its minutes at 23:10
    (1.10000) and at 00:30 (1.09000, through the stop-loss at 1.09500). Bought at 22:00, held over
    Tuesday's midnight, stopped at 00:30 at 1.09000: -1,000.00 and one night's swap, -10.00. The broker
    charges swaps only where a bar opens, so the night inside the bar is free: swap 0.00, in the user's
    favour (and a position opened inside such a bar after midnight pays the night at the next bar)."""
    rows = [(m, 1.1) for m in (21 * H, 21 * H + 59, 22 * H, 22 * H + 59, 23 * H + 10)]
    rows += [(24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09), (25 * H + 59, 1.09)]
    m1 = _minutes("EURUSD", rows)
    frame = resample(m1, "H1")
    last, midnight = _at(23 * H), _at(24 * H)  # the 00:00 bar folded into the 23:00 bar
    frame.loc[last, "low"] = frame.loc[midnight, "low"]
    frame.loc[last, "close"] = frame.loc[midnight, "close"]
    frame = frame.drop(midnight)
    result = _result(route, frame, m1, _StoppedOverMidnight, monkeypatch)
    trade = result.trades.iloc[0]
    assert (trade["exit_time"], trade["exit_price"], trade["exit_reason"]) == (_at(24 * H + 30), 1.09, "sl")
    assert trade["profit"] == pytest.approx(-1_000.0)
    assert trade["swap"] == pytest.approx(-10.0)  # got 0.00


class _TodayLimit(ExpertAdvisor):
    """A buy limit at 1.09500 good for today (MetaTrader's ``ORDER_TIME_DAY``) at decision ``at``."""

    at = 1

    def on_bar(self):
        if len(self.bars) == self.at:
            self.buy_limit(1.0, 1.095, expiration="today")


def _today_frames():
    """The ``_frames(0)`` bars, the 23:00 bar's first minute (00:30) and the rest at 1.09000, through the
    limit; back at 1.10000 at 02:59, the last minute."""
    rows = [(m, 1.1) for m in (21 * H, 21 * H + 59, 22 * H, 22 * H + 59)]
    rows += [(m, 1.09) for m in (24 * H + 30, 24 * H + 59, 25 * H, 25 * H + 59, 26 * H)] + [
        (26 * H + 59, 1.1)
    ]
    m1 = _minutes("EURUSD", rows)
    frame = resample(m1, "H1")
    return frame.rename(index={_at(24 * H): _at(23 * H)}), m1


@ROUTES
def test_a_today_order_placed_before_midnight_is_retired_at_a_late_first_minute_after_it(route, monkeypatch):
    """Placed at 22:00 Tuesday, good for Tuesday: it expires at Wednesday 00:00, before the 23:00 bar's
    first minute (00:30, at 1.09000 through its price): retired there, never filled by that gap (a fill
    would make +1,000.00 by the last minute)."""
    result = _result(route, *_today_frames(), type("Today", (_TodayLimit,), {"at": 1}), monkeypatch)
    order = result.orders.iloc[0]
    assert (order["state"], order["expiration"], order["time_done"]) == (
        "expired",
        _at(24 * H),
        _at(24 * H + 30),
    )
    assert result.trades.empty


@ROUTES
def test_a_today_order_placed_at_a_late_first_minute_after_midnight_lives_to_the_next_midnight(
    route, monkeypatch
):
    """Placed at the 23:00 bar's first minute, 00:30 Wednesday (a buy limit at 1.08500, below the market
    at 1.09000, never reached): good for Wednesday, it expires at Thursday 00:00, never at Tuesday's end
    (the bar's day: already past at 00:30, which would refuse it, 10022)."""

    class Today(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) == 2:
                self.buy_limit(1.0, 1.085, expiration="today")

    result = _result(route, *_today_frames(), Today, monkeypatch)
    order = result.orders.iloc[0]
    assert (order["time_setup"], order["expiration"]) == (_at(24 * H + 30), _at(48 * H))
    assert (order["state"], order["time_done"]) == ("canceled", _at(26 * H))  # at the end of the test
    assert len(result.rejected) == 0
