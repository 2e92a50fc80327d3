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
from datafeeds import make_frame, resample
from datafeeds.candles import meta_of
from datafeeds.clock import BrokerClock
from datafeeds.symbols import BUILTIN
from datafeeds.ticks import TickMeta, make_ticks
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import WALKS, H, _at, _in_time_order, _minutes

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


class _LimitOverMidnight(ExpertAdvisor):
    """A buy limit of 1 lot at 1.09500 at the first decision; closes what it holds at the third."""

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy_limit(1.0, 1.095)
        elif len(self.bars) == 3:
            for p in self.positions():
                self.close(p.ticket)


def _folded(day: int, rows: list, symbol: str = "EURUSD"):
    """``symbol``'s H1 bars of ``rows`` (minutes after 00:00 of Tuesday 2024-01-02 plus ``day`` days, price)
    with the 00:00 bar of the next day folded into the 23:00 bar: the 00:00 bar missing, the 23:00 bar
    runs to 01:00 and a midnight lies inside it."""
    base = 24 * H * day
    m1 = _minutes(symbol, [(base + m, p) for m, p in rows])
    frame = resample(m1, "H1")
    last, midnight = _at(base + 23 * H), _at(base + 24 * H)
    frame.loc[last, "low"] = min(frame.loc[last, "low"], frame.loc[midnight, "low"])
    frame.loc[last, "close"] = frame.loc[midnight, "close"]
    return frame.drop(midnight), m1


_BEFORE = [(m, 1.1) for m in (21 * H, 21 * H + 59, 22 * H, 22 * H + 59, 23 * H + 10)]


@DAYS
@ROUTES
def test_a_position_stopped_after_a_midnight_inside_its_bar_pays_the_nights_swap(
    route, day, nights, monkeypatch
):
    """Tuesday (or Wednesday) 22:00 bar, then a 23:00 bar that runs to 01:00 (the 00:00 bar missing): its
    minutes at 23:10 (1.10000) and at 00:30 (1.09000, through the stop-loss at 1.09500). Bought at 22:00,
    held over midnight, stopped at 00:30 at 1.09000: -1,000.00 and the night's swap, -10.00 (-30.00 over
    Wednesday's, the triple swap). Charged only where a bar opens, the night inside the bar was free."""
    rows = [*_BEFORE, (24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09), (25 * H + 59, 1.09)]
    result = _result(route, *_folded(day, rows), _StoppedOverMidnight, monkeypatch)
    (trade,) = result.trades.itertuples()
    assert (trade.exit_time, trade.exit_price, trade.exit_reason) == (
        _at(24 * H * day + 24 * H + 30),
        1.09,
        "sl",
    )
    assert trade.profit == pytest.approx(-1_000.0)
    assert trade.swap == pytest.approx(-10.0 * nights)


@ROUTES
def test_a_position_stopped_before_a_midnight_inside_its_bar_pays_no_swap(route, monkeypatch):
    """The same bars, the stop-loss reached at 23:40 (1.09000), before the midnight inside the 23:00 bar:
    never held over a rollover, no swap (neither at the midnight nor at the 01:00 bar)."""
    rows = [*_BEFORE, (23 * H + 40, 1.09), (24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09)]
    rows += [(25 * H + 59, 1.09)]
    result = _result(route, *_folded(0, rows), _StoppedOverMidnight, monkeypatch)
    (trade,) = result.trades.itertuples()
    assert (trade.exit_time, trade.exit_reason) == (_at(23 * H + 40), "sl")
    assert trade.swap == 0.0
    assert trade.net_profit == pytest.approx(-1_000.0)


@ROUTES
def test_a_position_opened_after_a_midnight_inside_its_bar_owes_no_swap_at_the_next_bar(route, monkeypatch):
    """A buy limit at 1.09500 placed at 22:00 Tuesday, filled at 00:30 Wednesday (1.09000) inside the 23:00
    bar that runs to 01:00, closed at the 01:00 bar's decision (1.09000): opened after the rollover, it owes
    no swap. Charged at the 01:00 bar's opening as the night from Tuesday, it paid -10.00 for a night it
    never held."""
    rows = [*_BEFORE, (24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09), (25 * H + 59, 1.09)]
    result = _result(route, *_folded(0, rows), _LimitOverMidnight, monkeypatch)
    (trade,) = result.trades.itertuples()
    assert (trade.entry_time, trade.exit_time) == (_at(24 * H + 30), _at(25 * H))
    assert trade.swap == 0.0
    assert trade.net_profit == pytest.approx(0.0)


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


class _BothOverMidnight(ExpertAdvisor):
    """Buys 1 lot of EURUSD with its stop-loss at 1.09500 and 1 lot of GBPUSD at the first decision;
    closes what it holds at the third."""

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, sl=1.095, symbol="EURUSD")
            self.buy(1.0, symbol="GBPUSD")
        elif len(self.bars) == 3:
            for p in self.positions():
                self.close(p.ticket)


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
@WALKS
def test_two_symbols_held_over_a_midnight_inside_their_bar_pay_one_night_each(
    model, every_minute, monkeypatch
):
    """EURUSD and GBPUSD both bought at 22:00 Tuesday, their 23:00 bars running to 01:00 (the 00:00 bars
    missing): GBPUSD's first minute after midnight at 00:10 (1.30000), EURUSD's at 00:30 (1.09000, through
    its stop-loss). The account's night is charged once, at 00:10, to both: EURUSD stopped at 00:30 pays
    -10.00; GBPUSD, closed at the 01:00 bar's decision, pays -10.00 too, never a second night there."""
    eur = [*_BEFORE, (24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09), (25 * H + 59, 1.09)]
    gbp = [(m, 1.3) for m in (21 * H, 21 * H + 59, 22 * H, 22 * H + 59, 23 * H + 20, 24 * H + 10, 25 * H)]
    gbp += [(25 * H + 59, 1.3)]
    frames, fine = {}, {}
    for symbol, rows in (("EURUSD", eur), ("GBPUSD", gbp)):
        frames[symbol], m1 = _folded(0, rows, symbol)
        fine[symbol] = m1
        if model == "ticks":
            ns = m1.index.as_unit("ns").asi8
            bid = m1["open"].to_numpy()
            fine[symbol] = make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))
    if every_minute:
        walk = merged_ticks if model == "ticks" else merged
        monkeypatch.setattr(walk, "_stop_out_possible", lambda *args: True)
    config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0)
    specs = {s: replace(BUILTIN[s], swap_long=-10.0) for s in frames}
    paths = {"model": model, "ticks" if model == "ticks" else "m1": fine}
    result = Backtest(frames, _BothOverMidnight, account=config, forward=None, specs=specs, **paths).run()
    _in_time_order(result)
    trades = result.trades.set_index("symbol")
    assert (trades.loc["EURUSD", "exit_time"], trades.loc["EURUSD", "exit_reason"]) == (
        _at(24 * H + 30),
        "sl",
    )
    assert trades.loc["GBPUSD", "exit_time"] == _at(25 * H)
    assert trades.loc["EURUSD", "swap"] == pytest.approx(-10.0)
    assert trades.loc["GBPUSD", "swap"] == pytest.approx(-10.0)


class _OnTick(ExpertAdvisor):
    """Through ``on_tick``: buys 1 lot at the tick at ``buy_ns`` (UTC ns), closes it at ``close_ns``."""

    buy_ns = close_ns = 0

    def on_bar(self):
        pass

    def on_tick(self, tick):
        if tick.time_ns == self.buy_ns:
            self.buy(1.0)
        elif tick.time_ns == self.close_ns:
            for p in self.positions():
                self.close(p.ticket)


@pytest.mark.parametrize(
    ("buy_at", "close_at", "swap"),
    [(23 * H + 10, 24 * H + 30, -10.0), (24 * H + 30, 25 * H + 59, 0.0), (22 * H + 59, 23 * H + 10, 0.0)],
    ids=["held-over-it", "opened-after-it", "closed-before-it"],
)
def test_an_on_tick_position_pays_the_midnight_inside_its_bar_only_if_held_over_it(buy_at, close_at, swap):
    """Ticks only (an ``on_tick`` EA, every tick walked): the 23:00 bar runs to 01:00, its ticks at 23:10 and
    00:30. Bought at 23:10 and closed at 00:30 by the hook, the position was held over midnight: -10.00.
    Bought at 00:30, after it, and closed at 01:59: no night (charged at the 01:00 bar as the night from
    Tuesday, -10.00 for a night it never held). Bought at 22:59 and closed at 23:10: none."""
    rows = [*_BEFORE, (24 * H + 30, 1.1), (24 * H + 59, 1.1), (25 * H, 1.1), (25 * H + 59, 1.1)]
    frame, m1 = _folded(0, rows)
    ns = m1.index.as_unit("ns").asi8
    bid = m1["open"].to_numpy()
    ticks = make_ticks(ns, bid, bid.copy(), TickMeta("EURUSD", 5, "eurusd_ticks.csv"))
    ea = type("Hook", (_OnTick,), {"buy_ns": _at(buy_at).value, "close_ns": _at(close_at).value})
    config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, swap_long=-10.0)
    result = Backtest(frame, ea, account=config, forward=None, model="ticks", ticks=ticks).run()
    (trade,) = result.trades.itertuples()
    assert (trade.entry_time, trade.exit_time) == (_at(buy_at), _at(close_at))
    assert trade.swap == pytest.approx(swap)


@ROUTES
def test_a_bar_over_two_midnights_charges_each_night_at_its_first_price(route, monkeypatch):
    """The 23:00 bar of Tuesday runs to Thursday 01:00 (every bar between missing), its minutes at 23:10
    Tuesday, 00:30 Wednesday and 00:30 Thursday (1.09000, through the stop-loss at 1.09500). Held over both
    midnights and stopped at Thursday 00:30: Tuesday's night, -10.00, and Wednesday's triple, -30.00."""
    rows = [*_BEFORE, (24 * H + 30, 1.1), (48 * H + 30, 1.09), (48 * H + 59, 1.09), (49 * H, 1.09)]
    rows += [(49 * H + 59, 1.09)]
    m1 = _minutes("EURUSD", rows)
    frame = resample(m1, "H1")
    last = _at(23 * H)
    folded = frame[(frame.index > last) & (frame.index < _at(49 * H))]
    frame.loc[last, "low"] = min(frame.loc[last, "low"], folded["low"].min())
    frame.loc[last, "close"] = folded["close"].iloc[-1]
    frame = frame.drop(folded.index)
    result = _result(route, frame, m1, _StoppedOverMidnight, monkeypatch)
    (trade,) = result.trades.itertuples()
    assert (trade.exit_time, trade.exit_reason) == (_at(48 * H + 30), "sl")
    assert trade.swap == pytest.approx(-40.0)


def test_a_midnight_inside_a_bar_is_the_servers_own_on_a_utc_plus_2_server():
    """The same stop after a midnight inside a bar on a UTC+2 server: its midnight is 22:00 UTC, the 21:00
    UTC bar runs to 23:00 UTC (the 22:00 bar missing), minutes at 21:10 and 22:30 UTC (1.09000, through the
    stop-loss). Stopped at 22:30 UTC, 00:30 on the server: the night is owed, -10.00 (UTC's midnight, later,
    is never reached)."""
    rows = [*_BEFORE, (24 * H + 30, 1.09), (24 * H + 59, 1.09), (25 * H, 1.09), (25 * H + 59, 1.09)]
    utc = _minutes("EURUSD", [(m - 2 * H, p) for m, p in rows])
    meta = replace(meta_of(utc), clock=BrokerClock(2.0))
    m1 = make_frame({c: utc[c].to_numpy() for c in utc.columns}, utc.index, meta)
    bars = resample(m1, "H1")
    last, midnight = _at(21 * H), _at(22 * H)
    bars.loc[last, "low"] = min(bars.loc[last, "low"], bars.loc[midnight, "low"])
    bars.loc[last, "close"] = bars.loc[midnight, "close"]
    config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, swap_long=-10.0)
    test = Backtest(
        bars.drop(midnight), _StoppedOverMidnight, account=config, forward=None, model="ohlc1m", m1=m1
    )
    (trade,) = test.run().trades.itertuples()
    assert (trade.exit_time, trade.exit_reason) == (_at(22 * H + 30), "sl")
    assert trade.swap == pytest.approx(-10.0)
