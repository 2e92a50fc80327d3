"""Flat candles with a few bars replaced: the markets the hand-worked several-symbol attacks are built on."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datafeeds import make_frame
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from datafeeds.timeframes import Timeframe

T0 = pd.Timestamp("2024-01-02", tz="UTC")  # a Tuesday: no rollover inside the first hours
Bar = tuple[float, float, float, float]


def flat_frame(
    symbol: str, base: float, special: dict[int, Bar], n: int, timeframe: Timeframe
) -> pd.DataFrame:
    """``n`` bars of ``timeframe`` from ``T0`` at ``base`` (5 digits), bar i replaced by ``special[i]`` (o, h,
    l, c); minutes carry MetaTrader's real volume and spread columns (zero) as an M1 export does."""
    cols = {c: np.full(n, base) for c in ("open", "high", "low", "close")}
    for i, (o, h, lo, c) in special.items():
        cols["open"][i], cols["high"][i], cols["low"][i], cols["close"][i] = o, h, lo, c
    cols["tick_volume"] = np.ones(n, dtype=np.int64)
    if timeframe == Timeframe.M1:
        cols.update(real_volume=np.zeros(n, dtype=np.int64), spread=np.zeros(n, dtype=np.int32))
    index = pd.date_range(T0, periods=n, freq=pd.Timedelta(timeframe.seconds, "s"))
    return make_frame(cols, index, CandleMeta(symbol, timeframe, 5, UTC, "test"))
