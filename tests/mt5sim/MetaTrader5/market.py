"""Known, deterministic history for the simulated terminal.

Bars sit on the broker's grid, as in a real terminal: the broker runs at New York time + 7 hours (UTC+2 in
winter, UTC+3 while the US is on daylight time, the usual "New York close" convention), the week trades
Monday 00:00 to Friday 23:59 broker time, and bars are stamped in broker seconds. Each bar also records
its true UTC open time, computed here with the ``zoneinfo`` database independently of neuronet's
``BrokerClock``, so tests can check the client's conversion against it.

Prices are a seeded random walk per (symbol, timeframe): the same on every run and in every process.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

RATES_DTYPE = np.dtype(
    [
        ("time", "<i8"),
        ("open", "<f8"),
        ("high", "<f8"),
        ("low", "<f8"),
        ("close", "<f8"),
        ("tick_volume", "<u8"),
        ("spread", "<i4"),
        ("real_volume", "<u8"),
    ]
)
TICKS_DTYPE = np.dtype(
    [
        ("time", "<i8"),
        ("bid", "<f8"),
        ("ask", "<f8"),
        ("last", "<f8"),
        ("volume", "<u8"),
        ("time_msc", "<i8"),
        ("flags", "<u4"),
        ("volume_real", "<f8"),
    ]
)

HISTORY_START = "2023-01-02 00:00"  # broker time, a Monday
NOW = "2024-01-05 15:37:20"  # broker time of the simulated present (a Friday afternoon)


@dataclass(frozen=True)
class SymbolSpec:
    name: str
    digits: int
    base_price: float
    description: str


SYMBOLS = {
    "EURUSD": SymbolSpec("EURUSD", 5, 1.07, "Euro vs US Dollar"),
    "GBPUSD": SymbolSpec("GBPUSD", 5, 1.21, "Great Britain Pound vs US Dollar"),
    "USDJPY": SymbolSpec("USDJPY", 3, 131.0, "US Dollar vs Japanese Yen"),
}


def _seconds(text: str) -> int:
    return int(pd.Timestamp(text).value // 10**9)


def broker_to_utc(broker_seconds: np.ndarray) -> np.ndarray:
    """Broker seconds -> UTC seconds: broker wall time is New York wall time + 7 h."""
    ny_wall = pd.to_datetime(np.asarray(broker_seconds) - 7 * 3600, unit="s")
    utc = ny_wall.tz_localize("America/New_York").tz_convert("UTC")
    return utc.tz_localize(None).as_unit("s").asi8.astype(np.int64)


def now_broker() -> int:
    return _seconds(NOW)


def _grid(timeframe: int) -> np.ndarray:
    """Open times (broker seconds) of every bar from HISTORY_START up to the bar containing NOW."""
    start, now = _seconds(HISTORY_START), now_broker()
    if timeframe == 49153:  # MN1: first day of each month
        months = np.arange(np.datetime64(HISTORY_START[:7], "M"), np.datetime64(NOW[:7], "M") + 1)
        return months.astype("datetime64[s]").astype(np.int64)
    if timeframe == 32769:  # W1: weeks open on Sunday
        first_sunday = start - 86400  # HISTORY_START is a Monday
        return np.arange(first_sunday, now + 1, 7 * 86400, dtype=np.int64)
    if timeframe == 16408:
        step = 86400
    elif timeframe & 0x4000:
        step = (timeframe & 0x3FFF) * 3600
    else:
        step = timeframe * 60
    times = np.arange(start, now - now % step + 1, step, dtype=np.int64)
    weekday = (times // 86400 + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    return times[weekday < 5]


@lru_cache(maxsize=32)
def history(symbol: str, timeframe: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rates, utc_seconds)``: the symbol's full history on this timeframe, oldest first.

    The last bar is the one still forming at NOW (position 0 for ``copy_rates_from_pos``).
    """
    spec = SYMBOLS[symbol]
    times = _grid(timeframe)
    n = len(times)
    rng = np.random.default_rng(zlib.crc32(f"{symbol}/{timeframe}".encode()))
    step_minutes = max(1.0, float(np.median(np.diff(times))) / 60 if n > 1 else 1.0)
    sigma = 1e-4 * np.sqrt(step_minutes)
    close = spec.base_price * np.exp(np.cumsum(rng.normal(0.0, sigma, n)))
    close = np.round(close, spec.digits)
    open_ = np.concatenate([[np.round(spec.base_price, spec.digits)], close[:-1]])
    wick = np.round(np.abs(rng.normal(0.0, sigma, (2, n))) * spec.base_price, spec.digits)
    rates = np.zeros(n, dtype=RATES_DTYPE)
    rates["time"] = times
    rates["open"] = open_
    rates["close"] = close
    rates["high"] = np.round(np.maximum(open_, close) + wick[0], spec.digits)
    rates["low"] = np.round(np.minimum(open_, close) - wick[1], spec.digits)
    rates["tick_volume"] = rng.integers(1, 5000, n)
    rates["spread"] = rng.integers(0, 30, n)
    rates.setflags(write=False)
    utc = broker_to_utc(times)
    utc.setflags(write=False)
    return rates, utc


def ticks_between(symbol: str, broker_from: int, broker_to: int) -> np.ndarray:
    """Ticks in ``[broker_from, broker_to]`` (broker seconds): four per M1 bar (open, high/low, close)."""
    spec = SYMBOLS[symbol]
    rates, _ = history(symbol, 1)
    lo, hi = np.searchsorted(rates["time"], [broker_from - 59, broker_to], side="left")
    bars = rates[lo : hi + 1]
    ticks = np.zeros(4 * len(bars), dtype=TICKS_DTYPE)
    up = bars["close"] >= bars["open"]
    prices = np.stack(
        [bars["open"], np.where(up, bars["low"], bars["high"]), np.where(up, bars["high"], bars["low"]),
         bars["close"]],
        axis=1,
    ).ravel()
    offsets_ms = np.tile(np.array([0, 15_000, 30_000, 59_000]), len(bars))
    ticks["time_msc"] = np.repeat(bars["time"], 4) * 1000 + offsets_ms
    ticks["time"] = ticks["time_msc"] // 1000
    ticks["bid"] = prices
    ticks["ask"] = np.round(prices + np.repeat(bars["spread"], 4) * 10.0**-spec.digits, spec.digits)
    ticks["flags"] = 6
    keep = (ticks["time"] >= broker_from) & (ticks["time"] <= broker_to)
    return ticks[keep]
