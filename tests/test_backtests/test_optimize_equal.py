"""Whatever runs the passes and however the store is written, the optimisation's figures are those of plain
backtests, pass by pass: inline, on local worker processes in guided batches or one pass per task, and
read back from the study store by a run that finds every pass recorded."""

from __future__ import annotations

import pandas as pd
import pytest

from backtests import Backtest
from backtests.optimize import optimize
from backtests.optimize.criteria import PASS_STATS
from datafeeds.sample import read_sample
from strategies import SmaCrossEA

SPACE = {"fast": [5, 10, 20, 40], "slow": [20, 50, 90]}  # 12 points, two refused (fast >= slow)
FIGURES = ["pass", "fast", "slow", "criterion", *PASS_STATS, "custom", "error"]


@pytest.fixture(scope="module")
def candles() -> pd.DataFrame:
    return read_sample().iloc[:2000]


@pytest.fixture(scope="module")
def inline(candles) -> pd.DataFrame:
    return optimize(candles, SmaCrossEA, SPACE, workers=0, seed=5)


def test_each_pass_is_the_plain_backtest_of_its_parameters(candles, inline):
    by_pass = inline.sort_values("pass").reset_index(drop=True)
    points = [(f, s) for f in SPACE["fast"] for s in SPACE["slow"]]
    assert list(zip(by_pass["fast"], by_pass["slow"], strict=True)) == points
    for row in by_pass.itertuples():
        if row.fast >= row.slow:
            assert "fast < slow" in row.error
            continue
        stats = Backtest(candles, SmaCrossEA, forward=None).run(fast=row.fast, slow=row.slow).stats
        assert row.criterion == stats["final_balance"]
        for name in PASS_STATS:
            expected = stats.get(name)  # None where the report has no such figure
            assert getattr(row, name) == pytest.approx(
                float("nan") if expected is None else expected, rel=0, abs=0, nan_ok=True
            ), name


@pytest.mark.parametrize("batch", [None, 1], ids=["guided-batches", "one-pass-per-task"])
def test_local_workers_and_the_store_give_the_inline_table(candles, inline, tmp_path, batch):
    db = str(tmp_path / "study.db")
    common = {"seed": 5, "store_path": db, "batch": batch}
    spread = optimize(candles, SmaCrossEA, SPACE, workers=2, **common)
    again = optimize(candles, SmaCrossEA, SPACE, workers=2, **common)  # every pass read from the store
    assert spread.attrs["ran"] == 12 and again.attrs["ran"] == 0
    assert spread.attrs["where"] == "local worker processes (2)"
    for table in (spread, again):
        pd.testing.assert_frame_equal(table[FIGURES], inline[FIGURES])
        assert table.attrs["robustness"] == inline.attrs["robustness"]
