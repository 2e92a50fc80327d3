"""A night is charged only to the positions open at that server midnight, whichever minutes or ticks a walk
worked: a position opened after the rollover owes nothing until the next one, and one open at a midnight
owes that night even where no walk stopped there.

Two symbols on one account, EURUSD (the main symbol, where the EA decides) and GBPUSD, H1 bars, flat prices,
spread 0, one minute (or one tick) at each time given. A day's 22:00 bar, then its 23:00 bar running to 01:00
(no 00:00 bar on either symbol), then 01:00 and 02:00, then the 01:00 bar of the day after. Long swap
-10 points a lot a night on both: -10.00 USD a lot a night (1 lot of 100,000 at a point of 0.00001, profit in
USD), -30.00 over Wednesday's night (the triple day), every night on the server's clock (a UTC+2 server:
22:00 UTC).

- EURUSD's 23:00 bar opens late, its first minute at 00:30 of the next day: the EA decides then, after the
  server's midnight.
- GBPUSD's 23:00 bar has minutes at 23:10 and 00:10 (its midnight inside the bar, before the decision), or
  at 23:10 and 00:40 (its first minute after midnight comes after the decision).

With nothing held before the decision, GBPUSD's minutes before it were not walked, and its next rollover
took the day of its 23:10 minute as the last night charged: a position bought at 00:30 paid a night it never
held (-10.00). One symbol alone (EURUSD with its late first minute) must give the same figures. The other
way round, a position opened before a midnight on a symbol whose bar opens only after it (its first minute
the bar's opening day) was never charged that night.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

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
from tests.test_backtests.test_multi_minutes_openings import H, _at, _in_time_order, _minutes

ROUTES = pytest.mark.parametrize(
    "route", ["minutes-screened", "minutes-every-minute", "ticks-screened", "ticks-every-tick"]
)
# (first day after Tuesday 2024-01-02, nights over the server night after the opening day): bought Tuesday
# 00:30 (base Monday) and held over Tuesday's night: one; bought Wednesday 00:30, over Wednesday's: three.
DAYS = pytest.mark.parametrize(("day", "nights"), [(-1, 1), (0, 3)], ids=["tuesday", "wednesday"])
SERVERS = pytest.mark.parametrize("utc_offset", [0, 2], ids=["utc", "utc+2"])
GBP_MIDNIGHT = pytest.mark.parametrize("gbp_after", [10, 40], ids=["gbp-midnight-first", "decision-first"])
NEXT_DAY = 49 * H  # the 01:00 bar of the day after the 23:00 bar's midnight


def _frame(symbol: str, rows: list[int], day: int, utc_offset: int, fold: bool, prices: dict | None = None):
    """``symbol``'s M1 minutes at ``rows`` (server minutes after 00:00 of Tuesday 2024-01-02 plus ``day``
    days), flat at its price, on a UTC+``utc_offset`` server, and its H1 bars; ``fold``: the 00:00 bar
    folded into the 23:00 bar (it runs to 01:00), else the 00:00 bar restamped 23:00 (its first minute
    after midnight); ``prices``: a price at some of those minutes."""
    price, prices = 1.1 if symbol == "EURUSD" else 1.3, prices or {}
    base = 24 * H * day - utc_offset * H
    utc = _minutes(symbol, [(base + m, prices.get(m, price)) for m in rows])
    meta = replace(meta_of(utc), clock=BrokerClock(float(utc_offset)))
    m1 = make_frame({c: utc[c].to_numpy() for c in utc.columns}, utc.index, meta)
    bars = resample(m1, "H1")
    last, midnight = _at(base + 23 * H), _at(base + 24 * H)
    if not fold:
        return bars.rename(index={midnight: last}), m1
    if midnight in bars.index:  # the 23:00 bar takes the 00:00 bar's minutes
        bars.loc[last, "high"] = max(bars.loc[last, "high"], bars.loc[midnight, "high"])
        bars.loc[last, "low"] = min(bars.loc[last, "low"], bars.loc[midnight, "low"])
        bars.loc[last, "close"] = bars.loc[midnight, "close"]
        bars = bars.drop(midnight)
    return bars, m1


START = [21 * H, 21 * H + 59, 22 * H, 22 * H + 59]  # the 21:00 bar, then the first decision's
AFTER = [24 * H + 59, 25 * H, 25 * H + 59, 26 * H, 26 * H + 59, NEXT_DAY, NEXT_DAY + 59]
EUR_LATE = [*START, 24 * H + 30, *AFTER]  # its 23:00 bar's first minute at 00:30


def _gbp(after: int) -> list[int]:
    """GBPUSD's minutes: its 23:00 bar at 23:10 and at 00:``after`` (midnight inside it), then ``AFTER``."""
    return [*START, 23 * H + 10, 24 * H + after, *AFTER]


def _run(
    route: str,
    ea: type,
    day: int,
    utc_offset: int,
    eur: list[int],
    gbp: list[int] | None,
    monkeypatch,
    gbp_prices: dict | None = None,
):
    """``ea`` on EURUSD's minutes ``eur`` (its 00:00 bar restamped 23:00, or folded into it where it has a
    minute before midnight) and GBPUSD's ``gbp`` (its 00:00 bar folded into the 23:00 bar; None: EURUSD
    alone; ``gbp_prices``: its prices at some of its minutes) by ``route``; the run's one trade."""
    rows = {"EURUSD": eur} if gbp is None else {"EURUSD": eur, "GBPUSD": gbp}
    frames = {}
    for name, minutes in rows.items():
        fold = any(23 * H <= m < 24 * H for m in minutes)
        frames[name] = _frame(name, minutes, day, utc_offset, fold, gbp_prices if name == "GBPUSD" else None)
    model = "ticks" if "ticks" in route else "ohlc1m"
    fine = {}
    for name, (_, m1) in frames.items():
        fine[name] = m1
        if model == "ticks":  # a tick at each minute's time, at its price
            ns = m1.index.as_unit("ns").asi8
            bid = m1["open"].to_numpy()
            fine[name] = make_ticks(ns, bid, bid.copy(), TickMeta(name, 5, f"{name.lower()}_ticks.csv"))
    if route.endswith("every-minute") or route.endswith("every-tick"):
        monkeypatch.setattr(
            merged_ticks if model == "ticks" else merged, "_stop_out_possible", lambda *a: True
        )
    key = "ticks" if model == "ticks" else "m1"
    if route.endswith("one-symbol"):
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, swap_long=-10.0)
        bars = frames["EURUSD"][0]
        test = Backtest(bars, ea, account=config, forward=None, model=model, **{key: fine["EURUSD"]})
    else:
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0)
        bars = {name: frame for name, (frame, _) in frames.items()}
        specs = {name: replace(BUILTIN[name], swap_long=-10.0) for name in bars}
        test = Backtest(bars, ea, account=config, forward=None, specs=specs, model=model, **{key: fine})
    result = test.run()
    _in_time_order(result)
    assert len(result.trades) == 1
    return result.trades.iloc[0]


def _hold(symbol: str, buy_at: int, close_at: int, sl: float | None = None) -> type:
    """An EA that buys 1 lot of ``symbol`` (its stop-loss at ``sl``) at decision ``buy_at`` (counted from 1)
    and closes it at ``close_at``; ``seen`` lists the decisions' times."""

    class Hold(ExpertAdvisor):
        seen: ClassVar[list] = []

        def on_bar(self):
            self.seen.append(self.time_current)
            if len(self.seen) == buy_at:
                self.buy(1.0, sl=sl, symbol=symbol)
            elif len(self.seen) == close_at:
                for p in self.positions():
                    self.close(p.ticket)

    return Hold


def _server(day: int, utc_offset: int, minutes: int) -> pd.Timestamp:
    """UTC time of server minute ``minutes`` of Tuesday 2024-01-02 plus ``day`` days."""
    return _at(24 * H * day - utc_offset * H + minutes)


@SERVERS
@GBP_MIDNIGHT
@ROUTES
@DAYS
def test_a_position_opened_on_the_other_symbol_after_its_midnight_owes_nothing_the_same_day(
    route, day, nights, gbp_after, utc_offset, monkeypatch
):
    """GBPUSD bought at the decision of the 23:00 bar, 00:30 on the server (after GBPUSD's midnight, which
    its minute at 00:10 or 00:40 shows), closed at the 02:00 bar's decision the same server day: never held
    over a rollover, swap 0.00. The 01:00 bar (or GBPUSD's 00:40 minute) charged the night from the day of
    its 23:10 minute: -10.00 for a night the position never held."""
    ea = _hold("GBPUSD", 2, 4)
    trade = _run(route, ea, day, utc_offset, EUR_LATE, _gbp(gbp_after), monkeypatch)
    assert ea.seen[:4] == [_server(day, utc_offset, m) for m in (22 * H, 24 * H + 30, 25 * H, 26 * H)]
    assert (trade["symbol"], trade["entry_time"]) == ("GBPUSD", _server(day, utc_offset, 24 * H + 30))
    assert trade["swap"] == 0.0
    assert trade["net_profit"] == 0.0


@SERVERS
@GBP_MIDNIGHT
@ROUTES
@DAYS
def test_a_position_opened_on_the_other_symbol_after_its_midnight_pays_only_the_next_night(
    route, day, nights, gbp_after, utc_offset, monkeypatch
):
    """The same position closed at the next day's 01:00 bar: held over one server midnight, the one after
    its opening day: -10.00 (Tuesday's night), -30.00 (Wednesday's, the triple swap). It paid one more
    night, -10.00, the one before it was opened (-20.00, -40.00)."""
    ea = _hold("GBPUSD", 2, 5)
    trade = _run(route, ea, day, utc_offset, EUR_LATE, _gbp(gbp_after), monkeypatch)
    assert trade["exit_time"] == _server(day, utc_offset, NEXT_DAY)
    assert trade["swap"] == pytest.approx(-10.0 * nights)


ALONE = pytest.mark.parametrize(
    "route",
    [
        "one-symbol",
        "minutes-screened",
        "minutes-every-minute",
        "ticks-one-symbol",
        "ticks-screened",
        "ticks-every-tick",
    ],
)


@SERVERS
@ALONE
@DAYS
@pytest.mark.parametrize(("close_at", "held"), [(4, 0), (5, 1)], ids=["same-day", "next-night"])
def test_one_symbol_opened_at_a_late_first_minute_pays_only_the_nights_it_held(
    route, day, nights, close_at, held, utc_offset, monkeypatch
):
    """EURUSD alone, its 23:00 bar's first minute at 00:30 (server): bought there, closed at 02:00 the same
    day (no swap) or at the next day's 01:00 bar (one night: -10.00, or -30.00 over Wednesday's)."""
    trade = _run(route, _hold("EURUSD", 2, close_at), day, utc_offset, EUR_LATE, None, monkeypatch)
    assert trade["entry_time"] == _server(day, utc_offset, 24 * H + 30)
    assert trade["swap"] == pytest.approx(-10.0 * nights * held)


@SERVERS
@GBP_MIDNIGHT
@ROUTES
@pytest.mark.parametrize(("close_at", "held"), [(4, 0), (5, 1)], ids=["same-day", "next-night"])
def test_the_main_symbol_opened_at_its_late_first_minute_pays_only_the_nights_it_held(
    route, close_at, held, gbp_after, utc_offset, monkeypatch
):
    """The same with GBPUSD beside it, EURUSD bought at its own late first minute (00:30 Wednesday):
    nothing the same day, -30.00 over Wednesday's night."""
    trade = _run(route, _hold("EURUSD", 2, close_at), 0, utc_offset, EUR_LATE, _gbp(gbp_after), monkeypatch)
    assert trade["swap"] == pytest.approx(-30.0 * held)


@SERVERS
@ROUTES
@DAYS
def test_a_position_opened_before_midnight_on_a_symbol_whose_bar_opens_after_it_pays_that_night(
    route, day, nights, utc_offset, monkeypatch
):
    """The other way round: EURUSD decides at 23:05 (its 23:00 bar runs to 01:00, a minute at 00:20),
    GBPUSD's 23:00 bar opens late, at 00:10. GBPUSD bought at 23:05 (at its 22:59 close) and closed at the
    02:00 bar was held over the server's midnight: it owes the night, -10.00 (-30.00 over Wednesday's).
    Its bar's opening day was taken as the last night charged, so the night was free."""
    eur = [*START, 23 * H + 5, 24 * H + 20, *AFTER]
    gbp = [*START, 24 * H + 10, *AFTER]
    ea = _hold("GBPUSD", 2, 4)
    trade = _run(route, ea, day + 1, utc_offset, eur, gbp, monkeypatch)
    assert (trade["symbol"], trade["entry_time"]) == ("GBPUSD", _server(day + 1, utc_offset, 23 * H + 5))
    assert trade["swap"] == pytest.approx(-10.0 * nights)


@SERVERS
@ROUTES
@DAYS
@pytest.mark.parametrize("eur_after", [None, 20], ids=["eur-quiet", "eur-midnight-after"])
def test_a_position_stopped_at_the_first_minute_after_midnight_of_its_late_bar_pays_that_night(
    route, day, nights, eur_after, utc_offset, monkeypatch
):
    """GBPUSD bought at 23:05 with its stop-loss at 1.29500; its 23:00 bar opens late, at 00:10, at 1.29000:
    stopped there (-1,000.00), after the server's midnight, which it was held over: the night is owed first,
    -10.00 (-30.00 over Wednesday's). EURUSD's 23:00 bar ends at 23:59, or has a minute at 00:20, after the
    stop. Nothing stopped at the midnight before 00:10 (a bar's first minute is its opening's rollover, long
    past at 23:05 with nothing held), so the night was never charged."""
    eur = [*START, 23 * H + 5, 23 * H + 59, *([] if eur_after is None else [24 * H + eur_after]), *AFTER]
    gbp = [*START, 24 * H + 10, *AFTER]
    ea = _hold("GBPUSD", 2, 4, sl=1.295)
    prices = {24 * H + 10: 1.29}
    trade = _run(route, ea, day + 1, utc_offset, eur, gbp, monkeypatch, gbp_prices=prices)
    assert (trade["exit_time"], trade["exit_reason"]) == (_server(day + 1, utc_offset, 24 * H + 10), "sl")
    assert trade["profit"] == pytest.approx(-1_000.0)
    assert trade["swap"] == pytest.approx(-10.0 * nights)


@SERVERS
@ROUTES
@DAYS
def test_a_position_closed_before_midnight_owes_no_night_where_its_symbols_bar_opens_after_it(
    route, day, nights, utc_offset, monkeypatch
):
    """GBPUSD bought at 22:00 and closed at the 23:00 bar's decision, 23:05 (EURUSD's first minute; GBPUSD's
    bar opens only at 00:10, after the server's midnight): never held over a rollover, swap 0.00. The bar's
    rollover, at 23:05, took GBPUSD's opening day (that of 00:10) for the account's and charged the night
    before it came: -10.00 (-30.00 on Wednesday) for a night the position never held."""
    eur = [*START, 23 * H + 5, 24 * H + 20, *AFTER]
    gbp = [*START, 24 * H + 10, *AFTER]
    ea = _hold("GBPUSD", 1, 2)
    trade = _run(route, ea, day + 1, utc_offset, eur, gbp, monkeypatch)
    assert trade["exit_time"] == _server(day + 1, utc_offset, 23 * H + 5)
    assert trade["swap"] == 0.0


@SERVERS
@GBP_MIDNIGHT
@ROUTES
@DAYS
@pytest.mark.parametrize("symbol", ["EURUSD", "GBPUSD"])
def test_a_position_held_from_before_midnight_and_closed_at_the_late_decision_after_it_pays_that_night(
    route, day, nights, gbp_after, utc_offset, symbol, monkeypatch
):
    """Bought at 22:00 and closed at the 23:00 bar's decision, 00:30 on the server (EURUSD's late first
    minute), GBPUSD's 23:00 bar opening at 23:10, before the midnight: held over it, the position owes the
    night, -10.00 (-30.00 on Wednesday), charged at the first price after midnight (GBPUSD's 00:10, or the
    decision itself where GBPUSD's next minute is 00:40), never at 23:10 before it came."""
    ea = _hold(symbol, 1, 2)
    trade = _run(route, ea, day + 1, utc_offset, EUR_LATE, _gbp(gbp_after), monkeypatch)
    assert trade["exit_time"] == _server(day + 1, utc_offset, 24 * H + 30)
    assert trade["swap"] == pytest.approx(-10.0 * nights)
