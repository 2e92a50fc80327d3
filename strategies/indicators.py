"""Technical indicators with MetaTrader 5's definitions, vectorised and causal.

Every function takes 1-D float arrays ordered oldest first and returns an array of the same length whose
value at bar ``i`` depends on bars ``0..i`` only (tests append future bars and check that past values do
not move). Bars before an indicator has enough history hold NaN, as MetaTrader leaves them undrawn.

Recursive smoothings (EMA, SMMA, Wilder) go through pandas' ``ewm(adjust=False)``, which runs the
recursion ``y[i] = a * x[i] + (1 - a) * y[i-1]`` in compiled code: the same numbers as a Python loop,
without its cost on million-bar series.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["atr", "cci", "ema", "lwma", "ma", "macd", "rsi", "sma", "smma", "true_range"]


def _check_period(period: int, name: str = "period") -> int:
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 1:
        raise ValueError(f"{name} must be a positive integer, got {period!r}")
    return int(period)


def _as_float(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _recursive(x: np.ndarray, alpha: float, seed_index: int, seed: float) -> np.ndarray:
    """``y[seed_index] = seed``, then ``y[i] = alpha * x[i] + (1 - alpha) * y[i-1]``; NaN before the seed."""
    n = len(x)
    out = np.full(n, np.nan)
    if seed_index >= n:
        return out
    tail = x[seed_index:].copy()
    tail[0] = seed
    out[seed_index:] = pd.Series(tail).ewm(alpha=alpha, adjust=False).mean().to_numpy()
    return out


def sma(x: np.ndarray, period: int) -> np.ndarray:
    """Simple moving average (MODE_SMA): mean of the last ``period`` values; first value at ``period-1``."""
    period = _check_period(period)
    x = _as_float(x)
    out = np.full(len(x), np.nan)
    if len(x) >= period:
        c = np.cumsum(np.concatenate(([0.0], x)))
        out[period - 1 :] = (c[period:] - c[:-period]) / period
    return out


def ema(x: np.ndarray, period: int) -> np.ndarray:
    """Exponential moving average (MODE_EMA), ``alpha = 2 / (period + 1)``.

    MetaTrader seeds the recursion with the first price (``y[0] = x[0]``) and draws from bar 0, so there is
    no NaN warm-up; early values carry the seed's weight, as in the terminal.
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
    return _recursive(x, 1.0 / period, period - 1, float(np.mean(x[:period])))


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
    """Relative Strength Index with Wilder's smoothing, as MetaTrader's RSI.mq5.

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
    gain = np.where(diff > 0, diff, 0.0)
    loss = np.where(diff < 0, -diff, 0.0)
    # Align to bars: index k of the smoothed series is bar k+1; the seed is at bar `period`.
    pos = _recursive(gain, 1.0 / period, period - 1, float(gain[:period].mean()))
    neg = _recursive(loss, 1.0 / period, period - 1, float(loss[:period].mean()))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 100.0 - 100.0 / (1.0 + pos / neg)
    value = np.where(neg == 0.0, np.where(pos == 0.0, 50.0, 100.0), value)
    out[period:] = value[period - 1 :]
    return out


def cci(high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14) -> np.ndarray:
    """Commodity Channel Index on the typical price with the mean absolute deviation, as CCI.mq5.

    ``(tp - SMA(tp)) / (0.015 * MAD)`` where MAD is the mean of ``|tp[j] - SMA(tp)[i]|`` over the window;
    a window with zero deviation reads 0.
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
    out[period - 1 :] = np.where(mad == 0.0, 0.0, value)
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
    high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14, smoothing: str = "wilder"
) -> np.ndarray:
    """Average True Range.

    ``smoothing="wilder"`` (default, Wilder's definition): the first value at bar ``period`` is the mean of
    the true ranges of bars ``1..period`` (each with a previous close), then ``alpha = 1/period``.
    ``smoothing="sma"`` reproduces the terminal's ATR.mq5: a simple average of the last ``period`` ranges.
    """
    period = _check_period(period)
    tr = true_range(high, low, close)
    if smoothing == "sma":
        return sma(tr, period)
    if smoothing != "wilder":
        raise ValueError(f"unknown ATR smoothing {smoothing!r}: expected 'wilder' or 'sma'")
    n = len(tr)
    if n <= period:
        return np.full(n, np.nan)
    return _recursive(tr, 1.0 / period, period, float(tr[1 : period + 1].mean()))


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
