"""A stop-limit order of the main symbol becomes its limit order at the main symbol's first tick of the bar
(the EA's decision); the ticks of a converting pair that came earlier in the bar, worked before the
decision, must not fill that limit at the main symbol's price of the bar before: the limit did not exist
then. MetaTrader's tester triggers a pending order on its own symbol's ticks only, in time order (MetaTrader
5 Help, "Strategy Tester > Multi-Currency Testing"): a tick of GBPUSD leaves EURGBP's bid and ask as they
were, so it can reach no level of EURGBP's that EURGBP's own last tick did not reach."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from strategies.base import ExpertAdvisor

T0 = pd.Timestamp("2024-01-02", tz="UTC")
H = 3600


class _StopLimit(ExpertAdvisor):
    """At its first decision: 0.1 lot of EURGBP bought (its pounds converted through GBPUSD) and a buy stop
    limit of 0.1 lot: stop 0.85100, limit 0.85050."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(0.1, symbol="EURGBP")
            self.buy_stop_limit(0.1, 0.851, 0.8505, symbol="EURGBP")


def _ticks(symbol: str, rows: list[tuple[int, float]]) -> pd.DataFrame:
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


def _run():
    """Spread 0. EURGBP: 0.85000 at 01:00:00 (the EA's first decision) and at 01:50:00 (the stop not
    reached); its first tick of the 02:00 bar, 02:00:30, at 0.85120 reaches the stop 0.85100 (the order
    becomes a buy limit at 0.85050), 0.85080 at 02:00:40 (above the limit), 0.85040 at 02:00:50: the ask
    at or below 0.85050, filled there at 0.85040. GBPUSD ticks at 02:00:10 and 02:00:20, before EURGBP's
    first tick of the bar."""
    before = (0, H, H + 3000)  # 00:00, 01:00 (the EA's first decision), 01:50
    eurgbp = [(2 * H + 30, 0.8512), (2 * H + 40, 0.8508), (2 * H + 50, 0.8504), (4 * H - 1, 0.8504)]
    gbpusd = [(2 * H + 10, 1.3), (2 * H + 20, 1.301), (4 * H - 1, 1.3)]
    eurusd = [(2 * H, 1.1), (3 * H, 1.1), (4 * H - 1, 1.1)]
    rows = {
        "EURGBP": [(s, 0.85) for s in before] + eurgbp,
        "GBPUSD": [(s, 1.3) for s in before] + gbpusd,
        "EURUSD": [(s, 1.1) for s in before] + eurusd,
    }
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    account = AccountConfig(deposit=100_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
    return Backtest(frames, _StopLimit, model="ticks", ticks=ticks, account=account, forward=None).run()


def _assert_filled_at_its_own_tick(result) -> None:
    order = result.orders[result.orders["type"] == "buy_stop_limit"].iloc[0]
    assert order["state"] == "filled"
    assert order["time_done"] == T0 + pd.Timedelta(seconds=2 * H + 50)
    assert order["fill_price"] == pytest.approx(0.8504)


def test_screened_walk_fills_a_stop_limits_limit_at_its_own_symbols_tick():
    """The screened walk (the stop-out ruled out on a 100,000 USD account) fills it at 02:00:50, 0.85040."""
    _assert_filled_at_its_own_tick(_run())


def test_every_tick_walk_fills_no_limit_at_the_main_symbols_price_of_the_bar_before(monkeypatch):
    """The walk of every tick (the stop-out possible): the limit, made at 02:00:30, is filled at 02:00:50 at
    0.85040 as in the screened walk, never at GBPUSD's 02:00:20 tick at EURGBP's 01:50:00 price 0.85000 (a
    price of before the order existed, 40 points = 4.00 GBP in the user's favour here). The walk checked
    the pending orders of every desk a GBPUSD tick converts, with the main symbol standing at its tick
    before the bar after its opening checks; a conversion's tick now checks the stop-out alone."""
    monkeypatch.setattr(merged_ticks, "_stop_out_possible", lambda *args: True)
    _assert_filled_at_its_own_tick(_run())
