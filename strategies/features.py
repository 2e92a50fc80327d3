"""Causal features and fractal labels for the fractal classifier, and a scaler fitted on training rows only.

Feature rows are built from bars up to and including the row's bar; labels need the bars *after* the
labelled one, so they are only ever computed where those bars exist (the newest bars stay unlabelled,
marked ``-1``). Together these keep look-ahead out of both the inputs and the training targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from datafeeds.clock import UTC, BrokerClock
from strategies.indicators import atr, cci, macd, rsi

# What the features are computed as, saved with every model: MetaTrader's indicators and server calendar.
# A model saved without it used Wilder's ATR and pandas' UTC weekday, and is not exported.
FEATURE_DEFINITIONS = "metatrader5"
UNDEFINED, BUY, SELL = 0, 1, 2
CLASSES = ("undefined", "buy", "sell")
UNKNOWN = -1
FEATURES = (
    "close-open",
    "high-open",
    "low-open",
    "tick_volume/1000",
    "hour",
    "weekday",
    "month",
    "rsi14",
    "cci14",
    "atr14",
    "macd_main",
    "macd_signal",
)


def fractal_labels(high: np.ndarray, low: np.ndarray, rule: str = "3bar") -> np.ndarray:
    """Class of each bar as the middle of a fractal: ``0`` undefined, ``1`` buy, ``2`` sell, ``-1`` unknown.

    Arrays are oldest first, so for a labelled bar ``j`` the newer neighbour is ``j+1`` and the older ``j-1``.

    ``rule="3bar"`` (the Fractal EA of "Neural networks made easy", with the buy inequalities the right way
    round): sell (upper fractal) when ``high[j+1] <= high[j]`` and ``high[j-1] < high[j]``; buy (lower
    fractal) when ``low[j+1] >= low[j]`` and ``low[j-1] > low[j]``. The first and last bar are unknown.

    ``rule="5bar"`` (MetaTrader's Fractals indicator): strictly beyond the two newer bars and at least equal
    to the two older ones; the first two and last two bars are unknown.

    A bar that is both an upper and a lower fractal is labelled undefined, as the later articles do.
    """
    high = np.asarray(high, dtype=np.float64)
    low = np.asarray(low, dtype=np.float64)
    n = len(high)
    labels = np.full(n, UNKNOWN, dtype=np.int64)
    if rule == "3bar":
        k = 1
        if n < 3:
            return labels
        mid = slice(1, n - 1)
        h, ho, hn = high[mid], high[:-2], high[2:]
        lo, lo_old, lo_new = low[mid], low[:-2], low[2:]
        upper = (hn <= h) & (ho < h)
        lower = (lo_new >= lo) & (lo_old > lo)
    elif rule == "5bar":
        k = 2
        if n < 5:
            return labels
        mid = slice(2, n - 2)
        h, lo = high[mid], low[mid]
        upper = (h > high[3 : n - 1]) & (h > high[4:]) & (h >= high[1 : n - 3]) & (h >= high[: n - 4])
        lower = (lo < low[3 : n - 1]) & (lo < low[4:]) & (lo <= low[1 : n - 3]) & (lo <= low[: n - 4])
    else:
        raise ValueError(f"unknown fractal rule {rule!r}: expected '3bar' or '5bar'")
    inner = np.full(n - 2 * k, UNDEFINED, dtype=np.int64)
    inner[upper & ~lower] = SELL
    inner[lower & ~upper] = BUY
    labels[k : n - k] = inner
    return labels


def server_calendar(time: pd.DatetimeIndex | np.ndarray, clock: BrokerClock = UTC) -> np.ndarray:
    """``(N, 3)`` hour (0-23), day of week (0 = Sunday) and month (1-12) of each bar's open time as the
    broker's server clock reads it: MQL5's ``TimeToStruct`` of the bar's ``time`` (``MqlDateTime.hour``,
    ``day_of_week``, ``mon``), which is what an EA in the terminal sees. ``time`` is UTC."""
    t = pd.DatetimeIndex(time)
    t = t.tz_localize("UTC") if t.tz is None else t.tz_convert("UTC")
    server = clock.to_broker_seconds(t.as_unit("s").asi8)
    local = pd.to_datetime(server, unit="s")
    weekday = (local.day_of_week.to_numpy() + 1) % 7  # pandas counts Monday = 0, MQL5 Sunday = 0
    return np.column_stack([local.hour.to_numpy(), weekday, local.month.to_numpy()]).astype(np.float64)


def bar_features(
    open_: np.ndarray,
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    tick_volume: np.ndarray,
    time: pd.DatetimeIndex | np.ndarray,
    clock: BrokerClock = UTC,
) -> np.ndarray:
    """The 12 per-bar inputs of the Fractal EA, shape ``(N, 12)``, in the order of ``FEATURES``.

    Calendar fields are the terminal's (``server_calendar``: the server clock ``clock``, Sunday = 0), the
    indicators MetaTrader's own (``strategies.indicators``: iRSI, iCCI on the typical price, iATR, iMACD), so
    an exported model computes the same inputs inside the terminal. Indicator warm-up bars are NaN;
    ``windows`` drops rows that touch them.
    """
    open_, high, low, close = (np.asarray(a, dtype=np.float64) for a in (open_, high, low, close))
    calendar = server_calendar(time, clock)
    main, signal = macd(close, 12, 26, 9)
    cols = [
        close - open_,
        high - open_,
        low - open_,
        np.asarray(tick_volume, dtype=np.float64) / 1000.0,
        calendar[:, 0],
        calendar[:, 1],
        calendar[:, 2],
        rsi(close, 14),
        cci(high, low, close, 14),
        atr(high, low, close, 14),
        main,
        signal,
    ]
    return np.column_stack(cols)


def windows(features: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Stack the last ``depth`` bars' features into one row per bar.

    ``features`` is ``(N, F)``; returns ``X (M, depth*F)`` and ``rows (M,)``, the bar index each row
    belongs to. Row ``r`` holds bars ``rows[r]-depth+1 .. rows[r]``, oldest first, flattened bar-major.
    Only rows whose whole window is finite are kept.
    """
    n, f = features.shape
    if n < depth:
        return np.empty((0, depth * f)), np.empty(0, dtype=np.int64)
    # (N-depth+1, F, depth) strided view -> (N-depth+1, depth, F) -> (N-depth+1, depth*F)
    view = np.lib.stride_tricks.sliding_window_view(features, depth, axis=0)
    x = view.transpose(0, 2, 1).reshape(n - depth + 1, depth * f)
    rows = np.arange(depth - 1, n)
    ok = np.isfinite(x).all(axis=1)
    return np.ascontiguousarray(x[ok]), rows[ok]


@dataclass(frozen=True)
class Scaler:
    """Per-column standardisation ``(x - mean) / std`` fitted on training rows only: the one standardiser
    of the project (features, forecast channels, the forecasting protocol).

    The articles feed raw values; standardising keeps tanh units out of saturation (tick volume and CCI are
    hundreds of times larger than candle bodies). Constant columns get ``std = 1`` so they pass through.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        if len(x) == 0:
            raise ValueError("cannot fit the feature scaler on zero training rows")
        mean = x.mean(axis=0)
        std = x.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        return cls(tuple(float(v) for v in mean), tuple(float(v) for v in std))

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (x - np.asarray(self.mean)) / np.asarray(self.std)

    def inverse(self, z: np.ndarray) -> np.ndarray:
        """Standardised values back to the original units (forecasts back to prices)."""
        return z * np.asarray(self.std) + np.asarray(self.mean)

    def to_dict(self) -> dict:
        return {"mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, d: dict) -> Scaler:
        return cls(tuple(float(v) for v in d["mean"]), tuple(float(v) for v in d["std"]))
