"""Report figures that did not recompute from the deals, found by attacking the report; each test is named
after the defect and its figures are computed by hand in its docstring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import CandleMeta, make_frame
from datafeeds.timeframes import Timeframe
from strategies import ExpertAdvisor


def hours(rows) -> pd.DataFrame:
    """H1 candles from (open, high, low, close) rows, from a Monday, no spread."""
    a = np.array(rows, dtype=float)
    index = pd.date_range("2024-01-01", periods=len(a), freq="h", tz="UTC")
    data = {"open": a[:, 0], "high": a[:, 1], "low": a[:, 2], "close": a[:, 3], "spread": np.zeros(len(a))}
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5))


class _LossThenQuickWin(ExpertAdvisor):
    """Bar 1: buy 1 lot. Bar 2: close it. Bar 3: buy 1 lot, take-profit 100 points up, met in the bar."""

    def on_bar(self) -> None:
        n = len(self.bars)
        if n == 1:
            self.buy(1.0)
        elif n == 2:
            self.close()
        elif n == 3:
            self.buy(1.0, tp_points=100)


def test_the_balance_drawdown_sees_a_deal_inside_a_bar_not_only_the_bar_closes():
    """Commission 5.00 per lot and deal, 10,000 deposited. Deals: buy 1 lot at 1.10000 (-5: 9,995); sell at
    1.09800 (-200 - 5: 9,790); buy at 1.09800 (-5: 9,785); its take-profit at 1.09900 in the same bar
    (+100 - 5: 9,880). MetaTrader's balance moves with each deal, so the balance drawdown is 10,000 -
    9,785 = 215.00 (2.15 %), its absolute drawdown 215.00 and the recovery factor -120 / 215 = -0.558140.
    At the bars' closes the balance is never below 9,790: 210.00 (2.10 %), -0.571429, in the EA's favour."""
    rows = [(1.1, 1.1, 1.1, 1.1), (1.1, 1.1, 1.1, 1.1), (1.098, 1.098, 1.098, 1.098)]
    rows += [(1.098, 1.0995, 1.098, 1.0985), (1.0985, 1.0985, 1.0985, 1.0985)]
    account = AccountConfig(spread=0, commission=5.0, hedging=True)
    result = Backtest(hours(rows), _LossThenQuickWin, forward=None, account=account).run()
    deals = result.deals
    assert deals["balance"].tolist() == [9995.0, 9790.0, 9785.0, 9880.0]
    s = result.stats
    assert s["total_net_profit"] == -120.0
    assert s["balance_drawdown_maximal"] == 215.0
    assert s["balance_drawdown_maximal_pct"] == pytest.approx(2.15)
    assert s["balance_drawdown_absolute"] == 215.0
    assert s["balance_drawdown_relative_pct"] == pytest.approx(2.15)
    assert s["balance_drawdown_relative"] == 215.0
    assert s["recovery_factor"] == pytest.approx(-120 / 215, abs=1e-6)
    lean = Backtest(hours(rows), _LossThenQuickWin, forward=None, account=account).run_pass(
        {}, ["balance_drawdown_maximal", "recovery_factor"]
    )
    assert lean.stats["balance_drawdown_maximal"] == 215.0
    assert lean.stats["recovery_factor"] == s["recovery_factor"]
