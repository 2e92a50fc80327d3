"""M1 bars that disagree with a symbol's bars in a multi-symbol run: the error names the symbol, the file
and the row, whichever symbol it is."""

from __future__ import annotations

import pytest

from backtests import Backtest
from backtests.paths import ModelDataError
from datafeeds.resample import resample
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor


class _Both(ExpertAdvisor):
    symbols = ("EURUSD", "GBPUSD")

    def on_bar(self):
        pass


def _market():
    m1 = {s: synthetic_candles(s, "M1", 60 * 48, seed=i + 3) for i, s in enumerate(_Both.symbols)}
    return {s: resample(m, "H1") for s, m in m1.items()}, m1


def test_a_minute_beyond_its_bars_high_names_the_symbol_and_the_row():
    frames, m1 = _market()
    spiked = m1["GBPUSD"].copy()
    spiked.iloc[130, spiked.columns.get_loc("high")] = 2.0  # row 131, in the third hour
    spiked.attrs = dict(m1["GBPUSD"].attrs)
    m1["GBPUSD"] = spiked
    with pytest.raises(ModelDataError, match=r"row 131 \(.*\): GBPUSD high 2\.00000 lies above the high"):
        Backtest(frames, _Both, model="ohlc1m", m1=m1)


def test_minutes_of_another_market_name_the_symbol_the_row_and_the_bar():
    frames, m1 = _market()
    m1["EURUSD"] = synthetic_candles("EURUSD", "M1", 60 * 48, seed=99, price=1.3)  # another market's
    with pytest.raises(ModelDataError, match=r"row 1 \(.*\): the M1 bars do not fit the EURUSD candles: the "
                       r"EURUSD bar .* opens at"):  # fmt: skip
        Backtest(frames, _Both, model="ohlc1m", m1=m1)
