"""A run's tables and report are pinned, dtypes included: making the report cheaper must not move a figure.

Two symbols on a hedging account with swaps, an EA that places market orders with SL/TP, pending limit and
stop orders that expire, and closes: its trades, orders, deals, curves and equity path (every column's
dtype and its values' bytes) and report.json (less its creation time, timings and environment) are
compared with ``data/report_tables_pinned.json``. Regenerate it only for a deliberate change of a figure:
``python -m tests.test_backtests.test_report_tables_pinned``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.report import report_dict
from datafeeds.symbols import BUILTIN
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor

PINNED = Path(__file__).parent / "data" / "report_tables_pinned.json"
SYMBOLS = ("EURUSD", "GBPUSD")
TABLES = ("trades", "orders", "deals", "curves", "equity_path")


class PendingAndStops(ExpertAdvisor):
    """On each symbol at random: a market order with SL/TP, a limit or stop order an hour or a day away
    that may expire, or a close of everything on it."""

    symbols = SYMBOLS
    seed: int = 5

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        for s in self.symbols:
            r = self.rng.random()
            point = 10.0 ** -BUILTIN[s].digits
            gap = float(self.rng.integers(20, 400)) * point
            if r < 0.03:
                self.close(symbol=s)
            elif r < 0.09:
                side = self.buy if self.rng.random() < 0.5 else self.sell
                side(0.3, symbol=s, sl_points=float(self.rng.integers(50, 600)), tp_points=200.0)
            elif r < 0.15:
                when = "today" if self.rng.random() < 0.6 else None  # the server day, or good till cancelled
                if self.rng.random() < 0.5:
                    self.buy_limit(
                        0.2, self.ask_of(s) - gap, symbol=s, expiration=when, tp=self.ask_of(s) + gap
                    )
                else:
                    self.sell_stop(
                        0.2, self.bid_of(s) - gap, symbol=s, expiration=when, sl=self.bid_of(s) + gap
                    )


def _run():
    frames = {s: synthetic_candles(s, "H1", 1200, seed=i + 11) for i, s in enumerate(SYMBOLS)}
    specs = {s: replace(BUILTIN[s], swap_long=-6.5, swap_short=2.25) for s in SYMBOLS}
    account = AccountConfig(deposit=20_000.0, hedging=True, commission=3.0)
    return Backtest(frames, PendingAndStops, account=account, forward=None, specs=specs).run()


def _digest(values) -> str:
    return hashlib.sha256(values).hexdigest()


def _column(col: pd.Series) -> list[str]:
    """The column's dtype and a digest of its values: their bytes, or each value's repr for objects."""
    if isinstance(col.dtype, np.dtype) and col.dtype != object:
        raw = np.ascontiguousarray(col.to_numpy()).tobytes()
    elif isinstance(col.dtype, pd.DatetimeTZDtype):
        raw = col.array.asi8.tobytes()
    else:
        raw = "\x1f".join(repr(v) for v in col.tolist()).encode()
    return [str(col.dtype), _digest(raw)]


def _fingerprint(result) -> dict:
    out: dict = {}
    for name in TABLES:
        frame = getattr(result, name)
        frame = frame.reset_index() if name == "curves" else frame
        out[name] = {"rows": len(frame), "columns": {c: _column(frame[c]) for c in frame.columns}}
    report = report_dict(result, env={})
    for volatile in ("created", "timings", "environment"):
        report.pop(volatile)
    out["report_json"] = _digest(json.dumps(report, sort_keys=True, allow_nan=True).encode())
    out["pending_orders"] = int(result.orders["type"].astype(str).str.contains("limit|stop").sum())
    out["swap"] = round(float(result.trades["swap"].abs().sum()), 2)
    return out


@pytest.fixture(scope="module")
def got():
    return _fingerprint(_run())


def test_the_workload_has_pending_orders_swaps_and_both_symbols(got):
    want = json.loads(PINNED.read_text())
    assert got["pending_orders"] == want["pending_orders"] > 10
    assert got["swap"] == want["swap"] > 0
    assert got["trades"]["rows"] == want["trades"]["rows"] > 30


@pytest.mark.parametrize("table", TABLES)
def test_a_runs_tables_and_their_dtypes_are_unchanged(got, table):
    assert got[table] == json.loads(PINNED.read_text())[table]


def test_report_json_is_unchanged(got):
    assert got["report_json"] == json.loads(PINNED.read_text())["report_json"]


if __name__ == "__main__":
    PINNED.write_text(json.dumps(_fingerprint(_run()), indent=1) + "\n")
