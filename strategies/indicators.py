"""Technical indicators as MetaTrader 5 computes them, vectorised and causal.

Every function takes 1-D float arrays ordered oldest first and returns arrays of the same length whose value
at bar ``i`` depends on bars ``0..i`` only (tests append future bars and check that past values do not move).
Bars before an indicator's first drawn value hold NaN, as the terminal leaves them undrawn. A NaN price makes
a windowed indicator NaN in the windows that hold it and a recursive one (EMA, SMMA, RSI, ADX) NaN from it on,
as the recursion's own arithmetic would.

The definitions, start-up included, are those of the terminal's indicators (the MetaTrader 5 help pages under
https://www.metatrader5.com/en/terminal/help/indicators and the MetaQuotes sources of ``MovingAverages.mqh``,
``RSI.mq5``, ``ATR.mq5``, ``BB.mq5``, ``Stochastic.mq5``, ``ADX.mq5``, ``WPR.mq5``, ``OBV.mq5``): an EMA is
seeded with the first price and drawn from bar 0; SMMA and RSI seed their recursion with a simple average;
ATR is the simple average of the true ranges of bars 1..period, first drawn at bar ``period``.

Sums of prices are exact: a simple average of prices quoted on a decimal grid (``digits`` decimals) is taken
from integer sums, so two averages that are equal as numbers compare equal (a float running sum makes an
SMA difference of 1e-13 where the exact value is 0, and a crossover one bar early). Recursive smoothings go
through pandas' ``ewm(adjust=False)``, the recursion ``y[i] = a·x[i] + (1 − a)·y[i−1]`` in compiled code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "adx",
    "atr",
    "bands",
    "cci",
    "ema",
    "lwma",
    "ma",
    "macd",
    "momentum",
    "obv",
    "rsi",
    "sma",
    "smma",
    "stochastic",
    "true_range",
    "wpr",
]

_MAX_DIGITS = 8  # finest decimal grid tried for exact sums (crypto quotes go to 8 decimals)
# iCCI's deviation counts as zero below this share of the price level: float rounding of equal typical prices
# is ~1e-16 of it, one point of the finest quote (8 digits on a price near 1) 1e-8.
FLAT_CCI = 1e-12


def _check_period(period: int, name: str = "period") -> int:
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 1:
        raise ValueError(f"{name} must be a positive integer, got {period!r}")
    return int(period)


def _as_float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _recursive(x: np.ndarray, alpha: float, seed_index: int, seed: float) -> np.ndarray:
    """``y[seed_index] = seed``, then ``y[i] = alpha * x[i] + (1 - alpha) * y[i-1]``; NaN before the seed,
    and from the first NaN on (the recursion's own arithmetic; pandas' ewm would skip it and carry on)."""
    n = len(x)
    out = np.full(n, np.nan)
    if seed_index >= n:
        return out
    tail = x[seed_index:].copy()
    tail[0] = seed
    out[seed_index:] = pd.Series(tail).ewm(alpha=alpha, adjust=False).mean().to_numpy()
    missing = np.isnan(tail)
    if missing.any():
        out[seed_index + int(np.argmax(missing)) :] = np.nan
    return out


def _grid(x: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``(integers, 10**d)`` with ``x == integers / 10**d`` for the coarsest grid ``d <= 8`` that holds every
    value of ``x`` (prices quoted to ``digits`` decimals), or None (NaN, or values off every grid).

    A value is on a grid when it is a whole number of steps up to float rounding: within 1e-6 of a step and
    within 1e-9 of its own size, so values far below one step (3e-7 on the grid of whole units) are not."""
    if not len(x) or not np.isfinite(x).all():
        return None
    for digits in range(_MAX_DIGITS + 1):
        scale = 10**digits
        scaled = x * scale
        whole = np.rint(scaled)
        if np.abs(whole).max() * len(x) >= 2.0**62:
            return None  # the integer sums could overflow
        off = np.abs(scaled - whole)
        if np.all((off <= 1e-6) & (off <= 1e-9 * np.abs(scaled))):
            return whole.astype(np.int64), scale
    return None


def _window_sums(x: np.ndarray, period: int) -> tuple[np.ndarray, float]:
    """Sums of every ``period`` consecutive values and the unit they count in: exact integers on a price
    grid; otherwise each window summed on its own (no running sum whose rounding drifts over history)."""
    grid = _grid(x)
    if grid is not None:
        whole, scale = grid
        c = np.concatenate(([0], np.cumsum(whole)))
        return (c[period:] - c[:-period]).astype(np.float64), float(scale)
    return np.lib.stride_tricks.sliding_window_view(x, period).sum(axis=1), 1.0


def sma(x: np.ndarray, period: int) -> np.ndarray:
    """Simple moving average (MODE_SMA): mean of the last ``period`` values; first value at ``period-1``.

    On a price grid the mean is one correctly rounded division of an exact integer sum, so equal averages
    of different periods are equal floats."""
    period = _check_period(period)
    x = _as_float(x)
    out = np.full(len(x), np.nan)
    if len(x) >= period:
        sums, scale = _window_sums(x, period)
        out[period - 1 :] = sums / (period * scale)
    return out


def ema(x: np.ndarray, period: int) -> np.ndarray:
    """Exponential moving average (MODE_EMA), ``alpha = 2 / (period + 1)``.

    MetaTrader seeds the recursion with the first price (``y[0] = x[0]``, ``ExponentialMAOnBuffer``) and
    fills the buffer from bar 0, so there is no NaN warm-up; early values carry the seed's weight.
    """
    period = _check_period(period)
    x = _as_float(x)
    if len(x) == 0:
        return x.copy()
    return _recursive(x, 2.0 / (period + 1.0), 0, x[0])


def smma(x: np.ndarray, period: int) -> np.ndarray:
    """Smoothed moving average (MODE_SMMA): seeded with the SMA at ``period-1``, then ``alpha = 1/period``."""
    period = _check_period(period)
    x = _as_float(x)
    if len(x) < period:
        return np.full(len(x), np.nan)
    return _recursive(x, 1.0 / period, period - 1, float(sma(x[:period], period)[-1]))


def lwma(x: np.ndarray, period: int) -> np.ndarray:
    """Linear weighted moving average (MODE_LWMA): weights 1..period, the newest bar weighing most."""
    period = _check_period(period)
    x = _as_float(x)
    out = np.full(len(x), np.nan)
    if len(x) >= period:
        weights = np.arange(1, period + 1, dtype=np.float64)
        # np.convolve flips the kernel, so reverse the weights to give the newest value weight `period`.
        out[period - 1 :] = np.convolve(x, weights[::-1], mode="valid") / weights.sum()
    return out


_MA = {"sma": sma, "ema": ema, "smma": smma, "lwma": lwma}


def ma(x: np.ndarray, period: int, method: str = "sma") -> np.ndarray:
    """MetaTrader's iMA by method name: ``sma``, ``ema``, ``smma`` or ``lwma``."""
    try:
        fn = _MA[method.lower()]
    except KeyError:
        raise ValueError(
            f"unknown moving-average method {method!r}: expected one of {', '.join(_MA)}"
        ) from None
    return fn(x, period)


def rsi(close: np.ndarray, period: int = 14) -> np.ndarray:
    """Relative Strength Index with Wilder's smoothing, as MetaTrader's iRSI (RSI.mq5).

    The first value sits at bar ``period``: average gain and loss over the first ``period`` price changes,
    then each is smoothed with ``alpha = 1/period``. A window with no losses reads 100 (50 when flat).
    """
    period = _check_period(period)
    close = _as_float(close)
    n = len(close)
    out = np.full(n, np.nan)
    if n <= period:
        return out
    diff = np.diff(close)  # diff[k] is the change into bar k+1
    gain = np.maximum(diff, 0.0)  # NaN stays NaN (np.where(diff > 0, ...) made it a flat bar)
    loss = np.maximum(-diff, 0.0)
    # Align to bars: index k of the smoothed series is bar k+1; the seed is at bar `period`.
    pos = _recursive(gain, 1.0 / period, period - 1, float(gain[:period].sum() / period))
    neg = _recursive(loss, 1.0 / period, period - 1, float(loss[:period].sum() / period))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 100.0 - 100.0 / (1.0 + pos / neg)
    value = np.where(neg == 0.0, np.where(pos == 0.0, 50.0, 100.0), value)
    out[period:] = value[period - 1 :]
    return out


def cci(high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14) -> np.ndarray:
    """Commodity Channel Index on the typical price with the mean absolute deviation, as iCCI (CCI.mq5).

    ``(tp - SMA(tp)) / (0.015 * MAD)`` where MAD is the mean of ``|tp[j] - SMA(tp)[i]|`` over the window;
    a window with zero deviation reads 0. Typical prices that are equal as numbers ((h + l + c) / 3 of bars of
    one shape) can differ by a float rounding, which makes a MAD of 1e-16 and a CCI of ±66.7 out of nothing,
    so a MAD below ``FLAT_CCI`` of the price level counts as zero (the exported graph does the same).
    """
    period = _check_period(period)
    tp = (_as_float(high) + _as_float(low) + _as_float(close)) / 3.0
    n = len(tp)
    out = np.full(n, np.nan)
    if n < period:
        return out
    mean = sma(tp, period)
    # (n - period + 1, period) rolling windows as a strided view: no copy of the series.
    windows = np.lib.stride_tricks.sliding_window_view(tp, period)
    centre = mean[period - 1 :]
    mad = np.abs(windows - centre[:, None]).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (tp[period - 1 :] - centre) / (0.015 * mad)
    out[period - 1 :] = np.where(mad <= FLAT_CCI * np.abs(centre), 0.0, value)
    return out


def true_range(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    """True range: ``max(high, prev close) - min(low, prev close)``; the first bar has only ``high - low``."""
    high, low, close = _as_float(high), _as_float(low), _as_float(close)
    tr = high - low
    if len(tr) > 1:
        prev = close[:-1]
        tr[1:] = np.maximum(high[1:], prev) - np.minimum(low[1:], prev)
    return tr


def atr(
    high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14, smoothing: str = "sma"
) -> np.ndarray:
    """Average True Range as MetaTrader's iATR (ATR.mq5): the simple average of the last ``period`` true
    ranges, each with a previous close, so the first value is at bar ``period`` (bars ``1..period``).

    ``smoothing="wilder"`` gives Wilder's own definition instead (the same first value, then smoothed with
    ``alpha = 1/period``), which is not the terminal's.
    """
    period = _check_period(period)
    tr = true_range(high, low, close)
    n = len(tr)
    out = np.full(n, np.nan)
    if smoothing not in ("sma", "wilder"):
        raise ValueError(f"unknown ATR smoothing {smoothing!r}: expected 'sma' or 'wilder'")
    if n <= period:
        return out
    if smoothing == "wilder":
        return _recursive(tr, 1.0 / period, period, float(sma(tr[1 : period + 1], period)[-1]))
    out[period:] = sma(tr[1:], period)[period - 1 :]
    return out


def macd(close: np.ndarray, fast: int = 12, slow: int = 26, signal: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """MACD as MetaTrader's iMACD: main = EMA(fast) - EMA(slow) of close, signal = **SMA**(main, signal).

    The main line is drawn from bar ``slow-1`` (earlier bars are NaN, as in MACD.mq5) and the signal line
    averages the drawn main values, so its first value is at bar ``slow + signal - 2``.
    """
    fast, slow, signal = (
        _check_period(fast, "fast"),
        _check_period(slow, "slow"),
        _check_period(signal, "signal"),
    )
    if fast >= slow:
        raise ValueError(f"MACD fast period ({fast}) must be shorter than the slow period ({slow})")
    close = _as_float(close)
    main = ema(close, fast) - ema(close, slow)
    main[: slow - 1] = np.nan
    sig = np.full(len(close), np.nan)
    if len(close) >= slow - 1:
        sig[slow - 1 :] = sma(main[slow - 1 :], signal)
    return main, sig


def bands(x: np.ndarray, period: int = 20, deviation: float = 2.0) -> tuple[np.ndarray, ...]:
    """Bollinger Bands as iBands (BB.mq5): ``(middle, upper, lower)``; middle = SMA, the bands ±
    ``deviation`` population standard deviations of the window around it. Drawn from bar ``period``
    (BB.mq5's standard deviation is 0 before it)."""
    period = _check_period(period)
    x = _as_float(x)
    n = len(x)
    middle, upper, lower = (np.full(n, np.nan) for _ in range(3))
    if n <= period:
        return middle, upper, lower
    mean = sma(x, period)
    windows = np.lib.stride_tricks.sliding_window_view(x, period)[1:]  # windows ending at bars period..
    centre = mean[period:]
    std = np.sqrt(((windows - centre[:, None]) ** 2).sum(axis=1) / period)
    middle[period:] = centre
    upper[period:] = centre + deviation * std
    lower[period:] = centre - deviation * std
    return middle, upper, lower


def stochastic(
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    k_period: int = 5,
    d_period: int = 3,
    slowing: int = 3,
    method: str = "sma",
    price_field: str = "lowhigh",
) -> tuple[np.ndarray, np.ndarray]:
    """Stochastic Oscillator as iStochastic (Stochastic.mq5): ``(main, signal)``.

    ``main = 100 · Σ(close − LL) / Σ(HH − LL)`` over the last ``slowing`` bars, LL/HH the lowest low and
    highest high of ``k_period`` bars (``price_field="closeclose"``: of the closes); a flat range reads 100.
    First value at bar ``k_period + slowing − 2``; ``signal`` is the ``method`` average of ``main`` over
    ``d_period`` bars."""
    k_period, d_period = _check_period(k_period, "k_period"), _check_period(d_period, "d_period")
    slowing = _check_period(slowing, "slowing")
    close = _as_float(close)
    if price_field not in ("lowhigh", "closeclose"):
        raise ValueError(
            f"unknown stochastic price_field {price_field!r}: expected 'lowhigh' or 'closeclose'"
        )
    hi, lo = (close, close) if price_field == "closeclose" else (_as_float(high), _as_float(low))
    n = len(close)
    main, sig = np.full(n, np.nan), np.full(n, np.nan)
    start = k_period + slowing - 2
    if n <= start:
        return main, sig
    hh = np.lib.stride_tricks.sliding_window_view(hi, k_period).max(axis=1)  # bars k-1..
    ll = np.lib.stride_tricks.sliding_window_view(lo, k_period).min(axis=1)
    num = np.lib.stride_tricks.sliding_window_view(close[k_period - 1 :] - ll, slowing).sum(axis=1)
    den = np.lib.stride_tricks.sliding_window_view(hh - ll, slowing).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        main[start:] = np.where(den == 0.0, 100.0, num / den * 100.0)
    sig[start:] = ma(main[start:], d_period, method)
    return main, sig


def momentum(x: np.ndarray, period: int = 14) -> np.ndarray:
    """Momentum as iMomentum (Momentum.mq5): ``x[i] · 100 / x[i − period]``, first value at bar ``period``."""
    period = _check_period(period)
    x = _as_float(x)
    out = np.full(len(x), np.nan)
    if len(x) > period:
        with np.errstate(divide="ignore", invalid="ignore"):
            out[period:] = x[period:] * 100.0 / x[:-period]
    return out


def adx(
    high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Average Directional Movement Index as iADX (ADX.mq5): ``(adx, plus_di, minus_di)``.

    Per bar from bar 1: +DM = high − previous high, −DM = previous low − low, each floored at 0, and only the
    larger kept (both 0 on a tie); each divided by the bar's true range (×100). +DI/−DI are their EMAs
    (``alpha = 2/(period+1)``, seeded with 0 at bar 0), ADX the EMA of ``100·|+DI − −DI| / (+DI + −DI)``.
    The terminal draws ±DI from bar ``period`` and ADX from bar ``2·period``."""
    period = _check_period(period)
    high, low, close = _as_float(high), _as_float(low), _as_float(close)
    n = len(close)
    out = tuple(np.full(n, np.nan) for _ in range(3))
    if n <= period:
        return out
    up = np.maximum(np.diff(high), 0.0)
    down = np.maximum(-np.diff(low), 0.0)
    plus_dm = np.where(up > down, up, 0.0)
    minus_dm = np.where(down > up, down, 0.0)
    prev = close[:-1]
    tr = np.maximum(np.maximum(np.abs(high[1:] - low[1:]), np.abs(high[1:] - prev)), np.abs(low[1:] - prev))
    with np.errstate(divide="ignore", invalid="ignore"):
        pd_ = np.concatenate(([0.0], np.where(tr != 0.0, 100.0 * plus_dm / tr, 0.0)))
        nd_ = np.concatenate(([0.0], np.where(tr != 0.0, 100.0 * minus_dm / tr, 0.0)))
    alpha = 2.0 / (period + 1.0)
    pdi, ndi = _recursive(pd_, alpha, 0, 0.0), _recursive(nd_, alpha, 0, 0.0)
    total = pdi + ndi
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = np.where(total != 0.0, 100.0 * np.abs((pdi - ndi) / total), 0.0)
    dx[0] = 0.0
    main = _recursive(dx, alpha, 0, 0.0)
    out[0][2 * period :] = main[2 * period :]
    out[1][period:], out[2][period:] = pdi[period:], ndi[period:]
    return out


def wpr(high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14) -> np.ndarray:
    """Williams' Percent Range as iWPR (WPR.mq5): ``−100 · (HH − close) / (HH − LL)`` over ``period`` bars,
    first value at bar ``period − 1``; a flat window repeats the previous value (0 for the first one, the
    terminal's empty buffer)."""
    period = _check_period(period)
    high, low, close = _as_float(high), _as_float(low), _as_float(close)
    n = len(close)
    out = np.full(n, np.nan)
    if n < period:
        return out
    hh = np.lib.stride_tricks.sliding_window_view(high, period).max(axis=1)
    ll = np.lib.stride_tricks.sliding_window_view(low, period).min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(hh != ll, -(hh - close[period - 1 :]) * 100.0 / (hh - ll), np.nan)
    if np.isnan(value[0]):
        value[0] = 0.0
    out[period - 1 :] = pd.Series(value).ffill().to_numpy()
    return out


def obv(close: np.ndarray, volume: np.ndarray) -> np.ndarray:
    """On Balance Volume as iOBV (OBV.mq5): starts at bar 0's volume, then adds the volume of a bar that
    closed higher than the one before and subtracts that of one that closed lower."""
    close, volume = _as_float(close), _as_float(volume)
    if len(close) == 0:
        return close.copy()
    sign = np.concatenate(([1.0], np.sign(np.diff(close))))
    return np.cumsum(sign * volume)
