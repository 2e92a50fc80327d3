"""The walk of every minute of several symbols (``backtests.merged._every_minute``, taken where the
account's stop-out may be reached in the bar) books the same money as the screened walk, which skips the
minutes where nothing can be reached: each minute worked from its own open at its own spread (MetaTrader's
four ticks of a 1-minute OHLC minute, each at that minute's spread), and a symbol whose price has not moved
checked for the stop-out alone while a pair converting its money moves."""

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
from tests.test_backtests.test_multi_minutes_openings import _in_time_order

T0 = pd.Timestamp("2024-01-02", tz="UTC")
DIGITS = {"USDJPY": 3, "EURUSD": 5, "EURGBP": 5, "GBPUSD": 5}


def _minutes(symbol: str, base: float, spread: int, special: dict) -> pd.DataFrame:
    """Four hours of flat M1 bars at ``base`` and ``spread`` points, minute i replaced by ``special[i]``
    ((o, h, l, c), spread)."""
    n = 240
    cols = {c: np.full(n, base) for c in ("open", "high", "low", "close")}
    spreads = np.full(n, spread, dtype=np.int32)
    for i, ((o, h, lo, c), s) in special.items():
        cols["open"][i], cols["high"][i], cols["low"][i], cols["close"][i] = o, h, lo, c
        spreads[i] = s
    cols.update(
        tick_volume=np.ones(n, dtype=np.int64), real_volume=np.zeros(n, dtype=np.int64), spread=spreads
    )
    index = pd.date_range(T0, periods=n, freq="min")
    return make_frame(cols, index, CandleMeta(symbol, Timeframe.M1, DIGITS[symbol], UTC, "test"))


def _run(ea, m1: dict, account: AccountConfig, every_minute: bool, monkeypatch):
    """``ea`` on ``m1`` resampled to H1, ``ohlc1m``; the calls of the every-minute walk counted, and with
    ``every_minute`` that walk taken in every bar (the screens off, as where the stop-out may be reached)."""
    calls = []
    walk = merged._every_minute

    def counted(*args):
        calls.append(args[1])
        return walk(*args)

    monkeypatch.setattr(merged, "_every_minute", counted)
    if every_minute:
        monkeypatch.setattr(merged, "_stop_out_possible", lambda *args: True)
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    result = Backtest(frames, ea, model="ohlc1m", m1=m1, account=account, forward=None).run()
    _in_time_order(result)
    return result, calls


class _ShortYen(ExpertAdvisor):
    """1 lot of USDJPY sold at the second bar (01:00) with its stop-loss at 148.300, 0.01 lot of EURUSD
    bought (2 points of spread)."""

    symbols = ("USDJPY", "EURUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.sell(1.0, symbol="USDJPY", sl=148.3)
            self.buy(0.01, symbol="EURUSD")


# USDJPY flat at 148.000 with 10 points of spread, but its 02:01 minute: at 148.500 with 20 points.
_YEN_GAP = {121: ((148.5, 148.5, 148.5, 148.5), 20)}


@pytest.mark.parametrize(
    ("deposit", "walked"),
    [(452.0, True), (100_000.0, False)],
    ids=["every minute (stop-out reachable)", "screened"],
)
def test_a_gap_through_a_stop_converts_at_its_own_minutes_spread_in_the_walk_of_every_minute(
    deposit, walked, monkeypatch
):
    """Sold at 148.000 (01:00, bid), the stop-loss 148.300 gapped through at 02:01, whose ask opens at
    148.500 + 0.020 = 148.520: filled there, (148.000 - 148.520) x 100,000 = -52,000 JPY, a loss bought at
    USDJPY's bid of that moment, 148.520 - 0.020 (its own minute's spread) = 148.500: -52,000 / 148.500 =
    -350.168... = -350.17 USD. The walk of every minute read the spread of the minute before (10 points,
    bid 148.510): -52,000 / 148.510 = -350.14, 3 cents in the trader's favour, where the screened walk
    booked -350.17.

    Every minute is walked in the third hour on 452 USD at leverage 500: margin 100,000 / 500 = 200
    (USDJPY) + 0.01 x 100,000 / 500 x 1.10002 = 2.20 (EURUSD, at its ask) = 202.20 USD, stop-out at 50 % =
    101.10; the short at the hour's highest ask 148.520 over its lowest bid 148.000: -52,000 / 148.000 =
    -351.35, and EURUSD at its bid 1.10000: -0.02, 452 - 351.37 = 100.63, below the level: the stop-out is
    not ruled out. The equity at the gap, 452 - 350.17 - 0.02 = 101.81, stays above 101.10: no stop-out."""
    m1 = {
        "USDJPY": _minutes("USDJPY", 148.0, 10, _YEN_GAP),
        "EURUSD": _minutes("EURUSD", 1.1, 2, {}),
    }
    account = AccountConfig(deposit=deposit, leverage=500.0, stop_out_level=50.0)
    result, calls = _run(_ShortYen, m1, account, False, monkeypatch)
    assert (2 in calls) == walked  # the third hour: walked minute by minute only near the stop-out
    trade = result.trades[result.trades["symbol"] == "USDJPY"].iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("sl", T0 + pd.Timedelta(minutes=121))
    assert trade["exit_price"] == pytest.approx(148.52)
    assert trade["profit"] == -350.17


class _CrossAndStopLimit(ExpertAdvisor):
    """1 lot of EURGBP bought at the second bar (its pounds converted through GBPUSD), and a buy stop-limit
    of 0.1 lot: stop 0.85100, limit 0.85050."""

    symbols = ("EURGBP",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURGBP")
            self.buy_stop_limit(0.1, 0.851, 0.8505, symbol="EURGBP")


# EURGBP's 01:00 minute rises 0.85000 -> 0.85150 and closes at 0.85120, where it stays until 01:05, which
# opens at 0.85040; no spread (``spread=0``).
_RISE_THEN_DIP = {
    60: ((0.85, 0.8515, 0.85, 0.8512), 0),
    **{i: ((0.8512, 0.8512, 0.8512, 0.8512), 0) for i in range(61, 65)},
    **{i: ((0.8504, 0.8504, 0.8504, 0.8504), 0) for i in range(65, 240)},
}


@pytest.mark.parametrize("every_minute", [False, True], ids=["screened", "every minute"])
def test_a_stop_limit_turned_limit_inside_a_minute_never_fills_at_that_minutes_passed_open(
    every_minute, monkeypatch
):
    """Its 01:00 minute (open, low, high, close: 0.85000, 0.85000, 0.85150, 0.85120) takes the ask through
    the stop 0.85100 on the way up, so the order becomes a buy limit at 0.85050, which the rest of the minute
    (up to 0.85150, back to 0.85120) and the four flat minutes after it never reach; 01:05 opens at 0.85040,
    below it: filled there at 01:05, 0.85040. In the walk of every minute GBPUSD's 01:00 minute, which moves
    EURGBP's pounds, re-checked EURGBP's whole book at its price then, the open 0.85000 of its minute already
    worked: the limit filled at 01:00 at 0.85000, a price that had passed before the limit existed."""
    m1 = {
        "EURGBP": _minutes("EURGBP", 0.85, 0, _RISE_THEN_DIP),
        "GBPUSD": _minutes("GBPUSD", 1.3, 0, {}),
        "EURUSD": _minutes("EURUSD", 1.1, 0, {}),
    }
    account = AccountConfig(deposit=100_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result, calls = _run(_CrossAndStopLimit, m1, account, every_minute, monkeypatch)
    assert (1 in calls) == every_minute
    order = result.orders[result.orders["type"] == "buy_stop_limit"].iloc[0]
    assert (order["state"], order["time_done"]) == ("filled", T0 + pd.Timedelta(minutes=65))
    assert order["fill_price"] == pytest.approx(0.8504)
    deal = result.deals[result.deals["order"] == order["ticket"]].iloc[0]
    assert (deal["time"], deal["price"]) == (T0 + pd.Timedelta(minutes=65), pytest.approx(0.8504))


class _ShortYenAlone(ExpertAdvisor):
    """``_ShortYen`` without EURUSD: USDJPY alone keeps the single-symbol walk of its minutes."""

    symbols = ("USDJPY",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.sell(1.0, symbol="USDJPY", sl=148.3)


def test_a_lone_symbol_converting_at_its_own_price_reads_its_minutes_spread_not_its_bars_opening_one(
    monkeypatch,
):
    """USDJPY alone on a dollar account (its yen converted at its own price, so its minutes are walked as one
    symbol's): the stop-loss gapped through at 02:01 at 148.520 books -52,000 JPY at that minute's bid
    148.500 (20 points of spread): -350.17 USD, as with EURUSD beside it. The single-symbol walk read the
    spread of the bar's opening (its 02:00 minute's 10 points, bid 148.510): -350.14."""
    m1 = {"USDJPY": _minutes("USDJPY", 148.0, 10, _YEN_GAP)}
    account = AccountConfig(deposit=100_000.0, leverage=500.0, stop_out_level=50.0)
    result, calls = _run(_ShortYenAlone, m1, account, False, monkeypatch)
    assert not calls
    trade = result.trades.iloc[0]
    assert (trade["exit_reason"], trade["exit_time"]) == ("sl", T0 + pd.Timedelta(minutes=121))
    assert trade["exit_price"] == pytest.approx(148.52)
    assert trade["profit"] == -350.17


class _TwoLongs(ExpertAdvisor):
    """1 lot of EURUSD and 1 lot of GBPUSD bought at the second bar (01:00)."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="EURUSD")
            self.buy(1.0, symbol="GBPUSD")


def test_the_stop_out_bound_before_the_decision_reads_the_close_the_main_symbol_stands_at():
    """EURUSD (the main symbol) falls from 1.10000 to 1.09000 in its 01:59 minute and has no minute again
    until 02:10, which opens at 1.10000: the EA decides at 02:10, and GBPUSD's minutes of 02:00-02:09 are
    worked before, EURUSD standing at its 1.09000 meanwhile. GBPUSD's 02:05 minute falls from 1.30000 to
    1.29000. Both bought at 01:00 (spread 0) on 3,000 USD: margin 1,100 + 1,300 = 2,400 USD, stop-out at
    50 % = 1,200. At 01:59 the equity is 3,000 - 1,000 = 2,000. At 02:05 it reaches 1,200 where
    3,000 - 1,000 - (1.30000 - p) x 100,000 = 1,200, p = 1.29200: stopped out there, the most losing
    position first, EURUSD at its 1.09000 (-1,000.00 against GBPUSD's -800); then the margin is 1,300 and
    the level 650, and GBPUSD at 1.29000 leaves 1,000: it stays open.

    The walk's bound valued EURUSD at its price at the decision, 1.10000, a price still to come:
    3,000 - 1,000 (GBPUSD at its lowest) = 2,000 above 1.1 x 1,200 = 1,320, so the stop-out was ruled out
    and GBPUSD's minutes were passed over; every minute walked stopped the account out at 02:05."""
    m1 = {
        "EURUSD": _minutes("EURUSD", 1.1, 0, {119: ((1.1, 1.1, 1.09, 1.09), 0)}).drop(
            pd.date_range(T0 + pd.Timedelta(minutes=120), periods=10, freq="min")
        ),
        "GBPUSD": _minutes("GBPUSD", 1.3, 0, {125: ((1.3, 1.3, 1.29, 1.29), 0)}),
    }
    frames = {s: resample(df, "H1") for s, df in m1.items()}
    account = AccountConfig(deposit=3_000.0, spread=0, leverage=100.0, stop_out_level=50.0)
    result = Backtest(frames, _TwoLongs, model="ohlc1m", m1=m1, account=account, forward=None).run()
    trades = result.trades.set_index("symbol")
    eurusd = trades.loc["EURUSD"]
    assert (eurusd["exit_reason"], eurusd["exit_time"]) == ("stop out", T0 + pd.Timedelta(minutes=125))
    assert eurusd["exit_price"] == pytest.approx(1.09) and eurusd["profit"] == -1000.00
    assert trades.loc["GBPUSD", "exit_reason"] == "end of test"
