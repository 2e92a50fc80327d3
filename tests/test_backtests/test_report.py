"""The report folder: files written atomically, JSON complete and loadable, HTML self-contained."""

import json

import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.report import MT5_ROWS, training_outcome, write_report
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
    # balance/equity, drawdown, trade breakdown, price (no classifier: no confusion matrix, no training)
    assert html.count("data:image/png;base64,") == 4
    assert "<script" not in html and "http" not in html  # nothing fetched from elsewhere
    for label, _ in MT5_ROWS:
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
