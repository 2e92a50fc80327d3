"""Equity at each bar's worst prices (the terminal's per-tick equity, bounded with bar data), by hand and
as a property of real runs: equity drawdown never below the balance drawdown of one-position EAs."""

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker import AccountConfig as Config
from backtests.broker import Broker
from backtests.metrics import drawdowns, equity_drawdowns
from datafeeds import read_sample
from strategies import SmaCrossEA

POINT = 1e-5


def _broker(rows, spread=0, **cfg):
    a = np.array(rows, dtype=float)
    time = pd.date_range("2024-01-01", periods=len(a), freq="h", tz="UTC")
    config = Config(**{"deposit": 100_000.0, "missing_spread": 0, **cfg})
    return Broker(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), spread), time, POINT, config)


def _run(b, actions, last):
    for t in range(last + 1):
        b.bar_open(t)
        if t in actions:
            actions[t](b)
        b.bar_range(t)
    b.finish(last)
    return b.curves(0), b.worst_curves(0)


def test_long_valued_at_the_bid_low_short_at_the_ask_high():
    rows = [(1.0, 1.0, 1.0, 1.0), (1.0, 1.01, 0.97, 1.005), (1.005, 1.02, 1.0, 1.01), (1.01,) * 4]
    b = _broker(rows, spread=20, commission=5.0)
    (balance, equity, _), (worst, margin) = _run(
        b, {1: lambda b: b.order(+1, 1.0, None, None, 0, ""), 3: lambda b: b.close(None, None)}, 3
    )
    entry = 1.0 + 20 * POINT
    assert worst[1] == pytest.approx(100_000 - 5 + (0.97 - entry) * 100_000)
    assert equity[1] == pytest.approx(100_000 - 5 + (1.005 - entry) * 100_000)
    assert worst[2] == pytest.approx(100_000 - 5 + (1.0 - entry) * 100_000)
    assert margin[1] == pytest.approx(100_000 * entry / 100) and margin[3] == 0
    assert worst[3] == balance[3] == equity[3]  # closed at the open: nothing held through bar 3

    b = _broker(rows, spread=20)
    _, (worst, _) = _run(b, {1: lambda b: b.order(-1, 1.0, None, None, 0, "")}, 2)
    assert worst[1] == pytest.approx(100_000 + (1.0 - (1.01 + 20 * POINT)) * 100_000)


def test_exit_bar_counts_the_extreme_before_a_take_profit_not_after_a_stop_loss():
    rows = [(1.0, 1.0, 1.0, 1.0), (1.0, 1.05, 0.98, 1.04), (1.0, 1.0, 1.0, 1.0)]
    b = _broker(rows)
    (balance, _, _), (worst, margin) = _run(b, {0: lambda b: b.order(+1, 1.0, 0.9, 1.03, 0, "")}, 2)
    assert b.trades_frame().iloc[0].exit_reason == "tp"
    assert balance[1] == pytest.approx(103_000)
    assert worst[1] == pytest.approx(98_000)  # the low may have come before the take-profit
    assert margin[1] == pytest.approx(1_000)
    b = _broker(rows)
    (balance, _, _), (worst, _) = _run(b, {0: lambda b: b.order(+1, 1.0, 0.99, None, 0, "")}, 2)
    assert worst[1] == balance[1] == pytest.approx(99_000)  # closed at the stop: the low came after


def test_end_of_test_close_counts_the_last_bars_range():
    rows = [(1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 0.95, 0.99)]
    b = _broker(rows)
    (balance, _, _), (worst, _) = _run(b, {0: lambda b: b.order(+1, 1.0, None, None, 0, "")}, 1)
    assert balance[1] == pytest.approx(99_000) and worst[1] == pytest.approx(95_000)


def test_equity_drawdown_path_takes_peaks_at_closes_and_troughs_at_worst_prices():
    close = np.array([110.0, 120.0, 100.0])
    worst = np.array([95.0, 105.0, 90.0])
    d = equity_drawdowns(close, worst, 100.0)
    assert d["absolute"] == 10.0  # 100 - 90
    assert d["maximal"] == 30.0  # peak 120 at a close, trough 90 at the next bar's worst


@pytest.mark.parametrize("params", [{}, {"sl_points": 100, "tp_points": 150}, {"fast": 3, "slow": 7}])
def test_equity_absolute_drawdown_is_never_below_the_balance_one(params):
    result = Backtest(read_sample(), SmaCrossEA, account=AccountConfig(commission=2.0)).run(**params)
    c, s = result.curves, result.stats
    assert (c.equity_worst <= c.equity + 1e-9).all()
    assert s["equity_drawdown_absolute"] >= s["balance_drawdown_absolute"]
    assert s["equity_drawdown_maximal"] >= drawdowns(c.equity.to_numpy(), 10_000.0)["maximal"]
