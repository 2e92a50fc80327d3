"""A symbol that has had no tick (or minute) yet has no quote, as in MetaTrader's tester: on the data's first
bar a symbol whose first-ever tick comes after the main symbol's shows the EA no price, a request on it or on
a symbol whose money it converts is refused with 10021 naming it, and nothing is priced from that later
tick by any route."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds.ticks import TickMeta, bars_from_ticks, make_ticks
from strategies.base import ExpertAdvisor
from tests.test_backtests.test_multi_minutes_openings import _in_time_order

T0 = pd.Timestamp("2024-01-02", tz="UTC")
H = 3600
LATE = 1.35  # GBPUSD's first-ever tick, 01:05:00: five minutes after the EA's first decision


def _ticks(symbol: str, rows: list[tuple[float, float]]) -> pd.DataFrame:
    """Ticks of ``symbol`` at (seconds from ``T0``, bid), ask = bid (spread 0)."""
    ns = np.array([(T0 + pd.Timedelta(seconds=s)).value for s, _ in rows], dtype=np.int64)
    bid = np.array([p for _, p in rows])
    return make_ticks(ns, bid, bid.copy(), TickMeta(symbol, 5, f"{symbol.lower()}_ticks.csv"))


EUR = [(0, 1.1), (100, 1.1), (H, 1.1), (H + 60, 1.1), (2 * H, 1.1), (3 * H - 1, 1.1)]
GBP = [(H + 300, LATE), (2 * H + 10, 1.3), (3 * H - 1, 1.3)]


class _Cheat(ExpertAdvisor):
    """Tries every route to GBPUSD's price at the first decision (01:00:00, the first bar of GBPUSD and of
    the test), where it has had no tick yet:
    its bid and ask, a market order with stops in points, a pending order, the account's figures, its
    bars."""

    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        if len(self.bars) != 1:
            return
        seen = self.seen
        seen.append(("bid", self.bid_of("GBPUSD")))
        seen.append(("ask", self.ask_of("GBPUSD")))
        seen.append(("bars", len(self.data("GBPUSD"))))
        seen.append(("buy", self.buy(1.0, symbol="GBPUSD", sl_points=100, tp_points=100)))
        seen.append(("retcode", self.last_retcode))
        seen.append(("sell", self.sell(1.0, symbol="GBPUSD")))
        seen.append(("limit", self.buy_limit(1.0, 1.2, symbol="GBPUSD")))
        seen.append(("retcode", self.last_retcode))
        seen.append(("positions", len(self.positions(symbol="GBPUSD"))))
        account = self.account
        seen.append(("equity", account.equity, account.margin))
        seen.append(("eur", self.buy(0.1, symbol="EURUSD")))  # the main symbol is quoted


def _run(ea, rows: dict, deposit: float = 100_000.0, model: str = "ticks"):
    """``ea`` on hand-made ticks of each symbol (``model="ohlc1m"``: on the M1 bars made of them)."""
    ticks = {s: _ticks(s, r) for s, r in rows.items()}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    account = AccountConfig(deposit=deposit, spread=0, leverage=100.0, stop_out_level=50.0)
    fine = (
        {"ticks": ticks}
        if model == "ticks"
        else {"m1": {s: bars_from_ticks(t, "M1") for s, t in ticks.items()}}
    )
    result = Backtest(frames, ea, model=model, account=account, forward=None, **fine).run()
    _in_time_order(result)
    return result


@pytest.mark.parametrize("model", ["ticks", "ohlc1m"])
def test_a_symbol_before_its_first_ever_tick_or_minute_has_no_quote_and_refuses_requests(model):
    """At 01:00:00 GBPUSD's first tick (1.35000 at 01:05:00) is still to come: its bid and ask are NaN, the
    market order, the sell and the buy limit are refused with 10021 naming GBPUSD, and nothing is opened;
    EURUSD trades. It was quoted at 1.35000 and the buy filled there, five minutes ahead. With "1 minute
    OHLC" the same: GBPUSD's first minute is 01:05."""
    _Cheat.seen = []
    result = _run(_Cheat, {"EURUSD": EUR, "GBPUSD": GBP}, model=model)
    seen = dict((k, v) for k, v, *_ in _Cheat.seen)
    assert math.isnan(seen["bid"]) and math.isnan(seen["ask"])
    assert seen["bars"] == 0
    assert seen["buy"] is None and seen["sell"] is None and seen["limit"] is None
    assert [v for k, v, *_ in _Cheat.seen if k == "retcode"] == [10021, 10021]
    assert seen["positions"] == 0
    equity = next(e for e in _Cheat.seen if e[0] == "equity")
    assert equity[1:] == (100_000.0, 0.0)
    assert seen["eur"] is not None
    refused = [r for r in result.rejected if r["symbol"] == "GBPUSD"]
    actions = [(r["action"], r["retcode"]) for r in refused]
    assert actions == [("deal", 10021), ("deal", 10021), ("pending", 10021)]
    assert all("GBPUSD has no price yet" in r["reason"] for r in refused)
    assert not any(str(LATE) in r["reason"] or "1.35" in str(r.values()) for r in refused)
    assert list(result.trades["symbol"]) == ["EURUSD"]


class _Later(ExpertAdvisor):
    """At the second decision (02:00:00) GBPUSD has had its first tick: it is quoted and trades."""

    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        if len(self.bars) == 2:
            self.seen.append(self.bid_of("GBPUSD"))
            self.buy(1.0, symbol="GBPUSD")


def test_ticks_once_its_first_tick_has_come_the_symbol_is_quoted_at_its_last_tick():
    """At 02:00:00 GBPUSD's last tick is its first (01:05:00, 1.35000): the buy fills there and ends the test
    at 1.30000: -5,000.00."""
    _Later.seen = []
    result = _run(_Later, {"EURUSD": EUR, "GBPUSD": GBP})
    assert _Later.seen == [LATE]
    trade = result.trades.iloc[0]
    assert (trade["symbol"], trade["entry_price"], trade["profit"]) == ("GBPUSD", LATE, -5_000.0)


class _Cross(ExpertAdvisor):
    """1 lot of EURGBP at the first decision: its pounds convert through GBPUSD, which has no tick yet."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if self.time_current == T0 + pd.Timedelta(hours=1):
            self.buy(1.0, symbol="EURGBP")


def test_ticks_a_conversion_through_a_pair_without_a_quote_yet_refuses_the_request():
    """EURGBP's first tick, where the EA decides, is at 01:00:00, but its profit converts through GBPUSD,
    whose first tick comes at 01:05:00: the buy is refused with 10021 naming GBPUSD; its margin and profit
    were read at that later tick."""
    rows = {
        "EURGBP": [(H, 0.85), (2 * H, 0.85), (3 * H - 1, 0.85)],
        "GBPUSD": GBP,
        "EURUSD": EUR,
    }
    result = _run(_Cross, rows)
    assert len(result.trades) == 0
    (refused,) = result.rejected
    assert (refused["symbol"], refused["retcode"]) == ("EURGBP", 10021)
    assert "through GBPUSD, which has no price yet" in refused["reason"]


class _Stand(ExpertAdvisor):
    """Holds 1 lot of EURUSD from the first decision and asks the other symbol's bid at every decision."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        self.bid_of("GBPUSD")
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")


@pytest.mark.parametrize("model", ["ticks", "ohlc1m"])
def test_the_late_symbol_is_never_priced_from_its_first_tick_before_it_comes(model, monkeypatch):
    """Every price read of GBPUSD's broker at a moment before 01:05:00 (the EA's question at the decision,
    and the walks, which set every symbol's price before working a tick or minute of another): none is its
    first one's (1.35000, read at 01:00:00 as the bar's open), each is NaN or not asked at all."""
    import backtests.broker.core as core

    read = []
    original = core.Broker.price_points

    def spy(self, side):
        value = original(self, side)
        ns = self.stamp() if self.stamp() is not None else int(self.market.time[self.t].value)
        if self.symbol == "GBPUSD" and ns < (T0 + pd.Timedelta(seconds=H + 300)).value:
            read.append(value)
        return value

    monkeypatch.setattr(core.Broker, "price_points", spy)
    eur = [(0, 1.1), (H, 1.1), (H + 60, 1.1), (H + 120, 1.1), (2 * H, 1.1), (3 * H - 1, 1.1)]
    if model == "ticks":
        result = _run(_Stand, {"EURUSD": eur, "GBPUSD": GBP})
    else:
        ticks = {s: _ticks(s, r) for s, r in {"EURUSD": eur, "GBPUSD": GBP}.items()}
        m1 = {s: bars_from_ticks(t, "M1") for s, t in ticks.items()}
        frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
        account = AccountConfig(deposit=100_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
        result = Backtest(frames, _Stand, model="ohlc1m", m1=m1, account=account, forward=None).run()
    assert list(result.trades["symbol"]) == ["EURUSD"]
    assert all(math.isnan(v) for v in read)


class _AtOnce(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")
    seen: ClassVar[list] = []

    def on_bar(self):
        if len(self.bars) == 1:
            self.seen.append(self.bid_of("GBPUSD"))
            self.buy(1.0, symbol="GBPUSD")


def test_ticks_a_first_tick_at_the_decisions_instant_is_a_quote():
    """GBPUSD's first-ever tick comes at 01:00:00 itself, the instant of EURUSD's where the EA decides: it has
    a quote there (1.35000) and the buy fills at it, ending at 1.30000: -5,000.00."""
    _AtOnce.seen = []
    gbp = [(H, LATE), (2 * H + 10, 1.3), (3 * H - 1, 1.3)]
    result = _run(_AtOnce, {"EURUSD": EUR, "GBPUSD": gbp})
    assert _AtOnce.seen == [LATE]
    assert result.rejected == []
    trade = result.trades.iloc[0]
    assert (trade["entry_price"], trade["profit"]) == (LATE, -5_000.0)
