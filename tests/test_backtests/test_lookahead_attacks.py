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
