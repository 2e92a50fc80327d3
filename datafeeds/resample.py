"""Build higher-timeframe bars from lower ones, the way the MetaTrader terminal does.

Conventions: a bar is labelled by its open time; open = first, high = max, low = min, close = last,
``tick_volume`` and ``real_volume`` summed. Bars are bucketed in the *broker* clock: intraday and D1 buckets
start at multiples of the timeframe from broker midnight, W1 on Sunday 00:00, MN1 on the 1st at 00:00. So a
frame in a UTC+2/us clock gives D1 bars that open at the broker's midnight, like the terminal's own; pass
``clock`` to bucket in another clock (the result then carries that clock).

Spread: the terminal stores, for each M1 bar, the lowest spread seen during that minute and builds its
higher timeframes from M1, so a higher-timeframe bar carries the minimum spread of its constituents. That is
the default (``spread="min"``); ``"max"``, ``"mean"`` (rounded to whole points) and ``"last"`` exist for users
whose cost model wants them.

The first and last bars of the result may be partial (the input starts or ends inside a bucket); they are
kept, as the terminal keeps its forming bar.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, make_frame, meta_of
from datafeeds.clock import BrokerClock
from datafeeds.errors import DataError
from datafeeds.timeframes import Timeframe

_SUNDAY_EPOCH = 3 * 86400  # 1970-01-04 00:00, a Sunday
_SPREAD_RULES = ("min", "max", "mean", "last")


def can_resample(source: Timeframe, target: Timeframe) -> bool:
    """True when every ``target`` bar is a whole number of ``source`` bars."""
    if target == source:
        return True
    if target is Timeframe.MN1:
        return source.seconds <= 86400
    if source in (Timeframe.W1, Timeframe.MN1):
        return False
    if target is Timeframe.W1:
        return True
    return target.seconds > source.seconds and target.seconds % source.seconds == 0


def resample(
    df: pd.DataFrame,
    timeframe: Timeframe | str | int,
    *,
    spread: str = "min",
    clock: BrokerClock | None = None,
) -> pd.DataFrame:
    """Aggregate a validated candle frame to a higher ``timeframe`` (see the module docstring)."""
    meta = meta_of(df)
    target = Timeframe.parse(timeframe)
    if spread not in _SPREAD_RULES:
        raise DataError(f"spread rule must be one of {', '.join(_SPREAD_RULES)}, not {spread!r}")
    if not can_resample(meta.timeframe, target):
        direction = "lower" if target.seconds < meta.timeframe.seconds else "non-multiple"
        raise DataError(
            f"cannot resample {meta.symbol} {meta.timeframe.name} to {target.name}: resampling goes from a "
            f"lower to a higher timeframe made of whole bars ({direction} target); "
            f"load {target.name} data directly"
        )
    clock = clock or meta.clock
    out_meta = CandleMeta(meta.symbol, target, meta.digits, clock, meta.source)
    if not len(df) or (target == meta.timeframe and clock == meta.clock):
        out = df.copy()
        out.attrs["candles"] = out_meta
        return out
    utc = df.index.as_unit("s").asi8
    if len(utc) > 1 and np.any(np.diff(utc) <= 0):
        raise DataError(
            f"{meta.symbol} {meta.timeframe.name}: bar times must increase; validate the frame first"
        )
    key = bucket_start(clock.to_broker_seconds(utc), target)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # first row of each bucket
    ends = np.r_[starts[1:], len(key)] - 1  # last row of each bucket
    col = {c: df[c].to_numpy() for c in df.columns}
    data = {
        "open": col["open"][starts],
        "high": np.maximum.reduceat(col["high"], starts),
        "low": np.minimum.reduceat(col["low"], starts),
        "close": col["close"][ends],
        "tick_volume": np.add.reduceat(col["tick_volume"], starts),
        "real_volume": np.add.reduceat(col["real_volume"], starts),
        "spread": _spread(col["spread"], starts, ends, spread),
    }
    index = pd.to_datetime(clock.to_utc_seconds(key[starts]), unit="s", utc=True)
    return make_frame(data, index, out_meta)


def bucket_start(broker_seconds: np.ndarray, timeframe: Timeframe) -> np.ndarray:
    """Open time (broker seconds) of the ``timeframe`` bar that contains each broker time."""
    t = np.asarray(broker_seconds, dtype=np.int64)
    if timeframe is Timeframe.MN1:
        return t.astype("datetime64[s]").astype("datetime64[M]").astype("datetime64[s]").astype(np.int64)
    if timeframe is Timeframe.W1:
        week = 7 * 86400
        return t - (t - _SUNDAY_EPOCH) % week
    return t - t % timeframe.seconds


def _spread(s: np.ndarray, starts: np.ndarray, ends: np.ndarray, rule: str) -> np.ndarray:
    if rule == "min":
        return np.minimum.reduceat(s, starts)
    if rule == "max":
        return np.maximum.reduceat(s, starts)
    if rule == "last":
        return s[ends]
    total = np.add.reduceat(s.astype(np.int64), starts)
    return np.rint(total / (ends - starts + 1)).astype(np.int32)
