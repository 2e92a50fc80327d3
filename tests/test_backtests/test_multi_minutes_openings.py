"""Every symbol's opening checks of a bar (gap fills of pending orders, SL/TP and the stop-out at the open)
at its own first minute, in time order with the other symbols' minutes, in 1 minute OHLC: MetaTrader's
tester works every symbol's prices in the order of their times (MetaTrader 5 Help, "Strategy Tester >
Multi-Currency Testing"), so a minute of 02:02 sees the account as it stood at 02:02 — never a position that
a gap filled at another symbol's later first minute, nor another symbol's price of a later minute.

Flat minutes (open = high = low = close) at the minutes given only, spread 0 throughout (``spread=0``),
leverage 500, stop-out at 50 %. One lot: GBPUSD's margin at 1.30000 is 100,000 x 1.3 / 500 = 260.00,
EURUSD's at 1.09000 218.00, AUDUSD's at 0.67000 134.00; a point of any of them is 1.00 USD a lot.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.merged as merged
from backtests import AccountConfig, Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.resample import resample
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor
from tests.opening_eas import HoldGBP, LimitBelow, SellLimitAbove, StopOnAQuietSymbol

T0 = pd.Timestamp("2024-01-02", tz="UTC")  # a Tuesday
H = 60  # minutes


def _minutes(symbol: str, rows: list[tuple[int, float]]) -> pd.DataFrame:
    """Flat M1 bars of ``symbol`` at (minutes from ``T0``, price) only."""
    n = len(rows)
    price = np.array([p for _, p in rows])
    cols = {c: price.copy() for c in ("open", "high", "low", "close")}
    cols.update(
        tick_volume=np.ones(n, dtype=np.int64),
        real_volume=np.zeros(n, dtype=np.int64),
        spread=np.zeros(n, dtype=np.int32),
    )
    index = pd.DatetimeIndex([T0 + pd.Timedelta(minutes=m) for m, _ in rows])
    return make_frame(cols, index, CandleMeta(symbol, Timeframe.M1, 5, UTC, "test"))


def _run(ea, rows: dict, deposit: float, every_minute: bool, monkeypatch, drop: dict | None = None):
    """The run of ``ea`` on ``rows``' minutes resampled to H1 (``drop``: minutes left out of the M1 data
    after the bars were made); ``every_minute``: the stop-out never ruled out for a bar (every minute of
    every symbol walked), else the screened walk."""
    if every_minute:
        monkeypatch.setattr(merged, "_stop_out_possible", lambda *args: True)
    m1 = {s: _minutes(s, r) for s, r in rows.items()}
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    for s, minute in (drop or {}).items():
        m1[s] = m1[s].drop(_at(minute))
    account = AccountConfig(deposit=deposit, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, ea, model="ohlc1m", m1=m1, account=account, forward=None).run()
    _in_time_order(result)
    return result


def _in_time_order(result) -> None:
    """Every run's tables in the order their events happened: an order set up, a deal made, never stamped
    before one the account had already seen (one server clock, MetaTrader's ``TimeCurrent``)."""
    assert result.orders["time_setup"].is_monotonic_increasing, result.orders["time_setup"].tolist()
    assert result.deals["time"].is_monotonic_increasing, result.deals["time"].tolist()


def _at(minutes: int) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


WALKS = pytest.mark.parametrize("every_minute", [False, True], ids=["screened", "every-minute"])

# GBPUSD, 1 lot bought at 1.30000 at the first decision (01:00): its first minute of the 02:00 bar, 02:01, at
# 1.29000 (-1,000.00) and its second, 02:02, at 1.28500 (-1,500.00); back at 1.30000 at 02:06. On a
# 1,550.00 deposit alone: 550 / 260 = 212 % at 02:01, 50 / 260 = 19 % at 02:02: the stop-out closes it
# there, at 1.28500, -1,500.00.
GBP = [(0, 1.3), (H, 1.3), (2 * H + 1, 1.29), (2 * H + 2, 1.285), (2 * H + 6, 1.3), (4 * H - 1, 1.3)]


@WALKS
def test_a_stop_out_at_another_symbols_earlier_minute_sees_no_position_the_main_symbols_gap_fills_later(
    every_minute, monkeypatch
):
    """EURUSD (the main symbol) stands at 1.10000 from 01:00; its first minute of the 02:00 bar, where the
    EA decides, is 02:05 at 1.09000: a gap through the buy limit, filled there at 1.09000. At 02:02, GBPUSD's
    second minute, the limit has not been reached: equity 1,550 - 1,500 = 50.00 against GBPUSD's 260.00
    margin, 19 % — GBPUSD is stopped out at 1.28500 (-1,500.00; balance 50.00), and at 02:05 the limit's
    218.00 of margin is more than the 50.00 left: refused (10019).

    With the main symbol's opening checks made first, the stop-out at 02:02 saw the filled long valued at
    EURUSD's close before the bar: (1.10000 - 1.09000) x 100,000 = +1,000.00 of profit the position never
    had, level (50 + 1,000) / (260 + 218) = 220 %: no stop-out there, and the run ended +1,000.00 (EURUSD
    back at 1.10000) where it loses 1,500.00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.09), (2 * H + 10, 1.09), (3 * H, 1.1), (4 * H - 1, 1.1)]
    result = _run(LimitBelow, {"EURUSD": eur, "GBPUSD": GBP}, 1_550.0, every_minute, monkeypatch)
    trades = result.trades
    assert list(trades["symbol"]) == ["GBPUSD"]
    gbp = trades.iloc[0]
    assert (gbp["exit_reason"], gbp["exit_time"], gbp["exit_price"]) == ("stop out", _at(2 * H + 2), 1.285)
    assert gbp["profit"] == pytest.approx(-1_500.0)
    limit = result.orders[result.orders["type"] == "buy_limit"].iloc[0]
    assert (limit["state"], limit["time_done"]) == ("rejected", _at(2 * H + 5))
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert result.stats["total_net_profit"] == pytest.approx(-1_500.0)


@WALKS
def test_a_stop_out_at_one_symbols_minute_sees_no_fill_another_symbols_later_first_minute_makes(
    every_minute, monkeypatch
):
    """AUDUSD stands at 0.65000 from 01:00; its first minute of the 02:00 bar, 02:03, at 0.67000 gaps
    through the sell limit (filled there at 0.67000). EURUSD, the main symbol, decides at 02:05 and holds
    nothing. At 02:02 (GBPUSD's second minute) the limit has not been reached: 50 / 260 = 19 %, GBPUSD is
    stopped out at 1.28500 (-1,500.00), and at 02:03 the fill's 134.00 of margin is more than the 50.00
    left: refused (10019).

    With AUDUSD's opening checks made before GBPUSD's minutes, the stop-out at 02:02 saw the short filled
    at 02:03 valued at AUDUSD's close before the bar: (0.67000 - 0.65000) x 100,000 = +2,000.00 the account
    never had at 02:02, level (50 + 2,000) / (260 + 134) = 520 %: no stop-out, and the run ended +2,000.00
    (AUDUSD back at 0.65000) where it loses 1,500.00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 3, 0.67), (2 * H + 40, 0.65), (3 * H, 0.65), (4 * H - 1, 0.65)]
    rows = {"EURUSD": eur, "GBPUSD": GBP, "AUDUSD": aud}
    result = _run(SellLimitAbove, rows, 1_550.0, every_minute, monkeypatch)
    trades = result.trades
    assert list(trades["symbol"]) == ["GBPUSD"]
    gbp = trades.iloc[0]
    assert (gbp["exit_reason"], gbp["exit_time"], gbp["exit_price"]) == ("stop out", _at(2 * H + 2), 1.285)
    limit = result.orders[result.orders["type"] == "sell_limit"].iloc[0]
    assert (limit["state"], limit["time_done"]) == ("rejected", _at(2 * H + 3))
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert result.stats["total_net_profit"] == pytest.approx(-1_500.0)


@WALKS
def test_a_symbol_without_minutes_in_the_bar_opens_it_before_any_minute_reading_no_later_price(
    every_minute, monkeypatch
):
    """GBPUSD has a 02:00 bar (open 1.31000) but no minute in it: its buy stop is gapped at that open, at
    02:00, by the open-prices rules, before any minute of the bar. EURUSD then stands at its close before the
    bar, 1.10000: the long is flat, and the fill's 262.00 of margin fits the 1,300 - 220 = 1,080.00 free. At
    02:05 EURUSD's first minute of the bar, 1.09000, takes 1,000.00 off: level 300 / 482 = 62 %, no
    stop-out. Checked after EURUSD's opening, the fill read EURUSD at 1.09000, a price five minutes ahead:
    1,300 - 1,000 - 220 = 80.00 free, refused (10019)."""
    rows = {
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H + 5, 1.09), (3 * H + 10, 1.09), (4 * H - 1, 1.09)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H + 40, 1.31), (3 * H, 1.31), (4 * H - 1, 1.31)],
    }
    # GBPUSD's 02:00 bar is made from its 02:40 minute, which the M1 data given lacks
    result = _run(StopOnAQuietSymbol, rows, 1_300.0, every_minute, monkeypatch, drop={"GBPUSD": 2 * H + 40})
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert (stop["state"], stop["time_done"], stop["fill_price"]) == ("filled", _at(2 * H), 1.31)
    assert result.rejected == []
    assert set(result.trades["exit_reason"]) == {"end of test"}


class _TwoStops(ExpertAdvisor):
    """At the first decision: a GBPUSD buy stop of 1 lot at 1.30500 and an AUDUSD buy stop of 1 lot at
    0.65500 (the symbols' order set per test)."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy_stop(1.0, 1.305, symbol="GBPUSD")
            self.buy_stop(1.0, 0.655, symbol="AUDUSD")


@WALKS
@pytest.mark.parametrize(
    ("order", "filled"),
    [(("EURUSD", "GBPUSD", "AUDUSD"), "GBPUSD"), (("EURUSD", "AUDUSD", "GBPUSD"), "AUDUSD")],
    ids=["gbpusd-first", "audusd-first"],
)
def test_an_opening_and_another_symbols_minute_of_one_instant_are_worked_in_the_symbols_order(
    order, filled, every_minute, monkeypatch
):
    """On a 300.00 deposit, GBPUSD's minute of 02:02 at 1.30500 (from 1.30000 at 02:01) reaches its buy
    stop (261.00 of margin) and AUDUSD's first minute of the bar, also 02:02, at 0.66000 gaps through its
    buy stop (132.00): both fills are flat at their own prices, and the 300.00 holds one of them only. The
    one whose symbol comes first in the order (the main symbol, then as loaded) is filled at 02:02, the other
    refused there for the margin (10019: 300 - 261 = 39.00 < 132.00, or 300 - 132 = 168.00 < 261.00). With
    AUDUSD's opening checks made before any minute, its fill came first whatever the order, at 02:00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    gbp = [(0, 1.3), (H, 1.3), (2 * H + 1, 1.3), (2 * H + 2, 1.305), (3 * H, 1.305), (4 * H - 1, 1.305)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 2, 0.66), (3 * H, 0.66), (4 * H - 1, 0.66)]
    rows = {"EURUSD": eur, "GBPUSD": gbp, "AUDUSD": aud}
    ea = type("Ordered", (_TwoStops,), {"symbols": order})
    result = _run(ea, {s: rows[s] for s in order}, 300.0, every_minute, monkeypatch)
    stops = result.orders[result.orders["type"] == "buy_stop"].set_index("symbol")
    refused = "AUDUSD" if filled == "GBPUSD" else "GBPUSD"
    assert (stops.loc[filled, "state"], stops.loc[filled, "time_done"]) == ("filled", _at(2 * H + 2))
    assert (stops.loc[refused, "state"], stops.loc[refused, "time_done"]) == ("rejected", _at(2 * H + 2))
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert list(result.trades["symbol"]) == [filled]


def test_a_rollovers_swap_at_an_opening_makes_the_minute_walk_take_the_stop_out_bound_again():
    """GBPUSD, 1 lot bought at 1.30000 on Tuesday at 01:00, its swap -500 points a lot a night (-500.00).
    At Wednesday 00:01, its first minute of the day (1.29000, -1,000.00), the rollover's swap is booked on
    the position: equity 1,700 - 1,000 - 500 = 200.00 against 260.00 of margin, 77 %. Its minute of 00:02
    (1.28800, -1,200.00) leaves 0.00: the stop-out closes it there, at 1.28800, before the EA decides at
    EURUSD's 00:05; GBPUSD is back at 1.30000 at 00:30. The screened walk rules the stop-out out for the bar
    before the swap (1,700 - 1,200 = 500.00, far above 1.1 x 130.00); taking that bound again only after a
    fill, it would skip the 00:02 minute and the position would run on."""
    from dataclasses import replace

    from datafeeds.symbols import BUILTIN

    day = 24 * H
    gbp = [(k * H, 1.3) for k in range(24)]
    gbp += [(day + 1, 1.29), (day + 2, 1.288), (day + 30, 1.3), (day + H, 1.3), (day + 2 * H - 1, 1.3)]
    eur = [(k * H, 1.1) for k in range(24)] + [(day + 5, 1.1), (day + H, 1.1), (day + 2 * H - 1, 1.1)]
    m1 = {"EURUSD": _minutes("EURUSD", eur), "GBPUSD": _minutes("GBPUSD", gbp)}
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    specs = {s: replace(BUILTIN[s], swap_long=-500.0, swap_short=0.0) for s in m1}
    account = AccountConfig(deposit=1_700.0, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, HoldGBP, model="ohlc1m", m1=m1, account=account, specs=specs).run()
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"], trade["exit_price"]) == (
        "stop out",
        _at(day + 2),
        1.288,
    )
    assert trade["profit"] == pytest.approx(-1_200.0) and trade["swap"] == pytest.approx(-500.0)


class _ExpiringLimit(ExpertAdvisor):
    """At the first decision: an AUDUSD sell limit of 1 lot at 0.66000 that expires at 02:02."""

    symbols = ("EURUSD", "AUDUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.sell_limit(1.0, 0.66, symbol="AUDUSD", expiration=_at(2 * H + 2))


@WALKS
def test_an_order_expired_before_a_symbols_first_minute_is_not_filled_by_that_minutes_gap(
    every_minute, monkeypatch
):
    """AUDUSD's first minute of the 02:00 bar comes at 02:03, at 0.67000, through the sell limit; the order
    expired at 02:02, before any price reached it: MetaTrader retires it (``ORDER_STATE_EXPIRED``) and it
    is never filled. Checked at the bar's opening time, 02:00, the order was still alive, and the gap of
    02:03 filled it: a short at 0.67000 (+2,000.00 by the end, AUDUSD back at 0.65000 at 03:00) from an
    order that no longer existed."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 3, 0.67), (3 * H, 0.65), (4 * H - 1, 0.65)]
    result = _run(_ExpiringLimit, {"EURUSD": eur, "AUDUSD": aud}, 10_000.0, every_minute, monkeypatch)
    limit = result.orders[result.orders["type"] == "sell_limit"].iloc[0]
    assert (limit["state"], limit["time_done"]) == ("expired", _at(2 * H + 3))
    assert result.trades.empty
    assert result.stats["total_net_profit"] == 0.0


class _HoldEURGBP(ExpertAdvisor):
    """At the first decision: 1 lot of EURGBP bought (its pounds converted through GBPUSD)."""

    symbols = ("EURUSD", "EURGBP", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")


@WALKS
def test_a_swap_at_an_opening_converts_at_the_price_of_a_symbol_whose_own_opening_passed_before_it(
    every_minute, monkeypatch
):
    """EURGBP, 1 lot bought at 0.85000 on Tuesday at 01:00, its swap -500 points a lot a night: 500.00
    pounds. GBPUSD, which converts them and holds nothing, opens Wednesday at 00:01 at 1.20000 (from
    1.30000); EURGBP's first minute of the day, 00:03, books the rollover's swap at GBPUSD's price then,
    1.20000: -600.00 dollars. A screened walk that passes GBPUSD's opening (nothing to check on it) without
    moving it past its 00:01 minute reads its close before the bar, 1.30000, for the swap: -650.00, a figure
    the walk of every minute does not give."""
    from dataclasses import replace

    from datafeeds.symbols import BUILTIN

    day = 24 * H
    eur = [(k * H, 1.1) for k in range(24)] + [(day + 5, 1.1), (day + H, 1.1), (day + 2 * H - 1, 1.1)]
    gbp = [(k * H, 1.3) for k in range(24)] + [(day + 1, 1.2), (day + H, 1.2), (day + 2 * H - 1, 1.2)]
    egb = [(k * H, 0.85) for k in range(24)] + [(day + 3, 0.85), (day + H, 0.85), (day + 2 * H - 1, 0.85)]
    if every_minute:
        monkeypatch.setattr(merged, "_stop_out_possible", lambda *args: True)
    m1 = {
        "EURUSD": _minutes("EURUSD", eur),
        "EURGBP": _minutes("EURGBP", egb),
        "GBPUSD": _minutes("GBPUSD", gbp),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    specs = {s: replace(BUILTIN[s], swap_long=-500.0 if s == "EURGBP" else 0.0, swap_short=0.0) for s in m1}
    account = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, _HoldEURGBP, model="ohlc1m", m1=m1, account=account, specs=specs).run()
    trade = result.trades.iloc[0]
    assert trade["symbol"] == "EURGBP" and trade["profit"] == 0.0
    assert trade["swap"] == pytest.approx(-600.0)
