"""The report folder: files written atomically, JSON complete and loadable, HTML self-contained."""

import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.report import training_outcome, write_report
from backtests.statistics import rows
from datafeeds import read_sample
from strategies import ExpertAdvisor, SmaCrossEA


def test_report_folder_contents(tmp_path):
    result = Backtest(
        read_sample(spread=12).iloc[:1500], SmaCrossEA, account=AccountConfig(commission=3.0)
    ).run(sl_points=200, tp_points=400, lots=0.3)
    page = write_report(result, tmp_path / "run")
    folder = page.parent
    names = ["deals.csv", "orders.csv", "rejected.csv", "report.html", "report.json", "trades.csv"]
    assert sorted(p.name for p in folder.iterdir()) == names
    doc = json.loads((folder / "report.json").read_text())
    assert doc["complete"] is True and doc["seed"] == 0
    assert doc["data"]["symbol"] == "EURUSD" and doc["data"]["bars"] == 1500
    assert doc["account"]["commission"] == 3.0 and doc["ea"]["params"]["lots"] == 0.3
    assert doc["stats"]["total_trades"] == len(result.trades) > 0
    assert {"init_s", "study_s", "replay_s", "evaluate_s"} <= set(doc["timings"])
    assert doc["environment"]["numpy"]
    trades = pd.read_csv(folder / "trades.csv")
    assert len(trades) == doc["stats"]["total_trades"]
    assert trades.net_profit.sum() == pytest.approx(doc["stats"]["total_net_profit"], abs=0.01)
    html = page.read_text()
    # the linked price/equity/drawdown chart and the trade breakdown (no classifier: no confusion matrix,
    # no training), drawn by BokehJS written into the page: nothing is fetched from elsewhere
    assert re.findall(r'data-chart="(\w+)"', html) == ["result", "breakdown"]
    assert not re.findall(r"<script[^>]*\ssrc=|<link\b|<img[^>]*\ssrc=[\"']?http", html)
    assert "Bokeh" in html and "<h2>Orders</h2>" in html and "<h2>Deals</h2>" in html
    for label, _ in rows(doc["stats"], "mt5"):
        assert label.replace("&", "&amp;") in html
    assert not list(folder.glob(".*.tmp"))


def test_interrupted_run_is_marked_incomplete(tmp_path):
    class Stops(ExpertAdvisor):
        def on_bar(self):
            if len(self.bars) == 1200:
                raise KeyboardInterrupt

    result = Backtest(read_sample().iloc[:1500], Stops).run()
    page = write_report(result, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["complete"] is False
    assert "INCOMPLETE" in page.read_text()


def test_training_outcome_names_the_kept_epoch_and_why_training_stopped():
    def rnd(n, kept, stopped, reason, rnd=1, val=0.9):
        epochs = [{"round": rnd, "epoch": e, "loss": 1.0 / e, "val_loss": val} for e in range(1, n + 1)]
        epochs[-1].update(
            kept_epoch=kept,
            epochs_run=n,
            stopped_early=stopped,
            stop_reason=reason,
            kept_loss=1.0 / kept,
            kept_val_loss=val,
        )
        return epochs

    early = rnd(12, 7, True, "validation loss not lower for 5 epochs")
    assert training_outcome(early) == (
        "kept epoch 7 of 12 (training loss 0.1429, validation loss 0.9000); "
        "stopped early: validation loss not lower for 5 epochs"
    )
    plain = rnd(30, 30, False, "30-epoch maximum reached (no early stopping: no validation rows)", val=None)
    assert training_outcome(plain) == (
        "kept epoch 30 of 30 (training loss 0.0333); "
        "stopped: 30-epoch maximum reached (no early stopping: no validation rows)"
    )
    rounds = early + rnd(9, 4, True, "patience", rnd=2) + rnd(3, 3, False, "cap", rnd=3)
    assert training_outcome(rounds) == (
        "kept epochs 7 of 12, 4 of 9, 3 of 3 in 3 rounds; 2 of 3 rounds stopped early"
    )
    assert training_outcome([{"epoch": 1, "loss": 0.5}]) == ""  # an EA that records no outcome


def _report_json(tmp_path, **params):
    result = Backtest(
        read_sample(spread=12).iloc[:2500], SmaCrossEA, account=AccountConfig(commission=3.0, swap_long=-3.0)
    ).run(**params)
    write_report(result, tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    curves = pd.DataFrame(doc["curves"]).set_index("time")
    curves.index = pd.DatetimeIndex(curves.index)
    return doc, curves, pd.DataFrame(doc["trades"])


def _drawdowns(path: np.ndarray, deposit: float) -> tuple[float, float, float, float, float]:
    """MetaTrader's absolute, maximal (money, %) and relative (%, money) drawdowns, written out plainly."""
    peak, best = deposit, (0.0, 0.0)
    rel = (0.0, 0.0)
    for v in path:
        peak = max(peak, v)
        fall = peak - v
        if fall > best[0]:
            best = (fall, fall / peak * 100)
        if peak > 0 and fall / peak * 100 > rel[0]:
            rel = (fall / peak * 100, fall)
    return max(0.0, deposit - min(path)), best[0], best[1], rel[0], rel[1]


def test_report_json_recomputes_every_metatrader_figure(tmp_path):
    doc, curves, trades = _report_json(tmp_path, sl_points=150, tp_points=300, lots=0.5)
    s, deposit = doc["stats"], doc["account"]["deposit"]
    net = trades.net_profit.to_numpy()
    assert len(net) > 20 and len(curves) == s["bars"] + 1
    assert curves.balance.iloc[0] == curves.equity.iloc[0] == deposit
    assert curves.balance.iloc[-1] == pytest.approx(deposit + net.sum(), abs=1e-6)
    wins, losses = net[net > 0], net[net <= 0]
    got = {
        "total_net_profit": net.sum(),
        "gross_profit": wins.sum(),
        "gross_loss": losses.sum(),
        "profit_factor": wins.sum() / -losses.sum(),
        "expected_payoff": net.mean(),
        "largest_profit_trade": wins.max(),
        "largest_loss_trade": losses.min(),
        "average_profit_trade": wins.mean(),
        "average_loss_trade": losses.mean(),
        "commission": trades.commission.sum(),
        "swap": trades.swap.sum(),
        "margin_level_min_pct": curves.margin_level.min(),
    }
    bal = _drawdowns(curves.balance.to_numpy(), deposit)
    path = np.array(doc["equity_path"]["equity"])  # the deposit, each record peak and the low after it
    assert path[0] == deposit and (path >= curves.equity_worst.min() - 1e-6).all()
    eq = _drawdowns(path, deposit)
    for prefix, dd in (("balance", bal), ("equity", eq)):
        for k, name in enumerate(("absolute", "maximal", "maximal_pct", "relative_pct", "relative")):
            got[f"{prefix}_drawdown_{name}"] = dd[k]
    got["recovery_factor"] = net.sum() / bal[1]  # MQL5: STAT_PROFIT / STAT_BALANCE_DD
    assert eq[0] >= bal[0]
    after = deposit + np.cumsum(net)
    hpr = after / np.r_[deposit, after[:-1]]
    got["ahpr"], got["ghpr"] = hpr.mean(), np.prod(hpr) ** (1 / len(hpr))
    got["sharpe_ratio"] = (hpr.mean() - 1) / hpr.std()
    y = np.r_[deposit, after]  # the balance graph from the deposit
    x = np.arange(len(y))
    got["lr_correlation"] = np.corrcoef(x, y)[0, 1]
    fit = np.polyval(np.polyfit(x, y, 1), x)
    got["lr_standard_error"] = np.sqrt(((y - fit) ** 2).sum() / (len(y) - 2))
    runs = [(w, len(list(g)), 0) for w, g in itertools.groupby(net > 0)]
    won = [n for w, n, _ in runs if w]
    lost = [n for w, n, _ in runs if not w]
    got["average_consecutive_wins"], got["average_consecutive_losses"] = np.mean(won), np.mean(lost)
    got["max_consecutive_wins"], got["max_consecutive_losses"] = max(won), max(lost)
    longs = trades.type == "buy"
    got["long_trades"], got["short_trades"] = longs.sum(), (~longs).sum()
    got["long_won_pct"] = (longs & (trades.net_profit > 0)).sum() / longs.sum() * 100
    got["profit_trades"], got["loss_trades"] = len(wins), len(losses)
    for key, value in got.items():
        assert s[key] == pytest.approx(value, rel=1e-6, abs=0.006), key


def test_trades_csv_reads_as_a_trader_expects(tmp_path):
    class HoldThree(ExpertAdvisor):
        def on_bar(self):
            for p in self.positions():
                if len(self.bars) + self.bars.offset - p.bar_open >= 3:
                    self.close(p.ticket, reason="time")
            if not self.positions():
                self.buy(0.37)

    result = Backtest(read_sample(spread=7).iloc[:600], HoldThree).run()
    write_report(result, tmp_path)
    text = (tmp_path / "trades.csv").read_text()
    assert "-0.0," not in text and ",-0.0\n" not in text
    rows = pd.read_csv(tmp_path / "trades.csv")
    assert set(rows.exit_reason) <= {"time", "end of test"} and (rows.exit_reason == "time").sum() > 10
    assert rows.entry_time.str.fullmatch(r"\d{4}\.\d\d\.\d\d \d\d:\d\d:\d\d").all()
    for col, places in (("entry_price", 5), ("exit_price", 5), ("profit", 2), ("net_profit", 2), ("mae", 2)):
        assert (rows[col].round(places) == rows[col]).all(), col
    assert rows.net_profit.sum() == pytest.approx(result.trades.net_profit.sum(), abs=0.01 * len(rows))


def test_prediction_rows_follow_the_eas_classes_and_expected_counts_read_as_such():
    from backtests.metrics import prediction_report
    from backtests.page import _prediction_tables

    y_true = np.array([0, 1, 2, 0, 2, 1, 0, 2, 1, 1])
    y_pred = np.array([-1] * 3 + [0, 2, 1, 1, 2, 0, 1])
    evaluated = {"classes": ["no_trade", "down", "up"], "y_true": y_true, "y_pred": y_pred}
    pred = prediction_report(evaluated, 3, 10)
    table = _prediction_tables(pred)
    assert "fractal" not in table.lower()
    assert "Missed down/up (called no_trade)" in table and "Real down/up" in table
    assert "always no_trade" in table
    assert "≈" in table  # the class-prior baseline's signal count is an expectation, not a count


def test_a_rise_is_drawn_as_an_up_triangle_whatever_the_class_order():
    from backtests.plots import direction

    names = ("no_trade", "down", "up", "buy", "SELL", "undefined")
    assert [direction(c) for c in names] == [0, -1, 1, 1, -1, 0]
