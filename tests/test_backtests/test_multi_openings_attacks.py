"""Attacks on the several-symbol openings of 1 minute OHLC and ticks: the clock the EA decides by, and
expiries met at a symbol's first tick of a bar.

Figures as in ``test_multi_minutes_openings`` and ``test_multi_ticks_openings`` (spread 0, leverage 500,
stop-out at 50 %): GBPUSD, 1 lot bought at 1.30000 at 01:00 on 1,550.00, is stopped out at its second
price of the 02:00 bar (1.28500, -1,500.00), before EURUSD, the main symbol, decides at its first price of
the bar.
"""

from __future__ import annotations

import pandas as pd
import pytest

import tests.test_backtests.test_multi_minutes_openings as minutes
import tests.test_backtests.test_multi_ticks_openings as ticks
from strategies.base import ExpertAdvisor


class _Clocked(ExpertAdvisor):
    """At the first decision 1 lot of GBPUSD bought; at the second, the clock, the positions seen and an
    AUDUSD sell limit that expires at ``expiry`` (set per test) are recorded."""

    symbols = ("EURUSD", "GBPUSD", "AUDUSD")
    expiry: pd.Timestamp
    seen: list

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="GBPUSD")
        elif len(self.bars) == 2:
            held = [p.symbol for p in self.positions()]
            placed = self.sell_limit(1.0, 0.66, symbol="AUDUSD", expiration=self.expiry)
            self.seen.append((self.time_current, held, placed, self.last_retcode))


@pytest.mark.parametrize("every_minute", [False, True], ids=["screened", "every-minute"])
def test_a_several_symbol_minute_decision_reads_the_clock_of_the_minutes_it_has_seen(
    every_minute, monkeypatch
):
    """EURUSD decides at its first minute of the 02:00 bar, 02:05, after GBPUSD's stop-out at 02:02: the EA
    sees GBPUSD closed, and its clock (``time_current``, MetaTrader's ``TimeCurrent``: the time of the newest
    price of any symbol) reads 02:05, the decision's own minute, the newest worked (every other symbol's
    minutes before it were worked whole, and AUDUSD's first comes at 02:06). So an AUDUSD order that expires
    at 02:03, already past, is refused (10022: the expiration is not after the current time), as the tick
    model refuses it at 02:00:05. It was accepted (10008) and recorded as set up at 02:00, before the
    stop-out that preceded it, while the decision's clock read the bar's opening time."""
    H, at = minutes.H, minutes._at
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 6, 0.65), (3 * H, 0.65), (4 * H - 1, 0.65)]
    ea = type("Clocked", (_Clocked,), {"expiry": at(2 * H + 3), "seen": []})
    rows = {"EURUSD": eur, "GBPUSD": minutes.GBP, "AUDUSD": aud}
    result = minutes._run(ea, rows, 1_550.0, every_minute, monkeypatch)
    out = result.trades.iloc[0]
    assert (out["symbol"], out["exit_reason"], out["exit_time"]) == ("GBPUSD", "stop out", at(2 * H + 2))
    ((clock, held, placed, retcode),) = ea.seen
    assert held == []  # the EA has seen the stop-out of 02:02
    assert clock == at(2 * H + 5)  # was 02:00
    assert (placed, retcode) == (None, 10022)  # was an order placed, 10008
    assert result.orders["time_setup"].is_monotonic_increasing
    assert result.deals["time"].is_monotonic_increasing


@pytest.mark.parametrize("every_tick", [False, True], ids=["screened", "every-tick"])
def test_the_tick_decision_reads_the_clock_of_the_ticks_it_has_seen(every_tick, monkeypatch):
    """The same bar in ticks: the EA decides at 02:00:05, its clock there, and refuses the expiry of
    02:00:03 (10022)."""
    H, at = ticks.H, ticks._at
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + 6, 0.65), (3 * H, 0.65), (4 * H - 1, 0.65)]
    ea = type("Clocked", (_Clocked,), {"expiry": at(2 * H + 3), "seen": []})
    rows = {"EURUSD": eur, "GBPUSD": ticks.GBP, "AUDUSD": aud}
    ticks._run(ea, rows, 1_550.0, every_tick, monkeypatch)
    assert ea.seen == [(at(2 * H + 5), [], None, 10022)]


class _ExpiringLimit(ExpertAdvisor):
    """At the first decision: an AUDUSD sell limit of 1 lot at 0.66000 expiring at ``expiry`` (per test)."""

    symbols = ("EURUSD", "AUDUSD")
    expiry: pd.Timestamp

    def on_bar(self):
        if len(self.bars) == 1:
            self.sell_limit(1.0, 0.66, symbol="AUDUSD", expiration=self.expiry)


@pytest.mark.parametrize(
    ("first", "expiry"),
    [(3, 2), (3, 3), (10, 7), (10, 10), (10, 5)],
    ids=["before-its-first", "at-its-first", "late-between", "late-at-its-first", "late-at-the-decision"],
)
@pytest.mark.parametrize("model", ["ticks", "minutes"])
@pytest.mark.parametrize("every", [False, True], ids=["screened", "every-price"])
def test_an_order_expired_by_its_symbols_first_price_of_a_bar_is_not_filled_by_that_prices_gap(
    first, expiry, model, every, monkeypatch
):
    """AUDUSD's first price of the 02:00 bar (second ``first`` of the bar in ticks, minute in 1 minute
    OHLC), 0.67000, gaps through the sell limit at 0.66000; EURUSD decides at +5. The order expires at
    ``expiry``, at or before that first price (MetaTrader retires an order whose expiration has come,
    ``ORDER_STATE_EXPIRED``), also when AUDUSD's first price comes after the decision (its opening checks
    then at the decision, at its price before the bar, and its gap met at its first price): never filled."""
    mod = ticks if model == "ticks" else minutes
    H, at = mod.H, mod._at
    eur = [(0, 1.1), (H, 1.1), (2 * H + 5, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    aud = [(0, 0.65), (H, 0.65), (2 * H + first, 0.67), (3 * H, 0.65), (4 * H - 1, 0.65)]
    ea = type("Expiring", (_ExpiringLimit,), {"expiry": at(2 * H + expiry)})
    result = mod._run(ea, {"EURUSD": eur, "AUDUSD": aud}, 10_000.0, every, monkeypatch)
    limit = result.orders[result.orders["type"] == "sell_limit"].iloc[0]
    assert limit["state"] == "expired"
    assert result.trades.empty and result.stats["total_net_profit"] == 0.0
