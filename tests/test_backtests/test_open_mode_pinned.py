"""The "open prices only" results of the built-in EAs are pinned: broker changes must not move them.

``data/open_mode_pinned.json`` holds the trade lists and final balances produced before the broker gained
pending orders and request checks. Regenerate it only for a deliberate change of fill rules:
``python -m tests.test_backtests.test_open_mode_pinned``.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from backtests import AccountConfig, Backtest
from datafeeds import read_sample
from strategies import FractalEA
from strategies.sma import SmaCrossEA

PINNED = Path(__file__).parent / "data" / "open_mode_pinned.json"
COLUMNS = ["ticket", "type", "lots", "entry_bar", "exit_bar", "entry_price", "exit_price", "exit_reason"]
MONEY = ["commission", "swap", "profit", "net_profit"]


def _runs() -> dict:
    df = read_sample()
    tiny = {"hidden": "12", "epochs": 2, "backend": "numpy", "batch_size": 64, "validation": 0}
    return {
        "sma_plain": Backtest(df, SmaCrossEA, forward="1/3", account=AccountConfig(missing_spread=0)).run(),
        "sma_stops_commission": Backtest(
            df, SmaCrossEA, forward="1/3", account=AccountConfig(commission=3.5, missing_spread=0)
        ).run(sl_points=300, tp_points=600),
        "fractal_tiny": Backtest(read_sample(spread=10).iloc[:900], FractalEA, forward="1/3", seed=7).run(
            **tiny
        ),
    }


def _summary(result) -> dict:
    t = result.trades
    return {
        "rows": [
            [v.item() if hasattr(v, "item") else v for v in row]
            for row in t[COLUMNS + MONEY].itertuples(index=False)
        ],
        "final_balance": float(result.balance[-1]),
        "final_equity": float(result.equity["equity"].iloc[-1]),
        "rejected": len(result.rejected),
    }


@pytest.fixture(scope="module")
def runs():
    return {name: _summary(r) for name, r in _runs().items()}


@pytest.mark.parametrize("name", ["sma_plain", "sma_stops_commission", "fractal_tiny"])
def test_open_mode_results_are_unchanged(runs, name):
    want, got = json.loads(PINNED.read_text())[name], runs[name]
    assert len(got["rows"]) == len(want["rows"]) > 20
    for mine, theirs in zip(got["rows"], want["rows"], strict=True):
        assert mine[:2] == theirs[:2] and mine[3:5] == theirs[3:5] and mine[7] == theirs[7], (mine, theirs)
        np.testing.assert_allclose(
            [mine[2], mine[5], mine[6], *mine[8:]], [theirs[2], theirs[5], theirs[6], *theirs[8:]], atol=1e-9
        )
    assert got["final_balance"] == pytest.approx(want["final_balance"], abs=1e-6)
    assert got["final_equity"] == pytest.approx(want["final_equity"], abs=1e-6)
    assert got["rejected"] == want["rejected"]


if __name__ == "__main__":
    PINNED.write_text(json.dumps({k: _summary(r) for k, r in _runs().items()}, indent=0))
