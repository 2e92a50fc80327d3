"""Known, deterministic history for the simulated terminal.

Bars sit on the broker's grid, as in a real terminal: the broker runs at New York time + 7 hours (UTC+2 in
winter, UTC+3 while the US is on daylight time, the usual "New York close" convention), the week trades
Monday 00:00 to Friday 23:59 broker time, and bars are stamped in broker seconds. Each bar also records
its true UTC open time, computed here with the ``zoneinfo`` database independently of neuronet's
``BrokerClock``, so tests can check the client's conversion against it.

Prices are a seeded random walk per (symbol, timeframe): the same on every run and in every process. M1
is the exception: its bars (and so the ticks, four per M1 bar) make up the H1 bars exactly, as a real
terminal's do, so a backtest on H1 with the minutes or the ticks of the same terminal sees one market.

Time passing (live trading tests): ``set_now(broker_time)`` moves the simulated present, and from then on
the terminal serves a longer history (up to ``LIVE_END``, across the US daylight-saving change of
2024-03-10, when the broker's UTC offset goes from +2 to +3) cut at that moment: bars after it do not
exist yet, the bar containing it is still forming (position 0 of ``copy_rates_from_pos``; at its opening
second its open, high, low and close are all the open, then its close moves linearly towards its final
value), and ``symbol_info_tick`` quotes that forming close. ``advance(seconds)`` moves the present on;
``set_now(None)`` returns to the fixed present ``NOW``. A server started with ``MT5SIM_START`` (broker time)
and ``MT5SIM_SPEED`` (simulated seconds per real second) in its environment runs that clock by itself, for
a demonstration of ``neuronet live`` without a terminal.
"""

from __future__ import annotations

import os
import time
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
LIVE_END = "2024-04-26 00:00"  # broker time: the end of the longer history served once set_now() is used
_CLOCK: dict[str, float | None] = {"now": None, "speed": None, "since": None}  # now None = NOW


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


def _present() -> int | None:
    """The moving present in broker seconds (None: the fixed NOW); a running clock moves with real time."""
    now, speed = _CLOCK["now"], _CLOCK["speed"]
    if now is None or not speed:
        return None if now is None else int(now)
    return min(int(now + (time.monotonic() - _CLOCK["since"]) * speed), _seconds(LIVE_END) - 1)


def now_broker() -> int:
    now = _present()
    return _seconds(NOW) if now is None else now


def run_clock(start: str, speed: float) -> None:
    """Start the present at ``start`` (broker time) and let it run ``speed`` times faster than real time."""
    set_now(start)
    _CLOCK["speed"], _CLOCK["since"] = float(speed), time.monotonic()


def set_now(broker_time: int | str | None) -> None:
    """Move the simulated present (broker seconds or text such as "2024-03-08 10:00"); None = fixed NOW."""
    _CLOCK["speed"] = None  # a present set by hand stands still
    if broker_time is None:
        _CLOCK["now"] = None
        return
    seconds = _seconds(broker_time) if isinstance(broker_time, str) else int(broker_time)
    if not _seconds(HISTORY_START) < seconds < _seconds(LIVE_END):
        raise ValueError(f"the simulated present must lie between {HISTORY_START} and {LIVE_END}")
    _CLOCK["now"] = seconds


def advance(seconds: float) -> int:
    """Move the present on by ``seconds`` (after ``set_now``); returns the new present (broker seconds)."""
    if _CLOCK["now"] is None:
        raise RuntimeError("call set_now() before advance()")
    set_now(now_broker() + int(seconds))
    return now_broker()


def bar_seconds(timeframe: int) -> int | None:
    """The length of a bar of ``timeframe`` (MetaTrader's TIMEFRAME_* codes); None for MN1 (it varies)."""
    if timeframe == 49153:
        return None
    if timeframe == 32769:
        return 7 * 86400
    if timeframe == 16408:
        return 86400
    return (timeframe & 0x3FFF) * 3600 if timeframe & 0x4000 else timeframe * 60


def _grid(timeframe: int, end: str = NOW) -> np.ndarray:
    """Open times (broker seconds) of every bar from HISTORY_START up to the bar containing ``end``."""
    start, now = _seconds(HISTORY_START), _seconds(end)
    if timeframe == 49153:  # MN1: first day of each month
        months = np.arange(np.datetime64(HISTORY_START[:7], "M"), np.datetime64(end[:7], "M") + 1)
        return months.astype("datetime64[s]").astype(np.int64)
    if timeframe == 32769:  # W1: weeks open on Sunday
        first_sunday = start - 86400  # HISTORY_START is a Monday
        return np.arange(first_sunday, now + 1, 7 * 86400, dtype=np.int64)
    step = bar_seconds(timeframe)
    times = np.arange(start, now - now % step + 1, step, dtype=np.int64)
    weekday = (times // 86400 + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    return times[weekday < 5]


def history(symbol: str, timeframe: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rates, utc_seconds)``: the symbol's full history on this timeframe, oldest first.

    The last bar is the one still forming at the present (position 0 for ``copy_rates_from_pos``).
    """
    now = _present()
    if now is None:
        return _history(symbol, timeframe, NOW)
    rates, utc = _history(symbol, timeframe, LIVE_END)
    end = int(np.searchsorted(rates["time"], now, side="right"))
    if end == 0:
        return rates[:0], utc[:0]
    rates = rates[:end].copy()
    forming = rates[-1:].copy()
    length = int(rates["time"][1] - rates["time"][0]) if end > 1 else 60
    frac = min(1.0, (now - int(forming["time"][0])) / max(1, length))
    digits = SYMBOLS[symbol].digits
    o, c = float(forming["open"][0]), float(forming["close"][0])
    partial = round(o + frac * (c - o), digits)
    forming["close"] = partial
    forming["high"] = max(o, partial)
    forming["low"] = min(o, partial)
    rates[-1] = forming[0]
    rates.setflags(write=False)
    return rates, utc[:end]


@lru_cache(maxsize=32)
def _history(symbol: str, timeframe: int, end: str) -> tuple[np.ndarray, np.ndarray]:
    if timeframe == 1:
        return _minutes(symbol, end)
    spec = SYMBOLS[symbol]
    times = _grid(timeframe, end)
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


def _minutes(symbol: str, end: str) -> tuple[np.ndarray, np.ndarray]:
    """M1 bars that make up the H1 bars exactly: each hour's 60 minutes walk from the hour's open to its
    nearer extreme (minute 5 to 25), to the other one (minute 35 to 55) and to its close, with a little
    seeded noise kept inside the hour's low..high; every minute carries the hour's spread."""
    spec = SYMBOLS[symbol]
    hours, _ = _history(symbol, 16385, end)
    n = len(hours)
    rng = np.random.default_rng(zlib.crc32(f"{symbol}/1".encode()))
    o, c = hours["open"][:, None], hours["close"][:, None]
    hi, lo = hours["high"][:, None], hours["low"][:, None]
    up = c >= o  # a rising hour goes low first, as MetaTrader's OHLC path does
    e1, e2 = np.where(up, lo, hi), np.where(up, hi, lo)
    i1, i2 = rng.integers(5, 26, (n, 1)), rng.integers(35, 56, (n, 1))
    k = np.arange(61)[None, :]
    path = np.where(
        k <= i1,
        o + (e1 - o) * k / i1,
        np.where(k <= i2, e1 + (e2 - e1) * (k - i1) / (i2 - i1), e2 + (c - e2) * (k - i2) / (60 - i2)),
    )  # (n, 61): the hour's price at each minute's open, then its close
    path += rng.normal(0.0, 2.0 * 10.0**-spec.digits, path.shape)
    path = np.round(np.clip(path, lo, hi), spec.digits)
    rows = np.arange(n)
    path[:, 0], path[:, -1] = hours["open"], hours["close"]
    path[rows, i1[:, 0]], path[rows, i2[:, 0]] = e1[:, 0], e2[:, 0]
    first, last = path[:, :-1], path[:, 1:]
    wick = np.abs(rng.normal(0.0, 2.0, (2, n, 60))).round() * 10.0**-spec.digits
    high = np.round(np.minimum(np.maximum(first, last) + wick[0], hi), spec.digits)
    low = np.round(np.maximum(np.minimum(first, last) - wick[1], lo), spec.digits)
    rates = np.zeros(60 * n, dtype=RATES_DTYPE)
    rates["time"] = (hours["time"][:, None] + 60 * np.arange(60)).ravel()
    rates["open"], rates["close"] = first.ravel(), last.ravel()
    rates["high"], rates["low"] = high.ravel(), low.ravel()
    rates["tick_volume"] = rng.integers(1, 100, 60 * n)
    rates["spread"] = np.repeat(hours["spread"], 60)
    rates = rates[rates["time"] <= _seconds(end)]
    rates.setflags(write=False)
    utc = broker_to_utc(rates["time"])
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
        [
            bars["open"],
            np.where(up, bars["low"], bars["high"]),
            np.where(up, bars["high"], bars["low"]),
            bars["close"],
        ],
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


if os.environ.get("MT5SIM_START"):
    run_clock(os.environ["MT5SIM_START"], float(os.environ.get("MT5SIM_SPEED", "1")))
