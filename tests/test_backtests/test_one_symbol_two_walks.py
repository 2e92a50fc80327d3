"""One symbol backtested two ways, on its own (the one-symbol replay) and as the only symbol of a list (the
merged walk of several symbols), gives one equity drawdown: the equity at every price the model models,
as MetaTrader's Strategy Tester measures it, never the bar's own four prices where the run walked finer
ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import bars_from_ticks, resample, synthetic_candles, synthetic_ticks
from datafeeds.candles import CandleMeta, make_frame
from datafeeds.timeframes import Timeframe
from strategies.base import ExpertAdvisor

T0 = pd.Timestamp("2024-01-02", tz="UTC")
DD_KEYS = ("absolute", "maximal", "maximal_pct", "relative_pct", "relative")


class _BuyOnce(ExpertAdvisor):
    symbols = ("EURUSD",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0)


def _hand_worked(symbol: str = "EURUSD", digits: int = 5, unit: float = 0.0001, base: float = 1.1):
    """Bar 0 flat at ``base`` (the buy), bar 1 a bull hour (open ``base``, high +50 ``unit``s, low -50,
    close +10) whose minutes rise to the high first and fall to the low after it (the second minute closes
    at -40), then flat hours at the close. EURUSD: 1.1000, 1.1050, 1.0950, 1.1010."""

    def at(k: int) -> float:
        return round(base + k * unit, digits)

    rows = [(base,) * 4, (base, at(50), at(-50), at(10)), *[(at(10),) * 4] * 3]
    index = pd.date_range(T0, periods=len(rows), freq="h")
    data = dict(zip(("open", "high", "low", "close"), np.array(rows).T, strict=True))
    frame = make_frame({**data, "spread": np.zeros(len(rows), dtype=np.int32)}, index,
                       CandleMeta(symbol, Timeframe.H1, digits))  # fmt: skip
    minutes = [
        (T0, (base,) * 4),
        (T0 + pd.Timedelta(hours=1), (base, at(50), base, at(50))),  # bull: up to the high
        (T0 + pd.Timedelta(hours=1, minutes=1), (at(50), at(50), at(-50), at(-40))),  # bear: down to the low
        (T0 + pd.Timedelta(hours=1, minutes=2), (at(-40), at(10), at(-40), at(10))),
        *[(T0 + pd.Timedelta(hours=h), (at(10),) * 4) for h in (2, 3, 4)],
    ]
    m1 = pd.DataFrame([p for _, p in minutes], columns=["open", "high", "low", "close"],
                      index=pd.DatetimeIndex([t for t, _ in minutes]))  # fmt: skip
    m1["spread"] = 0
    return frame, m1


@pytest.mark.parametrize("as_list", [False, True])
def test_a_peak_and_a_trough_inside_one_bars_minutes_are_the_drawdown_of_both_walks(as_list):
    """1 lot of EURUSD bought at 1.10000 (no spread: 1.00 USD a point). Bar 1's minutes take the equity
    10,000 -> 10,500 (1.1050, the first minute) -> 9,500 (1.0950, the second) -> 10,100 (the close): the
    largest fall MetaTrader's 1 minute OHLC models is 10,500 -> 9,500 = 1,000.00 USD (9.523810 % of the
    peak), the deposit's own low 500.00. The bar's own four prices (a bull bar: open, low, high, close)
    put the low before the high and saw only 10,000 -> 9,500 = 500.00 (5 %); the merged walk of the same
    symbol as a one-symbol list booked that, where the one-symbol replay booked the 1,000.00."""
    frame, m1 = _hand_worked()
    data = {"EURUSD": frame} if as_list else frame
    minutes = {"EURUSD": m1} if as_list else m1
    result = Backtest(data, _BuyOnce, model="ohlc1m", m1=minutes, forward=None,
                      account=AccountConfig(spread=0, missing_spread=0)).run()  # fmt: skip
    assert len(result.trades) == 1 and result.trades.iloc[0]["profit"] == 100.0
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == 1_000.0
    assert stats["equity_drawdown_maximal_pct"] == pytest.approx(100 * 1_000 / 10_500, abs=1e-6)
    assert stats["equity_drawdown_absolute"] == 500.0
    assert list(result.equity_path["equity"]) == [10_500.0, 9_500.0]  # the peak and the low after it


class _BuyYenOnce(ExpertAdvisor):
    symbols = ("USDJPY",)

    def on_bar(self):
        if len(self.bars) == 1:
            self.buy(1.0, symbol="USDJPY")


def test_a_lone_symbol_converting_at_its_own_price_is_valued_at_each_minutes_price():
    """USDJPY alone on a dollar account (no spread): 1 lot (100,000 USD) bought at 148.000; bar 1's minutes
    go to 148.500 (+50,000 JPY, a gain sold at 148.500: +336.700337 USD), then to 147.500 (-50,000 JPY,
    bought at 147.500: -338.983051 USD), then close at 148.100. The largest fall is 10,336.700337 ->
    9,661.016949 = 675.683388 USD (6.536742 % of the peak). The bar's four prices (bull: open, low, high,
    close) saw only the deposit's fall to 9,661.016949: 338.983051."""
    frame, m1 = _hand_worked("USDJPY", 3, 0.01, 148.0)
    result = Backtest({"USDJPY": frame}, _BuyYenOnce, model="ohlc1m", m1={"USDJPY": m1}, forward=None,
                      account=AccountConfig(spread=0, missing_spread=0)).run()  # fmt: skip
    assert len(result.trades) == 1 and result.trades.iloc[0]["entry_price"] == 148.0
    peak, low = 10_000 + 50_000 / 148.5, 10_000 - 50_000 / 147.5
    stats = result.stats
    assert stats["equity_drawdown_maximal"] == round(peak - low, 6) == 675.683388
    assert stats["equity_drawdown_maximal_pct"] == round((peak - low) / peak * 100, 6)
    assert stats["equity_drawdown_absolute"] == round(10_000 - low, 6)


def _harness():
    """``tools/diff_harness.py``: random EAs of every request kind on random markets, one symbol run both
    ways (``case(..., single_path=True/False)``), every figure as exact text (``digest``)."""
    path = Path(__file__).resolve().parents[2] / "tools" / "diff_harness.py"
    spec = importlib.util.spec_from_file_location("diff_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the report's shape of a symbol list (its symbols' table and charts, the model's line), not its figures
_SHAPE = ("report.json", "chart_data", "symbol_charts")


@pytest.mark.parametrize("model", ["open", "ohlc1m", "ticks"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_eas_on_one_symbol_give_every_figure_the_same_both_ways(model, seed):
    """Market, pending, stop-limit, SL/TP, partial and close-by requests on a rich hedging account, a small
    one that meets stop-outs, a netting one with swaps and a leveraged one: the trades, orders, deals,
    balance, curves, the equity path's skeleton and every statistic (equity drawdowns included) are the
    same text from the one-symbol replay and the merged walk of a one-symbol list. Before, 1 minute OHLC
    and ticks gave two equity drawdowns in every case (seed 0, the leveraged account, ticks: 1,393.00 USD
    one way, 1,388.35 the other)."""
    harness = _harness()
    for account in range(len(harness.ACCOUNTS)):
        single = harness.digest(harness.case(model, seed, 1, account, single_path=True))
        merged = harness.digest(harness.case(model, seed, 1, account, single_path=False))
        assert single.keys() == merged.keys()
        differ = [k for k in single if k not in _SHAPE and single[k] != merged[k]]
        assert not differ, (model, seed, account, differ)
        assert single["stats"].count("equity_drawdown") == 5


class _EurusdBesideGbpusd(ExpertAdvisor):
    """Trades EURUSD only, with stops, beside a declared GBPUSD it never touches."""

    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        bars = self.data("EURUSD")
        if len(bars) < 2 or self.position_of("EURUSD"):
            return
        up = bars.close[-1] > bars.close[-2]
        (self.buy if up else self.sell)(1.0, symbol="EURUSD", sl_points=200, tp_points=300)


class _EurusdAlone(_EurusdBesideGbpusd):
    symbols = ("EURUSD",)


@pytest.mark.parametrize("model", ["ohlc1m", "ticks"])
def test_one_traded_symbol_beside_an_idle_one_is_the_one_symbol_runs_path(model):
    """An account whose deals are all of EURUSD, with GBPUSD declared and never traded: its equity moves
    with EURUSD's minutes or ticks alone, so its equity path and every equity drawdown are the one-symbol
    run's. The path was built from each bar's four prices there, whatever the minutes did."""
    minutes = {s: synthetic_candles(s, "M1", 60 * 24 * 6, seed=k, start="2023-01-02")
               for k, s in ((4, "EURUSD"), (5, "GBPUSD"))}  # fmt: skip
    if model == "ticks":
        fine = {s: synthetic_ticks(m, seed=1) for s, m in minutes.items()}
        hours = {s: resample(bars_from_ticks(t, "M1"), "H1") for s, t in fine.items()}
    else:
        fine, hours = minutes, {s: resample(m, "H1") for s, m in minutes.items()}
    key = "ticks" if model == "ticks" else "m1"
    account = AccountConfig(hedging=True)
    both = Backtest(hours, _EurusdBesideGbpusd, account=account, forward=None, model=model,
                    **{key: fine}).run()  # fmt: skip
    alone = Backtest(hours["EURUSD"], _EurusdAlone, account=account, forward=None, model=model,
                     **{key: fine["EURUSD"]}).run()  # fmt: skip
    assert len(both.trades) == len(alone.trades) > 30
    for k in (f"equity_drawdown_{x}" for x in DD_KEYS):
        assert both.stats[k] == alone.stats[k], k
    pd.testing.assert_frame_equal(both.equity_path, alone.equity_path, check_exact=True)
