"""The open-prices screen of quiet bars on several symbols (``backtests.broker.calm``, the general form)
skips only checks that would do nothing.

Every run is made twice: screened, and with every bar of every symbol checked in full (``Calm.holds`` and
``Account.ruled_out`` always False). Both must give the same orders, deals, trades, rejections, balance and
equity, frame for frame, on EAs that reach stop-losses, take-profits, stops moved near the price and
stop-outs across symbols, with profits converted (USDJPY in yen) and swaps that bring the stop-out nearer.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from backtests import AccountConfig, Backtest
from backtests.broker.account import Account
from backtests.broker.calm import Calm
from datafeeds.symbols import BUILTIN
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor


class RandomStopsOnSymbols(ExpertAdvisor):
    """On each symbol by turns: opens, closes and re-stops positions at random, stops at random distances."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    seed: int = 0
    lots: float = 0.6

    def on_init(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def on_bar(self) -> None:
        for s in self.symbols:
            r = self.rng.random()
            if r < 0.02:
                self.close(symbol=s)
            elif r < 0.08:
                side = self.buy if self.rng.random() < 0.5 else self.sell
                sl = float(self.rng.integers(30, 900)) if self.rng.random() < 0.7 else None
                tp = float(self.rng.integers(20, 300)) if self.rng.random() < 0.7 else None
                side(self.lots, symbol=s, sl_points=sl, tp_points=tp)
            elif r < 0.16 and self.positions(symbol=s):
                pos = self.positions(symbol=s)[0]
                near = float(self.rng.integers(5, 200)) * 10.0 ** -BUILTIN[s].digits
                level = self.bid_of(s) - near if pos.side > 0 else self.ask_of(s) + near
                self.modify(pos.ticket, sl=level)


def _frames(n: int = 1500) -> dict[str, pd.DataFrame]:
    return {s: synthetic_candles(s, "H1", n, seed=i + 3) for i, s in enumerate(RandomStopsOnSymbols.symbols)}


def _figures(result) -> dict:
    return {
        "trades": result.trades,
        "deals": result.deals,
        "orders": result.orders,
        "rejected": pd.DataFrame(result.rejected),
        "balance": pd.DataFrame(np.asarray(result.balance)),
        "equity": pd.DataFrame(np.asarray(result.equity)),
    }


# Swaps that bring the stop-out nearer each night (each symbol's specification gives them)
SWAPS = {s: replace(BUILTIN[s], swap_long=-40.0, swap_short=-35.0) for s in RandomStopsOnSymbols.symbols}

ACCOUNTS = {
    "netting": AccountConfig(deposit=1_500.0, leverage=200.0),
    "hedging": AccountConfig(deposit=1_500.0, leverage=200.0, hedging=True),
    "swaps": AccountConfig(deposit=1_500.0, leverage=200.0, hedging=True),
    "no_stop_out": AccountConfig(deposit=1_500.0, leverage=200.0, stop_out_level=0.0),
}


@pytest.mark.parametrize("name", ACCOUNTS)
@pytest.mark.parametrize("seed", [1, 2])
def test_quiet_bars_of_several_symbols_skip_nothing_a_check_would_act_on(name, seed, monkeypatch):
    frames = _frames()
    specs = SWAPS if name == "swaps" else None
    bt = Backtest(frames, RandomStopsOnSymbols, account=ACCOUNTS[name], forward=None, specs=specs)
    screened = bt.run(seed=seed)
    monkeypatch.setattr(Calm, "holds", lambda self, t: False)
    monkeypatch.setattr(Account, "ruled_out", lambda self, t: False)  # every check of every symbol in full
    checked = bt.run(seed=seed)
    reasons = set(checked.trades["exit_reason"])
    assert {"sl", "tp"} <= reasons  # the runs reach stops, so the screen had something to miss
    assert set(checked.trades["symbol"]) == set(RandomStopsOnSymbols.symbols)
    for label, frame in _figures(screened).items():
        pd.testing.assert_frame_equal(frame, _figures(checked)[label], check_exact=True, obj=label)


class _Heavy(ExpertAdvisor):
    """Holds a lot of each symbol, reopened whenever closed, with far stops, on a deposit that barely
    carries them: the stop-out comes bar after bar, with the stops in the screen's bounds."""

    symbols = ("EURUSD", "GBPUSD", "USDJPY")
    side = 1

    def on_bar(self):
        for s in self.symbols:
            if not self.position_of(s):
                (self.buy if self.side > 0 else self.sell)(1.0, symbol=s, sl_points=2500, tp_points=2500)


@pytest.mark.parametrize("side", [1, -1])
def test_screened_stop_outs_across_symbols_equal_every_bar_checked(side, monkeypatch):
    frames = _frames(2000)
    bt = Backtest(frames, _Heavy, account=AccountConfig(deposit=4_500.0), forward=None)
    screened = bt.run(side=side)
    monkeypatch.setattr(Calm, "holds", lambda self, t: False)
    monkeypatch.setattr(Account, "ruled_out", lambda self, t: False)
    checked = bt.run(side=side)
    assert {"stop out", "sl", "tp"} <= set(checked.trades["exit_reason"])
    for label, frame in _figures(screened).items():
        pd.testing.assert_frame_equal(frame, _figures(checked)[label], check_exact=True, obj=label)
