"""Every symbol's opening checks of a bar (gap fills of pending orders, SL/TP and the stop-out at the open)
at its own first tick, in time order with the other symbols' ticks: MetaTrader's tester works every
symbol's ticks in the order of their times (MetaTrader 5 Help, "Strategy Tester > Multi-Currency
Testing"), so a tick at 02:00:02 sees the account as it stood at 02:00:02 — never a position that a gap
filled at another symbol's later tick, nor another symbol's price of a later tick.

Spread 0 throughout (``spread=0``), leverage 500, stop-out at 50 %. One lot: GBPUSD's margin at 1.30000
is 100,000 x 1.3 / 500 = 260.00, EURUSD's at 1.09000 218.00, AUDUSD's at 0.67000 134.00; a point of any
of them is 1.00 USD a lot.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from strategies.base import ExpertAdvisor
from tests.opening_eas import HoldGBP, LimitBelow, SellLimitAbove, StopOnAQuietSymbol
from tests.test_backtests.test_multi_minutes_openings import _in_time_order

T0 = pd.Timestamp("2024-01-02", tz="UTC")
H = 3600


def _ticks(symbol: str, rows: list[tuple[int, float]]) -> pd.DataFrame:
    """Ticks of ``symbol`` at (seconds from ``T0``, bid), ask = bid."""
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


def _run(ea, rows: dict, deposit: float, every_tick: bool, monkeypatch):
    """The run of ``ea`` on ``rows``' ticks; ``every_tick``: the stop-out never ruled out for a bar (every
    tick of every symbol walked), else the screened walk."""
    if every_tick:
        monkeypatch.setattr(merged_ticks, "_stop_out_possible", lambda *args: True)
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    account = AccountConfig(deposit=deposit, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, ea, model="ticks", ticks=ticks, account=account, forward=None).run()
    _in_time_order(result)
    return result


def _at(seconds: int) -> pd.Timestamp:
    return T0 + pd.Timedelta(seconds=seconds)


# GBPUSD, 1 lot bought at 1.30000 at the first decision (01:00:00): its first tick of the 02:00 bar,
# 02:00:01, at 1.29000 (-1,000.00) and its second, 02:00:02, at 1.28500 (-1,500.00); back at 1.30000 at
# 02:00:06. On a 1,550.00 deposit alone: 550 / 260 = 212 % at 02:00:01, 50 / 260 = 19 % at 02:00:02: the
# stop-out closes it there, at 1.28500, -1,500.00.
GBP = [(0, 1.3), (H, 1.3), (2 * H + 1, 1.29), (2 * H + 2, 1.285), (2 * H + 6, 1.3), (4 * H - 1, 1.3)]


@pytest.mark.parametrize("every_tick", [False, True], ids=["screened", "every-tick"])
def test_a_stop_out_before_the_decision_sees_no_position_the_main_symbols_gap_fills_later(
    every_tick, monkeypatch
):
    """EURUSD (the main symbol) stands at 1.10000 from 01:00:00; its first tick of the 02:00 bar, where the
    EA decides, comes at 02:00:05 at 1.09000: a gap through the buy limit, filled there at 1.09000. At
    02:00:02, GBPUSD's second tick, the limit has not been reached: equity 1,550 - 1,500 = 50.00 against
    GBPUSD's 260.00 margin, 19 % — GBPUSD is stopped out at 1.28500 (-1,500.00; balance 50.00), and at
    02:00:05 the limit's 218.00 of margin is more than the 50.00 left: refused (10019).

    The main symbol's opening checks were made first, at 02:00:05, and the stop-out at 02:00:02 saw the
    filled long valued at EURUSD's tick before the bar: (1.10000 - 1.09000) x 100,000 = +1,000.00 of profit
    the position never had (it did not exist yet, at a price of before it was opened), level (50 + 1,000)
    / (260 + 218) = 220 %: no stop-out there nor at 02:00:06 (GBPUSD back at 1.30000), and the run ended
    +1,000.00 (EURUSD back at 1.10000) where it loses 1,500.00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.09), (2 * H + 10, 1.09), (3 * H, 1.1), (4 * H - 1, 1.1)]
    result = _run(LimitBelow, {"EURUSD": eur, "GBPUSD": GBP}, 1_550.0, every_tick, monkeypatch)
    trades = result.trades
    assert list(trades["symbol"]) == ["GBPUSD"]
    gbp = trades.iloc[0]
    assert (gbp["exit_reason"], gbp["exit_time"], gbp["exit_price"]) == ("stop out", _at(2 * H + 2), 1.285)
    assert gbp["profit"] == pytest.approx(-1_500.0)
    limit = result.orders[result.orders["type"] == "buy_limit"].iloc[0]
    assert (limit["state"], limit["time_done"]) == ("rejected", _at(2 * H + 5))
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert result.stats["total_net_profit"] == pytest.approx(-1_500.0)


@pytest.mark.parametrize("every_tick", [False, True], ids=["screened", "every-tick"])
def test_a_stop_out_at_one_symbols_tick_sees_no_fill_another_symbols_later_first_tick_makes(
    every_tick, monkeypatch
):
    """AUDUSD stands at 0.65000 from 01:00:00; its first tick of the 02:00 bar, 02:00:03, at 0.67000 gaps
    through the sell limit (filled there at 0.67000). EURUSD, the main symbol, decides at 02:00:05 and holds
    nothing. At 02:00:02 (GBPUSD's second tick) the limit has not been reached: 50 / 260 = 19 %, GBPUSD
    is stopped out at 1.28500 (-1,500.00), and at 02:00:03 the fill's 134.00 of margin is more than the
    50.00 left: refused (10019).

    AUDUSD's opening checks were made before GBPUSD's 02:00:02 tick was worked, so the stop-out there saw
    the short filled at 02:00:03 valued at AUDUSD's tick before the bar: (0.67000 - 0.65000) x 100,000 =
    +2,000.00 the account never had at 02:00:02, level (50 + 2,000) / (260 + 134) = 520 %: no stop-out, and
    the run ended +2,000.00 (AUDUSD back at 0.65000) where it loses 1,500.00."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 3, 0.67), (2 * H + 40, 0.65), (3 * H, 0.65), (4 * H - 1, 0.65)]
    rows = {"EURUSD": eur, "GBPUSD": GBP, "AUDUSD": aud}
    result = _run(SellLimitAbove, rows, 1_550.0, every_tick, monkeypatch)
    trades = result.trades
    assert list(trades["symbol"]) == ["GBPUSD"]
    gbp = trades.iloc[0]
    assert (gbp["exit_reason"], gbp["exit_time"], gbp["exit_price"]) == ("stop out", _at(2 * H + 2), 1.285)
    limit = result.orders[result.orders["type"] == "sell_limit"].iloc[0]
    assert (limit["state"], limit["time_done"]) == ("rejected", _at(2 * H + 3))
    assert [r["retcode"] for r in result.rejected] == [10019]
    assert result.stats["total_net_profit"] == pytest.approx(-1_500.0)


class _TwoStops(ExpertAdvisor):
    """At the first decision: a GBPUSD buy stop of 1 lot at 1.30500 and an AUDUSD buy stop of 1 lot at
    0.65500."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy_stop(1.0, 1.305, symbol="GBPUSD")
            self.buy_stop(1.0, 0.655, symbol="AUDUSD")


@pytest.mark.parametrize("every_tick", [False, True], ids=["screened", "every-tick"])
def test_a_fill_at_one_symbols_tick_is_margined_before_another_symbols_later_gap_fill(
    every_tick, monkeypatch
):
    """On a 400.00 deposit: GBPUSD's first tick of the bar, 02:00:01, at 1.30000; its second, 02:00:02, at
    1.30500 reaches the buy stop: filled at 1.30500, margin 261.00 of 400.00 free. AUDUSD's first tick,
    02:00:03, at 0.66000 gaps through its buy stop: 132.00 of margin against 400 - 261 = 139.00 free: filled
    too, at 0.66000. With AUDUSD's opening checks made first, the fills came the other way round: AUDUSD's
    at 02:00:03, then GBPUSD's at 02:00:02 saw that long valued at AUDUSD's tick before the bar, 0.65000
    (-1,000.00): equity -600.00 holds no margin, refused (10019) — a fill refused for the margin and the
    loss of a position opened after it."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    gbp = [(0, 1.3), (H, 1.3), (2 * H + 1, 1.3), (2 * H + 2, 1.305), (3 * H, 1.305), (4 * H - 1, 1.305)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 3, 0.66), (3 * H, 0.66), (4 * H - 1, 0.66)]
    rows = {"EURUSD": eur, "GBPUSD": gbp, "AUDUSD": aud}
    result = _run(_TwoStops, rows, 400.0, every_tick, monkeypatch)
    orders = result.orders[result.orders["type"] == "buy_stop"].set_index("symbol")
    assert (orders.loc["GBPUSD", "state"], orders.loc["GBPUSD", "time_done"]) == ("filled", _at(2 * H + 2))
    assert (orders.loc["AUDUSD", "state"], orders.loc["AUDUSD", "time_done"]) == ("filled", _at(2 * H + 3))
    assert result.rejected == []
    entries = result.trades.set_index("symbol")
    assert entries.loc["GBPUSD", "entry_price"] == 1.305 and entries.loc["AUDUSD", "entry_price"] == 0.66


@pytest.mark.parametrize("every_tick", [False, True], ids=["screened", "every-tick"])
def test_a_symbol_without_ticks_in_the_bar_opens_it_before_any_tick_reading_no_later_price(
    every_tick, monkeypatch
):
    """GBPUSD has a 02:00 bar (open 1.31000) but no tick in it: its buy stop is gapped at that open, at
    02:00:00, by the open-prices rules, before any tick of the bar. EURUSD then stands at its tick before the
    bar, 1.10000: the long is flat, and the fill's 262.00 of margin fits the 1,300 - 220 = 1,080.00 free.
    At 02:00:05 EURUSD's first tick of the bar, 1.09000, takes 1,000.00 off: level 300 / 482 = 62 %, no
    stop-out. Checked after EURUSD's opening, the fill read EURUSD at 1.09000, a price five seconds ahead:
    1,300 - 1,000 - 220 = 80.00 free, refused (10019)."""
    rows = {
        "EURUSD": [(0, 1.1), (H, 1.1), (2 * H + 5, 1.09), (3 * H + 10, 1.09), (4 * H - 1, 1.09)],
        "GBPUSD": [(0, 1.3), (H, 1.3), (2 * H + 100, 1.31), (3 * H, 1.31), (4 * H - 1, 1.31)],
    }
    if every_tick:
        monkeypatch.setattr(merged_ticks, "_stop_out_possible", lambda *args: True)
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}  # GBPUSD's 02:00 bar from its tick
    ticks["GBPUSD"] = ticks["GBPUSD"].drop(_at(2 * H + 100))  # ... which the ticks given lack
    account = AccountConfig(deposit=1_300.0, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, StopOnAQuietSymbol, model="ticks", ticks=ticks, account=account).run()
    stop = result.orders[result.orders["type"] == "buy_stop"].iloc[0]
    assert (stop["state"], stop["time_done"], stop["fill_price"]) == ("filled", _at(2 * H), 1.31)
    assert result.rejected == []
    assert set(result.trades["exit_reason"]) == {"end of test"}


def test_a_rollovers_swap_at_an_opening_makes_the_walk_take_the_stop_out_bound_again():
    """GBPUSD, 1 lot bought at 1.30000 on Tuesday at 01:00, its swap -500 points a lot a night (-500.00).
    At Wednesday 00:00:01, its first tick of the day (1.29000, -1,000.00), the rollover's swap is booked
    on the position: equity 1,700 - 1,000 - 500 = 200.00 against 260.00 of margin, 77 %. Its tick of
    00:00:02 (1.28800, -1,200.00) leaves 0.00: the stop-out closes it there, at 1.28800, before the EA
    decides at EURUSD's 00:00:05; GBPUSD is back at 1.30000 at 00:00:30. The screened walk ruled the
    stop-out out for the bar before the swap (1,700 - 1,200 = 500.00, far above 1.1 x 130.00) and took
    that bound again only after a fill: it skipped the 00:00:02 tick, and the position ran on."""
    from dataclasses import replace

    from datafeeds.symbols import BUILTIN

    day = 24 * H
    hours = [(k * H, 1.3) for k in range(24)]
    gbp = [*hours, (day + 1, 1.29), (day + 2, 1.288), (day + 30, 1.3), (day + H, 1.3), (day + 2 * H - 1, 1.3)]
    eur = [(k * H, 1.1) for k in range(24)] + [(day + 5, 1.1), (day + H, 1.1), (day + 2 * H - 1, 1.1)]
    ticks = {"EURUSD": _ticks("EURUSD", eur), "GBPUSD": _ticks("GBPUSD", gbp)}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    specs = {s: replace(BUILTIN[s], swap_long=-500.0, swap_short=0.0) for s in ticks}
    account = AccountConfig(deposit=1_700.0, spread=0, leverage=500.0, stop_out_level=50.0)
    result = Backtest(frames, HoldGBP, model="ticks", ticks=ticks, account=account, specs=specs).run()
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"], trade["exit_price"]) == (
        "stop out",
        _at(day + 2),
        1.288,
    )
    assert trade["profit"] == pytest.approx(-1_200.0) and trade["swap"] == pytest.approx(-500.0)


@pytest.mark.parametrize(
    ("order", "aud_states"),
    [(("EURUSD", "GBPUSD", "AUDUSD"), ["rejected"]), (("EURUSD", "AUDUSD", "GBPUSD"), ["filled", "filled"])],
    ids=["gbpusd-first", "audusd-first"],
)
def test_an_opening_and_another_symbols_tick_of_one_instant_are_worked_in_the_symbols_order(
    order, aud_states
):
    """GBPUSD's fall to 1.28500 and AUDUSD's first tick of the bar (0.67000, through its sell limit) both
    at 02:00:02. GBPUSD first: the stop-out closes GBPUSD there (50 / 260 = 19 %) before AUDUSD's opening,
    whose 134.00 of margin the 50.00 left cannot hold (10019). AUDUSD first: its limit fills at 0.67000
    (134.00 of the 1,550 - 1,000 - 260 = 290.00 free at GBPUSD's 1.29000), then GBPUSD's tick stops the
    account out: GBPUSD first (-1,500.00), then AUDUSD at 0.67000 (0.00; 50 / 134 = 37 %)."""
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 2, 0.67), (3 * H, 0.67), (4 * H - 1, 0.67)]
    rows = {"EURUSD": eur, "GBPUSD": GBP, "AUDUSD": aud}
    ea = type("Ordered", (SellLimitAbove,), {"symbols": order})  # the symbols' order: the main one, then
    result = _run(ea, {s: rows[s] for s in order}, 1_550.0, False, None)  # as loaded
    aud_orders = result.orders[result.orders["symbol"] == "AUDUSD"]
    assert list(aud_orders["state"]) == aud_states
    out = result.trades[result.trades["exit_reason"] == "stop out"]
    assert out.iloc[0]["symbol"] == "GBPUSD" and out.iloc[0]["exit_time"] == _at(2 * H + 2)
    assert out.iloc[0]["profit"] == pytest.approx(-1_500.0)
