"""MetaTrader report fields and prediction scores against hand-computed values."""

import math

import numpy as np
import pandas as pd
import pytest

from backtests.metrics import drawdowns, prediction_report, streaks, trade_stats
from backtests.scoring import Curve


def test_three_drawdowns_by_hand():
    # Deposit 1000, peak 1100, lowest 400: absolute 600, maximal 700 (63.6 % of the peak).
    curve = np.array([1100.0, 900.0, 500.0, 400.0, 450.0])
    d = drawdowns(curve, 1000.0)
    assert d["absolute"] == 600.0
    assert d["maximal"] == 700.0 and d["maximal_pct"] == pytest.approx(700 / 1100 * 100, abs=1e-6)
    curve = np.array([1100.0, 900.0, 1000.0, 500.0, 550.0, 450.0, 1200.0, 1000.0])
    d = drawdowns(curve, 1000.0)
    assert d["maximal"] == 650.0  # 1100 -> 450
    assert d["relative_pct"] == pytest.approx(650 / 1100 * 100, abs=1e-6)


def test_relative_drawdown_can_come_from_a_different_fall():
    curve = np.array([200.0, 100.0, 10_000.0, 9_000.0])  # 50 % fall of 100 money, then 10 % fall of 1000
    d = drawdowns(curve, 100.0)
    assert d["maximal"] == 1000.0 and d["maximal_pct"] == pytest.approx(10.0)
    assert d["relative_pct"] == pytest.approx(50.0) and d["relative"] == 100.0


def _stats(net, types=None):
    n = len(net)
    times = pd.date_range("2024-01-01", periods=n + 1, freq="D", tz="UTC")
    trades = pd.DataFrame(
        {
            "net_profit": net,
            "type": types or ["buy"] * n,
            "lots": np.ones(n),
            "entry_price": np.ones(n),
            "entry_time": times[:-1],
            "exit_time": times[1:],
            "commission": np.zeros(n),
            "swap": np.zeros(n),
        }
    )
    balance = 1000.0 + np.cumsum(net)
    curves = Curve.of_bars(
        times[1:],
        np.linspace(1.0, 1.1, n),
        balance,
        balance.copy(),
        lambda: (balance.copy(), np.ones(n)),
        deposit=1000.0,
        start_time=times[0],
        start_close=1.0,
    ).frame()
    return trade_stats(trades, curves, deposit=1000.0, deals=2 * n, contract_size=1000.0)


def test_trade_counts_streaks_and_ratios():
    net = [10.0, 20.0, -5.0, -5.0, -5.0, 30.0, -1.0]
    s = _stats(net, ["buy", "sell", "buy", "sell", "buy", "buy", "sell"])
    assert s["total_net_profit"] == 44.0 and s["gross_profit"] == 60.0 and s["gross_loss"] == -16.0
    assert s["profit_factor"] == pytest.approx(60 / 16)
    assert s["expected_payoff"] == pytest.approx(44 / 7)
    assert s["total_trades"] == 7 and s["total_deals"] == 14
    assert s["long_trades"] == 4 and s["long_won_pct"] == pytest.approx(50.0)
    assert s["short_trades"] == 3 and s["short_won_pct"] == pytest.approx(100 / 3)
    assert s["max_consecutive_wins"] == 2 and s["max_consecutive_wins_money"] == 30.0
    assert s["max_consecutive_losses"] == 3 and s["max_consecutive_losses_money"] == -15.0
    assert s["maximal_consecutive_profit"] == 30.0
    assert s["maximal_consecutive_loss"] == -15.0 and s["maximal_consecutive_loss_count"] == 3
    assert s["average_consecutive_wins"] == pytest.approx(1.5)
    assert s["average_consecutive_losses"] == pytest.approx(2.0)
    assert s["largest_profit_trade"] == 30.0 and s["largest_loss_trade"] == -5.0
    assert s["buy_and_hold_return_pct"] == pytest.approx(10.0)


def test_z_score_and_hpr_by_hand():
    net = [10.0, -10.0, 10.0, -10.0, 10.0, 10.0]
    s = _stats(net)
    n, w, lo, runs = 6, 4, 2, 5
    p = 2 * w * lo
    z = (n * (runs - 0.5) - p) / math.sqrt(p * (p - n) / (n - 1))
    assert s["z_score"] == pytest.approx(z, abs=1e-4)
    balance = 1000 + np.cumsum(net)
    hpr = balance / np.concatenate(([1000.0], balance[:-1]))
    assert s["ahpr"] == pytest.approx(hpr.mean(), abs=1e-6)
    assert s["ghpr"] == pytest.approx(np.prod(hpr) ** (1 / 6), abs=1e-6)


def test_no_trades_gives_nulls_not_nan():
    s = _stats([])
    assert s["profit_factor"] is None and s["expected_payoff"] is None and s["total_trades"] == 0


def test_prediction_scores_and_baselines_by_hand():
    # Study bars 0..5 (labels: 4 undefined, 1 buy, 1 sell); forward bars 6..11.
    y_true = np.array([0, 0, 1, 0, 2, 0, 0, 1, 2, 0, 1, -1])
    y_pred = np.array([-1] * 6 + [0, 1, 1, 2, 0, 1])
    rep = prediction_report(
        {"classes": ("undefined", "buy", "sell"), "y_true": y_true, "y_pred": y_pred}, 6, 12
    )
    assert rep["bars"] == 5  # the last bar has no label yet
    assert rep["confusion"] == [[1, 0, 1], [1, 1, 0], [0, 1, 0]]
    m = rep["model"]
    assert m["hit_rate"] == pytest.approx(1 / 3)  # 3 signals, 1 right
    assert m["missed_rate"] == pytest.approx(1 / 3)  # 3 real fractals, 1 called undefined
    assert m["balanced_accuracy"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    assert m["per_class"]["buy"]["precision"] == pytest.approx(0.5)
    always = rep["baselines"]["always_undefined"]
    assert always["hit_rate"] is None and always["missed_rate"] == 1.0
    assert always["balanced_accuracy"] == pytest.approx(1 / 3)
    prior = rep["baselines"]["prior_random"]
    assert rep["study_prior"] == pytest.approx([4 / 6, 1 / 6, 1 / 6], abs=1e-6)
    # Expected hit rate of random signals = share of real fractals among forward bars' buy/sell matches.
    assert prior["hit_rate"] == pytest.approx((2 * 1 / 6 + 1 * 1 / 6) / (5 * 2 / 6))


def test_streaks_of_all_runs_at_once_are_hand_computed():
    """Wins 5, 3 | losses -1, -0.0, 0 | win 2 | loss -4: the longest win run is 2 trades (+8), the longest
    loss run 3 trades (-1), the poorest run the single -4, four runs in all."""
    s = streaks(np.array([5.0, 3.0, -1.0, -0.0, 0.0, 2.0, -4.0]))
    assert (s["max_consecutive_wins"], s["max_consecutive_wins_money"]) == (2, 8.0)
    assert (s["max_consecutive_losses"], s["max_consecutive_losses_money"]) == (3, -1.0)
    assert (s["maximal_consecutive_profit"], s["maximal_consecutive_profit_count"]) == (8.0, 2)
    assert (s["maximal_consecutive_loss"], s["maximal_consecutive_loss_count"]) == (-4.0, 1)
    assert (s["average_consecutive_wins"], s["average_consecutive_losses"], s["runs"]) == (1.5, 2.0, 4)
    empty = streaks(np.zeros(0))
    assert (empty["max_consecutive_wins"], empty["maximal_consecutive_loss"], empty["runs"]) == (0, 0.0, 0)
