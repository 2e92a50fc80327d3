"""Hostile case of swaps on several symbols: MetaTrader keeps a position's swap on the position (its
``POSITION_SWAP``, in the equity) until the deal that closes it books it, so the balance only moves with
deals, and the Deals table's balance column is the running sum of its deals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.resample import resample
from datafeeds.symbols import BUILTIN
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

MONDAY = pd.Timestamp("2024-01-08", tz="UTC")
HOURS = pd.date_range(MONDAY, periods=5 * 24, freq="h")


def _at(day: int, hour: int) -> pd.Timestamp:
    return MONDAY + pd.Timedelta(days=day, hours=hour)


def _frame(symbol: str, before: float, after: float, move: pd.Timestamp) -> pd.DataFrame:
    """H1 bars at ``before``, then the bar opened at ``move`` rising or falling to ``after``, which every
    later bar stays at (spread 0)."""
    hours = HOURS
    close = np.where(hours >= move, after, before)
    opens = np.where(hours > move, after, before)
    cols = {
        "open": opens,
        "high": np.maximum(opens, close),
        "low": np.minimum(opens, close),
        "close": close,
        "tick_volume": np.ones(len(HOURS), dtype=np.int64),
    }
    return make_frame(cols, HOURS, CandleMeta(symbol, Timeframe.H1, 5, UTC, "test"))


class _LongAndShortLived(ExpertAdvisor):
    """EURUSD bought on Monday 01:00 and sold on Friday 12:00; GBPUSD bought and sold on Wednesday."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        now = self.time_current
        if now == _at(0, 1):
            self.buy(1.0, symbol="EURUSD")
        elif now == _at(2, 10):
            self.buy(1.0, symbol="GBPUSD")
        elif now == _at(2, 12):
            self.close(symbol="GBPUSD")
        elif now == _at(4, 12):
            self.close(symbol="EURUSD")


def test_a_swap_moves_the_balance_only_with_the_deal_that_closes_its_position():
    """EURUSD, 1 lot held Monday to Friday at -10 USD a night (currency_deposit, triple on Friday, so the
    nights of Monday to Thursday: -40), falls 200 points: its closing deal books -200 and -40. GBPUSD,
    bought and sold on Wednesday, gains 100 points: +100. MetaTrader's balance: 10,000, 10,100 after
    Wednesday's deal, 9,860 after Friday's; its maximal balance drawdown is 10,100 - 9,860 = 240.00. With
    the swaps on the balance at each rollover it read 10,080 after Wednesday's deal (two nights already
    taken) and a drawdown of 220.00: 20 dollars of drawdown in the EA's favour, and a Deals table whose
    balance column is not the sum of its deals."""
    frames = {
        "EURUSD": _frame("EURUSD", 1.10000, 1.09800, _at(4, 11)),
        "GBPUSD": _frame("GBPUSD", 1.30000, 1.30100, _at(2, 11)),
    }
    specs = {
        "EURUSD": replace(
            BUILTIN["EURUSD"], swap_long=-10.0, swap_short=-10.0, swap_mode="currency_deposit",
            swap_rollover3days=5,
        ),
        "GBPUSD": BUILTIN["GBPUSD"],
    }  # fmt: skip
    account = AccountConfig(deposit=10_000.0, spread=0)
    result = Backtest(frames, _LongAndShortLived, account=account, specs=specs, forward=None).run()
    trades = result.trades.set_index("symbol")
    assert (trades.at["EURUSD", "profit"], trades.at["EURUSD", "swap"]) == (-200.0, -40.0)
    assert (trades.at["GBPUSD", "profit"], trades.at["GBPUSD", "swap"]) == (100.0, 0.0)
    deals = result.deals
    running = 10_000.0 + (deals["profit"] + deals["commission"] + deals["swap"]).cumsum()
    np.testing.assert_allclose(deals["balance"].to_numpy(), running.to_numpy(), atol=0.005)
    assert result.stats["balance_drawdown_maximal"] == pytest.approx(240.00, abs=0.005)


class _LongEuros(ExpertAdvisor):
    """1 lot of EURUSD and 0.01 lots of GBPUSD bought on Monday at 01:00 and held."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if self.time_current == _at(0, 1):
            self.buy(1.0, symbol="EURUSD")
            self.buy(0.01, symbol="GBPUSD")


def _minutes(symbol: str, price: float, dip: pd.Timestamp | None = None, low: float = 0.0) -> pd.DataFrame:
    """Flat M1 bars at ``price`` over the five days (spread 0), the minute at ``dip`` reaching ``low``."""
    minutes = pd.date_range(MONDAY, periods=5 * 24 * 60, freq="min")
    lows = np.full(len(minutes), price)
    if dip is not None:
        lows[minutes.get_loc(dip)] = low
    flat = np.full(len(minutes), price)
    cols = {"open": flat, "high": flat, "low": lows, "close": flat, "tick_volume": np.ones(len(minutes))}
    return make_frame(cols, minutes, CandleMeta(symbol, Timeframe.M1, 5, UTC, "test"))


def test_the_accrued_swap_counts_in_the_stop_out_screen_of_several_symbols_minutes():
    """1,000 USD at 1:500, 1 lot of EURUSD at 1.10000 (margin 220.00) at -300 points a night and 0.01 lots
    of GBPUSD at 1.30000 (margin 2.60) without swap, both flat, so the minutes of both are walked together:
    after Wednesday's rollover the equity is 1,000 - 600 = 400.00 with the balance still 1,000.00. A minute
    of Wednesday 10:30 dips EURUSD to 1.09700: the level reaches 50 % (equity 111.30) below 1.097113, at
    1.09711, where the EURUSD position is stopped out (profit -289.00, swap -600.00: balance 111.00). The
    screen that rules a bar's stop-out out must count the accrued swap: with the balance alone the equity at
    the bar's worst is 1,000 - 300 = 700.00, far above the level, and the stop-out is never looked for."""
    dip = _at(2, 10) + pd.Timedelta(minutes=30)
    m1 = {"EURUSD": _minutes("EURUSD", 1.10000, dip, 1.09700), "GBPUSD": _minutes("GBPUSD", 1.30000)}
    frames = {s: resample(m, "H1") for s, m in m1.items()}
    specs = {
        "EURUSD": replace(BUILTIN["EURUSD"], swap_long=-300.0, swap_mode="points", swap_rollover3days=5),
        "GBPUSD": replace(BUILTIN["GBPUSD"], swap_long=0.0, swap_short=0.0),
    }
    account = AccountConfig(deposit=1_000.0, leverage=500.0, stop_out_level=50.0, spread=0)
    result = Backtest(
        frames, _LongEuros, model="ohlc1m", m1=m1, account=account, specs=specs, forward=None
    ).run()
    trade = result.trades.set_index("symbol").loc["EURUSD"]
    assert (trade.exit_reason, trade.exit_time) == ("stop out", dip)
    assert (trade.exit_price, trade.profit, trade.swap) == (1.09711, -289.0, -600.0)
    assert result.deals["balance"].round(2).tolist() == [1_000.0, 1_000.0, 111.0, 111.0]
