"""A grid optimisation of the SMA-cross EA agrees pass by pass with backtesting.py's ``Backtest.optimize``.

Fill rules are matched as in test_crosscheck.py: zero spread, the same per-lot commission, next-bar-open
fills; both sides use the same SMA function and crossing rule, so exact ties resolve alike. The one
convention that differs, how a run ends with a position open, is removed by flattening both sides at the
last bar's open; every pass then ends flat and the final balances must agree exactly.
"""

import multiprocessing.dummy
import warnings

import numpy as np
import pandas as pd
import pytest
from backtesting import Backtest as PeerBacktest
from backtesting import Strategy

from backtests import AccountConfig
from backtests.optimize import optimize
from datafeeds.sample import read_sample
from strategies import SmaCrossEA
from strategies.indicators import sma

COMMISSION = 3.5
FAST = [5, 10, 15, 20]
SLOW = [10, 20, 30, 40]


class FlatAtEnd(SmaCrossEA):
    """SmaCrossEA that closes everything at the open of bar ``flat_at`` and trades no more."""

    flat_at: int = 0

    def on_bar(self) -> None:
        if self.flat_at and len(self.bars) >= self.flat_at:
            self.close()
            return
        super().on_bar()


class PeerCross(Strategy):
    fast = 10
    slow = 20
    bars = 0  # bars in the data: the flattening order goes in on the one before the last

    def init(self):
        self.f = self.I(lambda c: sma(np.asarray(c), self.fast), self.data.Close)
        self.s = self.I(lambda c: sma(np.asarray(c), self.slow), self.data.Close)

    def next(self):
        if len(self.data) >= self.bars - 1:  # the order fills at the last bar's open
            self.position.close()
            return
        f, s = self.f, self.s
        if f[-1] > s[-1] and f[-2] <= s[-2]:  # SmaCrossEA's rule, ties included
            self.position.close()
            self.buy(size=100_000)
        elif f[-1] < s[-1] and f[-2] >= s[-2]:
            self.position.close()
            self.sell(size=100_000)


def _commission(size, price):
    return abs(size) / 100_000 * COMMISSION


def _peer(df: pd.DataFrame, maximize: str, monkeypatch) -> pd.Series:
    import backtesting

    monkeypatch.setattr(backtesting, "Pool", multiprocessing.dummy.Pool)  # threads: nothing to pickle
    data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    data.index = data.index.tz_localize(None)
    peer = PeerBacktest(data, PeerCross, cash=1e6, commission=_commission)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, heat = peer.optimize(
            fast=FAST,
            slow=SLOW,
            bars=[len(df)],
            constraint=lambda p: p.fast < p.slow,
            maximize=maximize,
            return_heatmap=True,
        )
    return heat.droplevel("bars")


def test_grid_matches_backtesting_py_pass_by_pass(monkeypatch):
    df = read_sample().iloc[:2500]
    table = optimize(
        df,
        FlatAtEnd,
        {"fast": FAST, "slow": SLOW},
        fixed={"flat_at": len(df) - 1},
        workers=0,
        account=AccountConfig(deposit=1e6, commission=COMMISSION, spread=0),
    )
    valid = [(f, s) for f in FAST for s in SLOW if f < s]
    refused = table[table["error"].notna()]
    assert len(table) == len(FAST) * len(SLOW) and len(refused) == len(FAST) * len(SLOW) - len(valid)
    assert refused["error"].str.contains("fast < slow").all()

    ours = table[table["error"].isna()].set_index(["fast", "slow"]).sort_index()
    balance = _peer(df, "Equity Final [$]", monkeypatch).sort_index()
    trades = _peer(df, "# Trades", monkeypatch).sort_index()
    assert list(ours.index) == list(balance.index) == valid
    np.testing.assert_allclose(ours["final_balance"], balance.to_numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours["total_trades"], trades.to_numpy())
    assert (ours["total_trades"] > 20).all()
    best = table.iloc[0]
    assert (best["fast"], best["slow"]) == balance.idxmax()
    assert best["criterion"] == pytest.approx(balance.max(), abs=1e-6)
