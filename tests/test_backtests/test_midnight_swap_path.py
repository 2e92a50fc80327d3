"""A night's swap charged at a midnight inside a bar (the 00:00 bar missing, the night charged at the first
minute or tick after midnight, ``Broker.midnight``) enters the equity path at that minute or tick, not at
the bar's open: a peak of the bar before midnight is not lowered by a swap not yet charged.

EURUSD minutes (UTC server clock, spread 0, 1.00 USD a point a lot), long swap -100 points a lot a night:
-100.00 USD for the night after Tuesday 2024-01-02. H1 bars at 21:00, 22:00, 23:00 (its minutes run to
00:59: no 00:00 bar), 01:00 and 02:00; 1 lot bought at 1.10000 at the 22:00 bar's open (the first
decision)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import resample
from datafeeds.symbols import BUILTIN
from datafeeds.ticks import TickMeta, make_ticks
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import H, _at, _minutes

# 21:00 and 22:00 flat, 23:00 up to 1.10500 (the peak, before midnight), 00:00 back at 1.10000 (the
# night charged)
EUR = [
    (21 * H, 1.1),
    (21 * H + 59, 1.1),
    (22 * H, 1.1),
    (22 * H + 59, 1.1),
    (23 * H, 1.105),
    (23 * H + 59, 1.105),
    (24 * H, 1.1),
]
EUR += [(24 * H + 59, 1.1), (25 * H, 1.1), (25 * H + 59, 1.1), (26 * H, 1.1), (26 * H + 59, 1.1)]


def hours(m1: pd.DataFrame) -> pd.DataFrame:
    """``m1``'s H1 bars with the 00:00 bar of 2024-01-03 missing: its minutes belong to the 23:00 bar."""
    frame = resample(m1, "H1")
    late, bar = _at(24 * H), _at(23 * H)
    if late in frame.index:
        frame.loc[bar, "high"] = max(frame.loc[bar, "high"], frame.loc[late, "high"])
        frame.loc[bar, "low"] = min(frame.loc[bar, "low"], frame.loc[late, "low"])
        frame.loc[bar, "close"] = frame.loc[late, "close"]
        frame = frame.drop(index=late)
    return frame


def ticks_of(symbol: str, m1: pd.DataFrame):
    """A tick at each minute's time at its open, at its spread (5 digits)."""
    ns = m1.index.as_unit("ns").asi8
    bid = m1["open"].to_numpy()
    ask = np.round(bid + m1["spread"].to_numpy() * 1e-5, 5)
    return make_ticks(ns, bid, ask, TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


class _BuyOnce(ExpertAdvisor):
    symbols = ("EURUSD",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")


@pytest.mark.parametrize("as_list", [False, True], ids=["one-symbol", "list"])
@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_a_peak_before_a_midnight_inside_its_bar_is_not_lowered_by_the_swap(model, as_list):
    """The equity: 10,500.00 at 23:00 (1.10500, nothing charged yet), then at 00:00 the night's -100.00 and
    1.10000: 9,900.00. MetaTrader's largest fall: 10,500.00 -> 9,900.00 = 600.00 USD (5.714286 % of the
    peak). The swap put at the bar's open (23:00) lowered the peak to 10,400.00: 500.00 booked, the
    drawdown understated by the night's swap."""
    m1 = _minutes("EURUSD", EUR)
    frame = hours(m1)
    assert _at(23 * H) in frame.index and _at(24 * H) not in frame.index
    prices = ticks_of("EURUSD", m1) if model == "ticks" else m1
    key = "ticks" if model == "ticks" else "m1"
    if as_list:
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0)
        specs = {"EURUSD": replace(BUILTIN["EURUSD"], swap_long=-100.0)}
        test = Backtest({"EURUSD": frame}, _BuyOnce, account=config, forward=None, specs=specs,
                        model=model, **{key: {"EURUSD": prices}})  # fmt: skip
    else:
        config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0, swap_long=-100.0)
        test = Backtest(frame, _BuyOnce, account=config, forward=None, model=model, **{key: prices})
    result = test.run()
    trade = result.trades.iloc[0]
    assert trade["entry_price"] == 1.1 and trade["swap"] == -100.0
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 600.0
    assert stats["equity_drawdown_maximal_pct"] == pytest.approx(600 / 10_500 * 100, abs=1e-6)
    assert list(result.equity_path["equity"]) == [10_500.0, 9_900.0]


class _BuyEurSellGbp(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")
            self.sell(1.0, symbol="GBPUSD")


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_several_symbols_peak_before_a_midnight_inside_its_bar_is_not_lowered_by_the_swap(model):
    """The same EURUSD long beside 1 lot of GBPUSD sold at 1.30000 whose minutes stay there (no swap on
    it): an account of two traded symbols. MetaTrader's largest fall is still 10,500.00 (23:00) ->
    9,900.00 (00:00, the night's -100.00 charged) = 600.00 USD; the swap at the bar's open and the bars'
    four prices gave 500.00."""
    m1 = {"EURUSD": _minutes("EURUSD", EUR), "GBPUSD": _minutes("GBPUSD", [(m, 1.3) for m, _ in EUR])}
    frames = {s: hours(m) for s, m in m1.items()}
    prices = {s: ticks_of(s, m) for s, m in m1.items()} if model == "ticks" else m1
    key = "ticks" if model == "ticks" else "m1"
    config = AccountConfig(deposit=10_000.0, spread=0, leverage=500.0)
    specs = {
        "EURUSD": replace(BUILTIN["EURUSD"], swap_long=-100.0),
        "GBPUSD": replace(BUILTIN["GBPUSD"], swap_long=0.0, swap_short=0.0),
    }
    result = Backtest(frames, _BuyEurSellGbp, account=config, forward=None, specs=specs, model=model,
                      **{key: prices}).run()  # fmt: skip
    assert sorted(result.trades["swap"]) == [-100.0, 0.0]
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 600.0
    assert list(result.equity_path["equity"]) == [10_500.0, 9_900.0]
