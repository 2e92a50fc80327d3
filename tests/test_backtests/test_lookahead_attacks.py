"""Look-ahead that the indicator guard let through, found by attacking it: each test is named after the
defect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest, LookAheadError
from datafeeds import load_candles
from strategies.base import ExpertAdvisor


def fractal_up(b) -> np.ndarray:
    """1 where the high is the highest of the five bars centred on it: known only two bars later (a
    Bill Williams fractal written the usual way, with a centred window), 0 elsewhere."""
    h = pd.Series(np.asarray(b.high, dtype=float))
    return (h == h.rolling(5, center=True).max()).astype(float).to_numpy()


class _SellsTheTop(ExpertAdvisor):
    def on_init(self) -> None:
        self.top = self.indicator(fractal_up, "fractal_up")

    def on_bar(self) -> None:
        if self.top[-1] == 1.0 and not self.positions():
            self.sell(0.1)
        elif self.positions() and len(self.bars) % 3 == 0:
            self.close()


@pytest.mark.parametrize("seed", [0, 7])
def test_an_indicator_that_peeks_at_some_bars_only_is_refused_whatever_the_seed(seed):
    """The centred fractal peeks two bars ahead wherever a top is (about a bar in three): the guard
    recomputed it on three prefixes only, and a prefix whose last two bars hold no top agrees with the whole
    history, so six seeds in eight let the EA sell every top it could not have known (+1,556.90 USD on the
    sample). Consecutive prefixes, each one bar longer, find it whatever the seed."""
    with pytest.raises(LookAheadError, match="fractal_up"):
        Backtest(load_candles("sample"), _SellsTheTop, seed=seed).run()


def float32_by_batch(b) -> np.ndarray:
    """The close in float32, rounded as a GPU's product rounds a network's outputs: its tiling depends on
    the batch's rows, so the same bar's value for a history of 4,439 bars and for one of 5,000 is a few
    units in the last place apart (1.6e-6 relative, measured on an H200), and no later bar is read."""
    close = np.asarray(b.close, dtype=np.float32)
    return close * np.float32(1.0 + 2.4e-7 * (len(close) % 7))


class _ReadsANetwork(ExpertAdvisor):
    def on_init(self) -> None:
        self.p = self.indicator(float32_by_batch, "float32_by_batch")

    def on_bar(self) -> None:
        if self.p[-1] > 1.12 and not self.positions():
            self.buy(0.1)
        elif self.positions() and len(self.bars) % 5 == 0:
            self.close()


def centred_mean(b) -> np.ndarray:
    """The close less the mean of the whole history: a look-ahead that moves every value a little."""
    close = np.asarray(b.close, dtype=float)
    return close - close.mean()


class _ReadsTheMean(_ReadsANetwork):
    def on_init(self) -> None:
        self.p = self.indicator(centred_mean, "centred_mean")


@pytest.mark.parametrize("seed", [0, 3])
def test_float32_rounding_that_depends_on_the_batch_is_not_a_look_ahead(seed):
    """FractalEA on a GPU was refused ("'fractal_proba' looks ahead: its value on bar 4148 changes when bars
    after bar 4438 are added"): the spread-out prefixes compared at 1e-9 while the network's float32 outputs
    for another batch size round a few ulps apart. Every prefix compares at a float32's precision."""
    result = Backtest(load_candles("sample"), _ReadsANetwork, seed=seed).run()
    assert result.stats["total_trades"] > 0


@pytest.mark.parametrize("seed", [0, 3])
def test_a_look_ahead_that_moves_every_value_a_little_is_still_refused(seed):
    with pytest.raises(LookAheadError, match="centred_mean"):
        Backtest(load_candles("sample"), _ReadsTheMean, seed=seed).run()
