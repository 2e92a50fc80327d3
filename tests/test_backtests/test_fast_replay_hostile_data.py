"""Hostile data through the screens of the fast replay: every screen turned off must give the same money.

The data is what a user can give and the screens find hardest: spreads that jump for a tick or a minute
and fall back (asks crossing levels no bid reaches), hours missing on one symbol, bars whose first tick
comes forty minutes late, a UTC+2 server with New York's DST switch inside the run (its midnights, a
Wednesday's triple swap). A random EA trades two symbols on one small account (market orders with stops,
limits and stop-limits, closes), so stop-outs, fills inside bars and rollovers all happen. The run with
every screen on and the run with every check made must book the same orders, deals, trades and curves.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import backtests.merged as merged
import backtests.merged_ticks as merged_ticks
from backtests import AccountConfig, Backtest
from backtests.broker.account import Account
from backtests.broker.calm import Calm, Span
from datafeeds.clock import BrokerClock
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from strategies.base import ExpertAdvisor

CLOCK = BrokerClock(2.0, "us")
START = "2024-03-06 20:00"  # a Wednesday evening; New York's clocks move on Sunday 2024-03-10
HOURS = 130
BASE = {"EURUSD": 1.10, "GBPUSD": 1.27}


def _ticks(symbol: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = HOURS * 25
    secs = np.sort(rng.choice(HOURS * 3600, size=n, replace=False))
    hour = secs // 3600
    keep = ~((hour % 5 == 2) & (secs % 3600 < 2400))  # bars opening 40 minutes late
    if symbol == "GBPUSD":
        keep &= hour % 7 != 3  # hours without a GBPUSD bar
    secs = secs[keep]
    secs[0] = 0
    steps = rng.normal(0, 0.0004 * BASE[symbol], len(secs))
    bid = np.round(BASE[symbol] + np.cumsum(steps), 5)
    spread = rng.integers(0, 6, len(secs))
    spread = np.where(rng.random(len(secs)) < 0.04, rng.integers(150, 400, len(secs)), spread)  # jumps
    ns = pd.Timestamp(START, tz="UTC").value + secs.astype(np.int64) * 10**9
    return make_ticks(ns, bid, np.round(bid + spread * 1e-5, 5), TickMeta(symbol, 5, f"{symbol}.csv"))


def _bars(ticks: pd.DataFrame, timeframe: str) -> pd.DataFrame:
    frame = bars_from_ticks(ticks, timeframe)
    frame.attrs["candles"] = replace(frame.attrs["candles"], clock=CLOCK)
    return frame


class RandomTrader(ExpertAdvisor):
    """Market orders with stops, buy and sell limits, stop-limits and closes, at random on each symbol."""

    symbols = ("EURUSD", "GBPUSD")
    seed: int = 0

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        r = self.rng
        for s in self.symbols:
            bid, ask = self.bid_of(s), self.ask_of(s)
            x = r.random()
            if not np.isfinite(bid):
                continue
            d = float(r.integers(5, 300)) * 1e-5
            if x < 0.15:
                side = self.buy if r.random() < 0.5 else self.sell
                side(
                    0.5, symbol=s, sl_points=float(r.integers(30, 600)), tp_points=float(r.integers(30, 600))
                )
            elif x < 0.25:
                self.buy_limit(0.5, round(ask - d, 5), symbol=s, tp=round(ask + d, 5))
            elif x < 0.32:
                self.sell_limit(0.5, round(bid + d, 5), symbol=s, tp=round(bid - d, 5))
            elif x < 0.38:
                gap = float(r.integers(1, 80)) * 1e-5
                self.buy_stop_limit(0.5, round(ask + d, 5), round(ask + d - gap, 5), symbol=s)
            elif x < 0.45:
                self.close(symbol=s)


def _figures(result) -> dict:
    return {
        "orders": result.orders,
        "deals": result.deals,
        "trades": result.trades,
        "curves": result.curves,
        "equity_path": result.equity_path,
        "stats": pd.DataFrame({"value": [repr(v) for v in result.stats]}, index=result.stats.index),
    }


def _run(model: str, seed: int, deposit: float) -> dict:
    ticks = {s: _ticks(s, seed * 2 + i) for i, s in enumerate(RandomTrader.symbols)}
    h1 = {s: _bars(t, "H1") for s, t in ticks.items()}
    fine = {"ticks": ticks} if model == "ticks" else {"m1": {s: _bars(t, "M1") for s, t in ticks.items()}}
    leverage = 500.0 if deposit < 10_000 else 100.0  # the small account holds a few lots near its stop-out
    account = AccountConfig(
        deposit=deposit, leverage=leverage, stop_out_level=50.0, hedging=True, commission=3.5
    )
    fine = fine if model != "open" else {}
    bt = Backtest(h1, RandomTrader, model=model, account=account, forward=None, **fine)
    return _figures(bt.run(seed=seed))


@pytest.mark.parametrize("deposit", [1_000.0, 100_000.0], ids=["stop-outs", "rich"])
@pytest.mark.parametrize("model", ["open", "ohlc1m", "ticks"])
def test_hostile_data_books_the_same_money_with_every_screen_off(model, deposit, monkeypatch):
    screened = [_run(model, seed, deposit) for seed in (1, 2)]
    monkeypatch.setattr(Calm, "holds", lambda self, t: False)
    monkeypatch.setattr(Calm, "span", lambda self, t: Span(t, self.state()))
    monkeypatch.setattr(Account, "ruled_out", lambda self, t: False)
    monkeypatch.setattr(merged, "_stop_out_possible", lambda *args, **kwargs: True)
    monkeypatch.setattr(merged_ticks, "_stop_out_possible", lambda *args, **kwargs: True)
    for seed, first in zip((1, 2), screened, strict=True):
        checked = _run(model, seed, deposit)
        assert len(checked["trades"]) > 10  # the runs trade: the screens had something to miss
        for name, frame in first.items():
            pd.testing.assert_frame_equal(frame, checked[name], check_exact=True, obj=f"{name} (seed {seed})")
