"""Seeded synthetic FX candles for tests and benchmarks at any scale.

The generator is vectorised end to end (1M bars in about a second) and deterministic: the same arguments
and seed give an identical frame. What makes the bars look like FX:
- trading hours: no bars from Friday 17:00 to Sunday 17:00 New York, nor on Christmas and New Year's Day;
  the week opens with a price gap;
- volatility clustering: the log-volatility follows a slow AR(1) (a stochastic-volatility model, the
  continuous-time cousin of GARCH), computed for all bars at once as an FFT convolution;
- intraday seasonality: volatility and tick volume follow the sessions (quiet Asian hours, the London open,
  the London/New York overlap at its peak, a lull at the New York close);
- spreads in points that widen around the daily rollover (17:00 New York).
Prices are whole points divided by ``10**digits``, so they print and re-read exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, make_frame
from datafeeds.clock import UTC, BrokerClock, utc_seconds
from datafeeds.errors import DataError
from datafeeds.resample import bucket_start
from datafeeds.timeframes import Timeframe
from datafeeds.validate import market_closed, new_york_seconds

_YEAR_SECONDS = 260 * 86400  # FX trades about 260 days a year
_HALF_LIFE_SECONDS = 3 * 86400  # volatility shocks fade over a few days
_VOL_OF_VOL = 0.45
# Relative volatility by UTC hour (knots at 00:00 .. 24:00): Asia, London open, overlap, New York close.
_SEASON_KNOTS = np.array(
    [0.7, 0.6, 0.6, 0.6, 0.6, 0.7, 0.8, 1.1, 1.4, 1.3, 1.2, 1.1, 1.3, 1.6, 1.7, 1.5, 1.2, 1.0, 0.8, 0.7,
     0.6, 0.5, 0.5, 0.6, 0.7]
)  # fmt: skip
MAX_BARS = 50_000_000


def symbol_defaults(symbol: str) -> tuple[int, float, int]:
    """(digits, starting price, typical spread in points) for a symbol name."""
    s = symbol.upper()
    if "JPY" in s:
        return 3, 110.0, 12
    if s.startswith("XAU"):
        return 2, 1800.0, 25
    if s.startswith("BTC"):
        return 2, 30000.0, 1500
    return 5, 1.1, 10


def synthetic_candles(
    symbol: str = "EURUSD",
    timeframe: Timeframe | str | int = "H1",
    bars: int | None = 10_000,
    *,
    seed: int = 0,
    start: str | pd.Timestamp = "2020-01-01",
    end: str | pd.Timestamp | None = None,
    clock: BrokerClock = UTC,
    annual_vol: float = 0.08,
    price: float | None = None,
    digits: int | None = None,
    spread: int | None = None,
    correlation: float = 0.0,
    common_seed: int | None = None,
) -> pd.DataFrame:
    """Generate ``bars`` bars from ``start`` (UTC), or every bar in ``[start, end)`` when ``end`` is given.

    ``annual_vol`` is the yearly volatility of log returns; ``spread`` the typical spread in points;
    ``price``/``digits`` default by symbol (EURUSD-like, JPY pairs 3 digits, gold 2). ``correlation``
    (0..1) mixes each bar's return shock with a shock common to every series of ``common_seed``, so
    symbols made with their own ``seed`` and one ``common_seed`` move together with that correlation.
    """
    tf = Timeframe.parse(timeframe)
    d_digits, d_price, d_spread = symbol_defaults(symbol)
    try:
        digits = d_digits if digits is None else int(digits)
        price = d_price if price is None else float(price)
        spread = d_spread if spread is None else int(spread)
    except (TypeError, ValueError, OverflowError):  # int(nan), int("x")
        raise DataError(
            f"synthetic digits and spread must be whole numbers and price a number, not {digits!r}, "
            f"{spread!r} and {price!r}"
        ) from None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DataError(f"synthetic seed must be a whole number >= 0, not {seed!r}")
    if bars is None and end is None:
        raise DataError("synthetic candles need bars= or end=")
    if bars is not None and not 0 <= int(bars) <= MAX_BARS:
        raise DataError(f"synthetic bars must be within 0..{MAX_BARS}, not {bars}")
    if not (0 < annual_vol < math.inf and 0 < price < math.inf and spread >= 0 and 0 <= digits <= 10):
        raise DataError("synthetic candles need annual_vol > 0, price > 0, spread >= 0 and 0 <= digits <= 10")
    utc = _open_times(tf, clock, utc_seconds(start, "start"), utc_seconds(end, "end"), bars)
    n = len(utc)
    rng = np.random.default_rng(seed)
    step = tf.seconds
    sigma = annual_vol * np.sqrt(step / _YEAR_SECONDS)
    hours = (utc % 86400) / 3600.0
    intraday = step < 86400
    season = np.interp(hours + step / 7200.0, np.arange(25), _SEASON_KNOTS) if intraday else np.ones(n)
    logvol = _ar1(rng, n, np.exp(-np.log(2) * step / _HALF_LIFE_SECONDS), _VOL_OF_VOL)
    vol = sigma * season * np.exp(logvol - _VOL_OF_VOL**2 / 2)  # per-bar volatility of log returns
    shock = rng.standard_normal(n)
    if correlation:
        if not (0.0 <= correlation <= 1.0) or common_seed is None:
            raise DataError(
                f"synthetic correlation must be within 0..1 with a common_seed, not {correlation!r}"
            )
        common = np.random.default_rng([int(common_seed), 1]).standard_normal(n)
        shock = np.sqrt(correlation) * common + np.sqrt(1.0 - correlation) * shock
    returns = vol * shock
    gap_bars = np.r_[0, np.diff(utc) // step - 1] if n else np.zeros(0, dtype=np.int64)
    gaps = np.where(
        gap_bars > 0, sigma * 0.5 * np.sqrt(np.maximum(gap_bars, 1)) * rng.standard_normal(n), 0.0
    )
    scale = 10.0**digits
    close_log = np.log(price) + np.cumsum(returns + gaps)
    close_pts = np.rint(np.exp(close_log) * scale)
    open_pts = np.empty(n)
    if n:
        open_pts[0] = np.rint(price * np.exp(gaps[0]) * scale)
        open_pts[1:] = np.rint(close_pts[:-1] * np.exp(gaps[1:]))
    wick = np.exp(close_log) * scale * vol * 0.6
    high_pts = np.maximum(open_pts, close_pts) + np.rint(wick * np.abs(rng.standard_normal(n)))
    low_pts = np.minimum(open_pts, close_pts) - np.rint(wick * np.abs(rng.standard_normal(n)))
    low_pts = np.maximum(low_pts, 1.0)
    ticks = 20.0 * (step / 60.0) * season**1.5 * np.exp(logvol) * rng.lognormal(0.0, 0.3, n)
    rollover = _rollover(utc, step) if intraday else np.zeros(n, dtype=bool)
    spreads = spread * rng.lognormal(0.0, 0.25, n) * np.where(rollover, 5.0, 1.0)
    data = {
        "open": open_pts / scale,
        "high": high_pts / scale,
        "low": low_pts / scale,
        "close": close_pts / scale,
        "tick_volume": np.maximum(np.rint(ticks), 1).astype(np.uint64),
        "spread": np.rint(spreads).astype(np.int32),
    }
    meta = CandleMeta(symbol.upper(), tf, digits, clock, "synthetic")
    return make_frame(data, pd.to_datetime(utc, unit="s", utc=True), meta)


def _open_times(
    tf: Timeframe, clock: BrokerClock, start: int, end: int | None, bars: int | None
) -> np.ndarray:
    """UTC open times of the bars a broker with ``clock`` would have from ``start``: trading hours only."""
    first = int(bucket_start(clock.to_broker_seconds(np.array([start])), tf)[0])
    if int(clock.to_utc_seconds(np.array([first]))[0]) < start:
        first = _next_open(first, tf)
    want = MAX_BARS if bars is None else int(bars)
    out: list[np.ndarray] = []
    count = 0
    if bars is not None:
        chunk = max(64, int(want * 1.5) + 64)
    else:  # enough grid points to reach ``end`` (months are at least 28 days)
        chunk = min(1_000_000, max(2, (end - start) // min(tf.seconds, 28 * 86400) + 2))
    cursor = first
    while count < want:
        broker = _grid(cursor, tf, chunk)
        cursor = _next_open(int(broker[-1]), tf)
        utc = clock.to_utc_seconds(broker)
        if end is not None:
            utc = utc[utc < end]
        if tf.seconds <= 86400:
            closed = market_closed(utc, True, 0) & market_closed(utc + tf.seconds - 60, True, 0)
            utc = utc[~closed]
        out.append(utc[: want - count])
        count += len(out[-1])
        if end is not None and (not len(utc) or int(clock.to_utc_seconds(np.array([cursor]))[0]) >= end):
            break
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _grid(first: int, tf: Timeframe, n: int) -> np.ndarray:
    if tf is Timeframe.MN1:
        month0 = np.datetime64(first, "s").astype("datetime64[M]")
        months = month0 + np.arange(n)
        return months.astype("datetime64[s]").astype(np.int64)
    return first + tf.seconds * np.arange(n, dtype=np.int64)


def _next_open(t: int, tf: Timeframe) -> int:
    return int(_grid(t, tf, 2)[1])


def _ar1(rng: np.random.Generator, n: int, phi: float, std: float) -> np.ndarray:
    """A stationary AR(1) path ``x[t] = phi x[t-1] + e[t]`` with standard deviation ``std``, via FFT."""
    if n == 0:
        return np.zeros(0)
    shocks = rng.standard_normal(n) * std * np.sqrt(1.0 - phi**2)
    x0 = rng.standard_normal() * std
    powers = phi ** np.arange(n)  # (N,) impulse response
    size = 1 << int(np.ceil(np.log2(2 * n)))
    conv = np.fft.irfft(np.fft.rfft(shocks, size) * np.fft.rfft(powers, size), size)[:n]
    return conv + x0 * phi * powers


def _rollover(utc: np.ndarray, step: int) -> np.ndarray:
    """Bars that overlap the hour after 17:00 New York, when liquidity providers roll positions."""
    start_min = (new_york_seconds(utc) % 86400) // 60
    end_min = start_min + step // 60
    return (start_min < 18 * 60) & (end_min > 17 * 60)
