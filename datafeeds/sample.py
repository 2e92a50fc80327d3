"""The embedded sample: 5,000 real EURUSD H1 bars (2017-04-19 09:00 .. 2018-02-07 15:00), offline.

The file is the test data of the ``backtesting`` package (a dependency), read from the installed package at
run time and never copied into this repository.

Time convention: UTC. The week's first bar is Sunday 21:00 in northern summer and 22:00 in winter, the
last Friday bar 20:00/21:00: both are 17:00 New York, the FX week's open and close, across the DST switch
of 2017-11-05. A fixed-offset broker clock would shift them by an hour at that date instead.

The file has ``Open, High, Low, Close, Volume``: Volume becomes ``tick_volume`` (it counts ticks, 1 to
32,318 per hour), ``real_volume`` is 0, and ``spread`` is 0 unless a fixed spread (points) is given,
because the file has none. Prices carry 5 digits. Higher timeframes are resampled from H1.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, in_window, make_frame, meta_of
from datafeeds.clock import UTC, BrokerClock
from datafeeds.errors import CandleDataError, DataError, UnknownNameError
from datafeeds.resample import resample
from datafeeds.timeframes import Timeframe

SYMBOL = "EURUSD"
DIGITS = 5


def sample_path() -> Path:
    """Where the installed ``backtesting`` package keeps the EURUSD H1 file."""
    try:
        path = Path(str(resources.files("backtesting").joinpath("test", "EURUSD.csv")))
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "the embedded sample needs the 'backtesting' package (pip install backtesting)"
        ) from None
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the backtesting package is installed without its test data")
    return path


class SampleSource:
    """Candle source for the embedded sample.

    ``spread``: a fixed spread in points for every bar. ``clock``: the broker clock to present the bars in;
    H1 bars stay whole hours in any whole-hour clock, so this is loss-free, and it decides where resampled
    D1/W1/MN1 bars start (``BrokerClock(2, "us")`` gives the D1 bars of a typical MT5 server).
    """

    def __init__(self, *, spread: int = 0, clock: BrokerClock | str = UTC) -> None:
        if int(spread) < 0:
            raise DataError(f"sample spread must be >= 0 points, not {spread}")
        self.spread = int(spread)
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        if self.clock.utc_offset_hours != int(self.clock.utc_offset_hours):
            raise DataError("the sample's H1 bars need a broker clock with a whole-hour offset")

    def load(self, symbol: str = SYMBOL, timeframe: Timeframe | str | int = "H1", start=None, end=None):
        tf = Timeframe.parse(timeframe)
        if symbol.upper() != SYMBOL:
            raise UnknownNameError(f"the embedded sample holds only {SYMBOL}, not {symbol!r}")
        df = read_sample(spread=self.spread)
        df.attrs["candles"] = replace(meta_of(df), clock=self.clock)
        return in_window(df if tf is Timeframe.H1 else resample(df, tf), start, end)


def read_sample(*, spread: int = 0) -> pd.DataFrame:
    """The sample as a canonical frame (not yet validated: ``load_candles`` validates every source)."""
    path = sample_path()
    raw = pd.read_csv(path, index_col=0)
    expected = ["Open", "High", "Low", "Close", "Volume"]
    if list(raw.columns) != expected:
        raise CandleDataError(str(path), f"columns {list(raw.columns)}, expected {expected}", line=1)
    index = pd.to_datetime(raw.index, format="%Y-%m-%d %H:%M:%S")
    data = {
        "open": raw["Open"],
        "high": raw["High"],
        "low": raw["Low"],
        "close": raw["Close"],
        "tick_volume": raw["Volume"],
        "spread": np.full(len(raw), spread, dtype=np.int32),
    }
    meta = CandleMeta(SYMBOL, Timeframe.H1, DIGITS, UTC, "sample")
    return make_frame(data, index, meta)
