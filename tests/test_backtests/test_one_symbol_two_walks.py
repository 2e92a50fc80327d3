"""One symbol backtested two ways, on its own (the one-symbol replay) and as the only symbol of a list (the
merged walk of several symbols), gives one equity drawdown: the equity at every price the model models,
as MetaTrader's Strategy Tester measures it, never the bar's own four prices where the run walked finer
ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
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


def _hand_worked():
    """Bar 0 flat at 1.1000 (the buy), bar 1 a bull hour (open 1.1000, high 1.1050, low 1.0950, close
    1.1010) whose minutes rise to the high first and fall to the low after it, then flat hours at 1.1010."""
    rows = [(1.1,) * 4, (1.1000, 1.1050, 1.0950, 1.1010), *[(1.1010,) * 4] * 3]
    index = pd.date_range(T0, periods=len(rows), freq="h")
    data = dict(zip(("open", "high", "low", "close"), np.array(rows).T, strict=True))
    frame = make_frame({**data, "spread": np.zeros(len(rows), dtype=np.int32)}, index,
                       CandleMeta("EURUSD", Timeframe.H1, 5))  # fmt: skip
    minutes = [
        (T0, (1.1000, 1.1000, 1.1000, 1.1000)),
        (T0 + pd.Timedelta(hours=1), (1.1000, 1.1050, 1.1000, 1.1050)),  # bull: up to the high
        (T0 + pd.Timedelta(hours=1, minutes=1), (1.1050, 1.1050, 1.0950, 1.0960)),  # bear: down to the low
        (T0 + pd.Timedelta(hours=1, minutes=2), (1.0960, 1.1010, 1.0960, 1.1010)),
        *[(T0 + pd.Timedelta(hours=h), (1.1010,) * 4) for h in (2, 3, 4)],
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
