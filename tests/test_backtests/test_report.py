"""The report folder: files written atomically, JSON complete and loadable, HTML self-contained."""

import json

import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.report import MT5_ROWS, write_report
from datafeeds import read_sample
from strategies import ExpertAdvisor, SmaCrossEA


def test_report_folder_contents(tmp_path):
    result = Backtest(
        read_sample(spread=12).iloc[:1500], SmaCrossEA, account=AccountConfig(commission=3.0)
    ).run(sl_points=200, tp_points=400, lots=0.3)
    page = write_report(result, tmp_path / "run")
    folder = page.parent
    assert sorted(p.name for p in folder.iterdir()) == ["report.html", "report.json", "trades.csv"]
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
