"""Defects of the backtest broker found by attacking the live surfaces (paper trading is that broker):
"today" and the swap rollover at the trade server's midnight, an integer too large for a float refused
like any other bad volume or stop. One is left failing (strict xfail) as a decision for the broker's
owner: MetaTrader's trade server refuses prices off the symbol's tick grid, where the backtest puts an
EA's prices on the grid (the nearest point) and a live run sends them as given."""

from __future__ import annotations

import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import load_candles
from strategies.base import ExpertAdvisor

SEEN: dict = {}  # what the EAs below saw, read by their tests


@pytest.fixture(autouse=True)
def _forget():
    SEEN.clear()


@pytest.fixture(scope="module")
def plus2():
    """Hourly bars of a UTC+2 (US DST) server: in January its day begins at 22:00 UTC."""
    return load_candles("synthetic", bars=400, seed=3, clock="+2/us", timeframe="H1")


class _TodayAt21(ExpertAdvisor):
    """A sell limit far above the market, good for "today", placed at 21:00 UTC (23:00 on the server)."""

    def on_bar(self) -> None:
        if not self.orders() and self.time_current.hour == 21:
            self.sell_limit(0.1, self.bars.close[-1] + 0.05, expiration="today")
            SEEN["today"] = self.orders()[0].expiration


def test_today_ends_at_the_servers_midnight_not_at_utc_midnight(plus2):
    Backtest(plus2, _TodayAt21).run()
    assert SEEN["today"].hour == 22  # 00:00 on the server = 22:00 UTC in January (ORDER_TIME_DAY)


class _AcrossServerMidnight(ExpertAdvisor):
    """1 lot bought at 21:00 UTC on a Tuesday, closed at 23:00 UTC: it is held over the server's midnight
    (22:00 UTC), not over UTC's."""

    def on_bar(self) -> None:
        t = self.time_current
        if "bought" not in SEEN and t.hour == 21 and t.day_of_week == 1:
            SEEN["bought"] = self.buy(1.0)
        elif self.positions() and t.hour == 23:
            self.close()


def test_a_position_held_over_the_servers_midnight_pays_one_nights_swap(plus2):
    rep = Backtest(plus2, _AcrossServerMidnight, account=AccountConfig(swap_long=-10.0)).run()
    (swap,) = rep.trades["swap"]
    assert swap == pytest.approx(-10.0)  # 10 points of 1 USD (1 lot EURUSD, 5 digits) for one night


class _OffGrid(ExpertAdvisor):
    """Requests with prices between two points of a 5-digit symbol (1.0849949...)."""

    def on_bar(self) -> None:
        if "sl" in SEEN:
            return
        c = round(float(self.bars.close[-1]), 5)
        SEEN["limit"] = (self.buy_limit(0.1, c - 0.0010 + 0.0000049), self.last_retcode)
        SEEN["sl"] = (self.buy(0.1, sl=c - 0.005 + 0.0000031), self.last_retcode)


@pytest.mark.xfail(
    strict=True,
    reason="a design decision: the broker puts an EA's prices on the grid (the nearest point, as the README "
    "documents), where the trade server refuses them and a live run sends them unrounded",
)
def test_prices_and_stops_off_the_point_grid_are_refused_as_the_trade_server_refuses_them():
    Backtest(load_candles().iloc[:50], _OffGrid).run()
    assert (SEEN["limit"], SEEN["sl"]) == ((None, 10015), (None, 10016))


def test_the_server_day_of_the_fixture_begins_at_22_utc(plus2):
    """The premise of the tests above: the frame's clock is UTC+2 in January."""
    from datafeeds import meta_of

    clock = meta_of(plus2).clock
    first = pd.Timestamp("2020-01-21 22:00", tz="UTC")
    assert int(clock.to_broker_seconds(pd.Index([first.value // 10**9]).to_numpy())[0]) % 86400 == 0


class _HugeInts(ExpertAdvisor):
    """Integers no float holds (an EA's arithmetic gone wrong) as a volume and as a stop."""

    def on_bar(self) -> None:
        if "sl" not in SEEN:
            SEEN["lots"] = (self.buy(10**400), self.last_retcode)
            SEEN["sl"] = (self.buy(0.1, sl=10**400), self.last_retcode)


def test_a_volume_or_a_stop_too_large_for_a_float_is_refused_not_a_crash():
    rep = Backtest(load_candles().iloc[:20], _HugeInts).run()
    assert (SEEN["lots"], SEEN["sl"]) == ((None, 10014), (None, 10016))
    assert rep.trades.empty and [r["retcode"] for r in rep.rejected] == [10014, 10016]
