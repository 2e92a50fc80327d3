"""Look-ahead that the indicator guard let through, found by attacking it: each test is named after the
defect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest, LookAheadError
from datafeeds import load_candles
from datafeeds.synthetic import synthetic_candles
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


def next_minutes_variance(b) -> np.ndarray:
    """The variance of the next ten minutes' log returns (a label used as a feature by accident), 0 where
    they are not known: about 1e-9 on EURUSD minutes."""
    close = pd.Series(np.asarray(b.close, dtype=float))
    squared = np.log(close).diff() ** 2
    return squared.rolling(10).mean().shift(-10).fillna(0.0).to_numpy()


class _TradesTheVariance(ExpertAdvisor):
    def on_init(self) -> None:
        self.v = self.indicator(next_minutes_variance, "next_minutes_variance")

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        elif self.v[-1] > 1e-9:
            self.buy(1.0)


@pytest.mark.parametrize("seed", [0, 2])
def test_a_look_ahead_in_values_of_1e_minus_9_is_refused(seed):
    """The next ten minutes' variance is a look-ahead that changes every value it reaches by about its own
    size; the values are about 1e-9 and the check's absolute floor was 1e-8, so all of it passed, every
    seed (729 trades on 5,000 synthetic minutes). The floor is now in units of the column's own typical
    magnitude."""
    minutes = synthetic_candles("EURUSD", "M1", 5000, seed=1, annual_vol=0.03)
    with pytest.raises(LookAheadError, match="next_minutes_variance"):
        Backtest(minutes, _TradesTheVariance, seed=seed).run()


def float32_net_crossing_zero(b) -> np.ndarray:
    """An honest float32 network's output: 64 hidden units of order 1 whose weighted sum nearly cancels
    (an output crossing zero), summed in an order that depends on the batch's rows as a GPU's tiling does.
    No later bar is read; the same bar's output for two batch sizes is a few ulps *of the terms* apart."""
    close = np.asarray(b.close, dtype=np.float64)
    moves = np.r_[0.0, np.diff(np.log(close))] * 1e3
    rng = np.random.default_rng(0)
    weights = rng.normal(size=64).astype(np.float32)
    hidden = np.tanh(np.outer(moves, rng.normal(size=64)) + rng.normal(size=64)).astype(np.float32)
    terms = hidden * weights
    if len(close) % 2:
        return terms.sum(axis=1, dtype=np.float32)
    return terms[:, ::-1].cumsum(axis=1, dtype=np.float32)[:, -1]


class _ReadsANetCrossingZero(ExpertAdvisor):
    def on_init(self) -> None:
        self.p = self.indicator(float32_net_crossing_zero, "float32_net_crossing_zero")

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        elif self.p[-1] > 0:
            self.buy(0.1)


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_rounding_of_an_output_near_zero_is_not_a_look_ahead(seed):
    """Seed 0 was refused ("'float32_net_crossing_zero' looks ahead: its value on bar 1253 changes when
    bars after bar 4438 are added"): an output of 1e-4 made of terms of order 1 moves by their ulps (1e-7)
    for another batch, beyond 1e-5 relative of itself plus a 1e-8 floor."""
    result = Backtest(load_candles("sample"), _ReadsANetCrossingZero, seed=seed).run()
    assert result.stats["total_trades"] > 0


def move_before_a_volume_spike(b) -> np.ndarray:
    """Where the next bar's tick volume is five times the usual (news), the move to its close; 0 elsewhere:
    a look-ahead on about one bar in 75, at bars only the data picks."""
    volume = pd.Series(np.asarray(b.tick_volume, dtype=float))
    close = pd.Series(np.asarray(b.close, dtype=float))
    spike = volume.shift(-1) > 5 * volume.rolling(100, min_periods=1).median()
    return (close.shift(-1) - close).where(spike, 0.0).fillna(0.0).to_numpy()


class _TradesTheNews(ExpertAdvisor):
    def on_init(self) -> None:
        self.move = self.indicator(move_before_a_volume_spike, "move_before_a_volume_spike")

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        elif self.move[-1] > 0:
            self.buy(1.0)
        elif self.move[-1] < 0:
            self.sell(1.0)


@pytest.mark.xfail(
    strict=True,
    reason="a look-ahead at rare bars the data picks (one in 75) meets none of the check's ~30 prefixes",
)
@pytest.mark.parametrize("seed", [0, 3])
def test_a_look_ahead_at_bars_the_data_picks_is_refused(seed):
    """The next bar's move wherever its volume spikes: 66 trades, +22,009.00 USD on the sample at 1 lot,
    every seed of four, none refused. Prefixes end at 24 bars in a row early, before four pauses and at
    three spread bars; a look-ahead at one bar in 75 that the data places is met only by luck."""
    with pytest.raises(LookAheadError, match="move_before_a_volume_spike"):
        Backtest(load_candles("sample"), _TradesTheNews, seed=seed).run()


def interpolated_thin_bars(b) -> np.ndarray:
    """The close of a thinly traded bar (tick volume under 300, 385 night bars of the sample) taken as
    unreliable and interpolated between its neighbours, less the close: the next good close is read."""
    volume = np.asarray(b.tick_volume, dtype=float)
    close = pd.Series(np.asarray(b.close, dtype=float))
    return close.where(volume >= 300).interpolate().to_numpy() - close.to_numpy()


class _TradesTheInterpolation(_TradesTheNews):
    def on_init(self) -> None:
        self.move = self.indicator(interpolated_thin_bars, "interpolated_thin_bars")


@pytest.mark.parametrize("seed", [0, 3])
def test_a_fill_that_reads_the_next_good_value_is_refused(seed):
    """``interpolate()`` over a few masked bars is a future-dependent fill at bars the data picks; they
    come in nights of several, which the run of consecutive prefixes meets."""
    with pytest.raises(LookAheadError, match="interpolated_thin_bars"):
        Backtest(load_candles("sample"), _TradesTheInterpolation, seed=seed).run()
