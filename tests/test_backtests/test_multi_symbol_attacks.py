"""Hostile cases of multi-symbol, multi-timeframe runs: bars of a broker clock seen before they close."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.broker.account import cents
from datafeeds import make_frame
from datafeeds.clock import BrokerClock
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor


class _Monthly(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    timeframes = ("H1", "MN1")
    seen: ClassVar[list] = []

    def on_bar(self):
        view = self.data("GBPUSD", self.timeframes[1])
        if len(view):
            self.seen.append((self.time_current, view.time[-1]))


class _Daily(_Monthly):
    timeframes = ("H1", "D1")


def _last_h1_open(h1: pd.DataFrame, clock: BrokerClock, label: pd.Timestamp, timeframe: str) -> pd.Timestamp:
    """The open time of the last H1 bar inside the higher bar opened at ``label`` (UTC), grouped by the
    broker's calendar, computed here independently of the library."""
    broker = clock.to_broker_seconds(h1.index.as_unit("s").asi8).astype("datetime64[s]")
    own = clock.to_broker_seconds(np.array([label.value // 10**9]))[0].astype("datetime64[s]")
    unit = "M" if timeframe == "MN1" else "D"
    return h1.index[broker.astype(f"datetime64[{unit}]") == own.astype(f"datetime64[{unit}]")][-1]


@pytest.mark.parametrize(
    ("ea", "clock", "start", "hours"),
    [
        (_Monthly, BrokerClock(2.0, "none"), "2024-01-01", 24 * 75),
        (_Daily, BrokerClock(2.0, "us"), "2024-10-28", 24 * 10),  # New York falls back on 3 November
    ],
    ids=["MN1 at UTC+2", "D1 at UTC+2/us over the autumn switch"],
)
def test_a_higher_bar_of_a_broker_clock_is_invisible_until_its_last_hour_has_closed(ea, clock, start, hours):
    ea.seen = []
    frames = {
        s: synthetic_candles(s, "H1", hours, seed=i + 1, clock=clock, start=start)
        for i, s in enumerate(ea.symbols)
    }
    Backtest(frames, ea).run()
    assert len(ea.seen) > 100
    early = [
        (now, label)
        for now, label in ea.seen
        if _last_h1_open(frames["GBPUSD"], clock, label, ea.timeframes[1]) + pd.Timedelta(hours=1) > now
    ]
    assert early == []


class _HoldEurgbp(ExpertAdvisor):
    symbols = ("EURGBP",)

    def on_bar(self):
        if not self.positions():
            self.buy(1.0, symbol="EURGBP")


@pytest.mark.parametrize("move", [+0.04, -0.04], ids=["GBPUSD up", "GBPUSD down"])
def test_an_end_of_test_deal_is_converted_at_the_pairs_last_close_not_its_last_open(move):
    """GBPUSD moves 4% in the last bar: the end-of-test deal of EURGBP at that bar's close converts its pounds
    at GBPUSD's close (a gain at the bid, a loss at the ask), as the equity at that close does, not at the
    open an hour earlier."""
    frames = {
        s: synthetic_candles(s, "H1", 60, seed=i + 7) for i, s in enumerate(("EURGBP", "GBPUSD", "EURUSD"))
    }
    gbp = frames["GBPUSD"].copy()
    last = gbp.index[-1]
    close = round(gbp.at[last, "open"] * (1 + move), 5)
    gbp.loc[last, "close"] = close
    gbp.loc[last, "high"] = max(gbp.at[last, "open"], close)
    gbp.loc[last, "low"] = min(gbp.at[last, "open"], close)
    frames["GBPUSD"] = make_frame(gbp, gbp.index, gbp.attrs["candles"])
    result = Backtest(frames, _HoldEurgbp).run()
    trade = result.trades.iloc[-1]
    assert trade["exit_time"] == last and trade["lots"] == 1.0
    pounds = round((trade["exit_price"] - trade["entry_price"]) * 100_000, 2)
    rate = close if pounds > 0 else round(close + gbp.at[last, "spread"] * 1e-5, 5)
    assert trade["profit"] == cents(pounds * rate)
    assert result.equity["equity"].iloc[-1] == pytest.approx(result.equity["balance"].iloc[-1], abs=0.005)


def test_a_converted_swap_is_booked_in_whole_cents_and_the_balance_equals_the_trades():
    """USDJPY held long over one server midnight at a swap of -7.3 points a lot: -730 yen, bought with dollars
    at the rollover's USDJPY bid 150.000 (a loss is divided by the bid): -4.8667, booked as -4.87. The balance
    moves by exactly what the trade reports, in whole cents."""
    from dataclasses import replace

    from backtests.broker import AccountConfig
    from backtests.broker.portfolio import open_brokers
    from datafeeds.clock import UTC
    from datafeeds.symbols import BUILTIN

    time = pd.DatetimeIndex(["2024-01-02 22:00", "2024-01-02 23:00", "2024-01-03 00:00"], tz="UTC")
    o = np.array([150.000, 150.000, 150.000])
    columns = {"USDJPY": (o, o, o, o, np.full(3, 10.0), time)}
    specs = {"USDJPY": replace(BUILTIN["USDJPY"], swap_long=-7.3)}
    brokers = open_brokers(columns, specs, AccountConfig(), UTC)
    uj = brokers["USDJPY"]
    for t in range(3):
        uj.open_checks(t, uj.enter(t))
        if t == 0:
            uj.order(+1, 1.0, None, None, 0, "")
        uj.bar_range(t)
    uj.finish(2)
    trade = uj.trades_frame().iloc[0]
    assert trade["swap"] == -4.87
    assert uj.balance == 10_000 + trade["net_profit"]
    assert uj.balance == round(uj.balance, 2)


class _Pair(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        pass


def test_symbols_on_different_server_clocks_are_refused_by_name():
    """One account trades on one server: GBPUSD's candles on a UTC+2 clock beside EURUSD's on UTC would
    build its days, rollovers and D1 bars on one clock and book its swaps on the other."""
    from backtests.errors import SymbolsError

    frames = {
        "EURUSD": synthetic_candles("EURUSD", "H1", 100, seed=1),
        "GBPUSD": synthetic_candles("GBPUSD", "H1", 100, seed=2, clock=BrokerClock(2.0)),
    }
    with pytest.raises(SymbolsError, match=r"GBPUSD are on a \+2 server clock, those of EURUSD on UTC"):
        Backtest(frames, _Pair)


class _EarlyQuote(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        ticket = (
            self.buy(0.1, symbol="GBPUSD", sl_points=100) if not self.positions(symbol="GBPUSD") else None
        )
        self.seen.append((self.time_current, self.bid_of("GBPUSD"), self.ask_of("GBPUSD"), ticket))


def test_a_symbol_before_its_first_bar_quotes_nothing_not_its_first_open():
    """GBPUSD's history starts 50 hours after EURUSD's: before then it has no quote (MetaTrader's
    SymbolInfoDouble gives nothing for a symbol without ticks), never the open of its first bar, which lies
    in the future; a request there is refused as the market closed (10018)."""
    _EarlyQuote.seen = []
    eu = synthetic_candles("EURUSD", "H1", 200, seed=1)
    gb = synthetic_candles("GBPUSD", "H1", 200, seed=2)
    first = gb.index[50]
    gb = make_frame(gb.iloc[50:], gb.index[50:], gb.attrs["candles"])
    result = Backtest({"EURUSD": eu, "GBPUSD": gb}, _EarlyQuote).run()
    before = [(bid, ask, ticket) for now, bid, ask, ticket in _EarlyQuote.seen if now < first]
    assert before and all(np.isnan(bid) and np.isnan(ask) and ticket is None for bid, ask, ticket in before)
    at_first = next((bid, ask) for now, bid, ask, _ in _EarlyQuote.seen if now == first)
    assert at_first[0] == gb.at[first, "open"]
    rejected = pd.DataFrame(result.rejected)
    assert len(rejected) == len(before) and set(rejected["retcode"]) == {10018}
    assert result.trades["entry_time"].min() >= first
