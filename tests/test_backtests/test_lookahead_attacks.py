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


def move_over_the_pause(b) -> np.ndarray:
    """On the last bar before a pause in trading (a weekend), the move from its close to the close of the
    first bar after it, read with ``shift(-1)``; 0 on every other bar: a look-ahead on one H1 bar in 120."""
    time = pd.Series(np.asarray(b.time, dtype=np.int64))
    close = pd.Series(np.asarray(b.close, dtype=float))
    pause = time.shift(-1) - time > 2 * 3600 * 10**9
    return (close.shift(-1) - close).where(pause, 0.0).fillna(0.0).to_numpy()


class _TradesTheWeekend(ExpertAdvisor):
    def on_init(self) -> None:
        self.move = self.indicator(move_over_the_pause, "move_over_the_pause")

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        elif self.move[-1] > 0:
            self.buy(1.0)
        elif self.move[-1] < 0:
            self.sell(1.0)


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_a_look_ahead_written_only_before_a_weekend_is_refused(seed):
    """The move over the weekend written on Friday's last bar peeks at one bar in 120: the run of 24
    prefixes ended before the sample's first Friday and the three spread probes never ended on a Friday,
    so every seed of twelve ran the EA to its end (42 trades on the sample) with the next week's first
    close in hand on each Friday. Prefixes ending before the first pauses in trading meet it."""
    with pytest.raises(LookAheadError, match="move_over_the_pause"):
        Backtest(load_candles("sample"), _TradesTheWeekend, seed=seed).run()
