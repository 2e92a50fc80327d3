"""The Fractal EA's 12 features per bar as ONNX nodes over raw ``CopyRates`` rows (``strategies.features``).

The graph's input is ``rates (B, N, 7)`` float64: for the last N closed bars, oldest first, MQL5's
``MqlRates`` fields ``time`` (seconds of the server clock), ``open``, ``high``, ``low``, ``close``,
``tick_volume``, ``spread``. The features of the last ``depth`` bars come out as ``(B, depth·12)``, bar-major,
as ``features.windows`` flattens them.

Recursive indicators (the EMAs of iMACD, Wilder's averages of iRSI) see only the window: each is a fixed
linear map of the window's prices whose seed is the window's first bar, as the terminal seeds its own
indicator at the first bar it has. ``window_bars`` makes the window long enough that the seed's weight in
every value used is below ``SEED_WEIGHT`` (1e-9), so the values differ from the full-history ones by less than
1e-9 of the seed's distance from them: within 1e-7 relative even where the seed (an average over the
window's first bars) is a hundred times off the full-history value (``tests`` measure it). Non-recursive
ones (iCCI, iATR, the MACD signal's SMA) use exactly their own bars.
"""

from __future__ import annotations

import math

import numpy as np

from strategies.export.graph import Graph
from strategies.indicators import FLAT_CCI

COLUMNS = ("time", "open", "high", "low", "close", "tick_volume", "spread")
SEED_WEIGHT = 1e-9
RSI, CCI, ATR, FAST, SLOW, SIGNAL = 14, 14, 14, 12, 26, 9  # the periods of features.bar_features


def _settle(decay: float) -> int:
    """Bars after a recursion's seed until the seed weighs less than ``SEED_WEIGHT``."""
    return math.ceil(math.log(SEED_WEIGHT) / math.log(decay))


def window_bars(depth: int) -> int:
    """``N``: the bars the graph reads so that every feature of the last ``depth`` bars is settled."""
    rsi = RSI + _settle(1.0 - 1.0 / RSI)  # seeded at bar 14, then Wilder's alpha = 1/14
    macd = _settle(1.0 - 2.0 / (SLOW + 1.0)) + SIGNAL - 1  # the slower EMA, seeded at bar 0
    return depth + max(rsi, macd, CCI - 1, ATR)


def _ema_weights(n: int, period: int, rows: range) -> np.ndarray:
    """``(n, len(rows))``: EMA(period) at window bars ``rows`` as weights of the window's n prices, seeded
    with the first price (``indicators.ema``)."""
    a = 2.0 / (period + 1.0)
    w = np.zeros((n, len(rows)))
    for col, b in enumerate(rows):
        w[0, col] = (1.0 - a) ** b
        j = np.arange(1, b + 1)
        w[j, col] = a * (1.0 - a) ** (b - j)
    return w


def _wilder_weights(n_changes: int, period: int, rows: range) -> np.ndarray:
    """``(n_changes, len(rows))``: Wilder's average at window bars ``rows`` as weights of the window's price
    changes (change ``k`` is into bar ``k+1``), seeded at bar ``period`` with the mean of the first ``period``
    (``indicators.rsi``)."""
    a = 1.0 / period
    w = np.zeros((n_changes, len(rows)))
    for col, b in enumerate(rows):
        w[:period, col] = (1.0 - a) ** (b - period) / period
        k = np.arange(period, b)
        w[k, col] = a * (1.0 - a) ** (b - 1 - k)
    return w


def _windows(g: Graph, x: str, stop: int, count: int, width: int) -> str:
    """``(B, count, width)``: the ``width`` values ending at each of the ``count`` positions before ``stop``
    of ``x (B, L)``."""
    ends = np.arange(stop - count, stop)
    idx = ends[:, None] - np.arange(width - 1, -1, -1)[None, :]
    return g.op("Gather", x, g.const(idx, np.int64), axis=1)


def _calendar(g: Graph, t: str) -> tuple[str, str, str]:
    """Hour, day of week (0 = Sunday) and month of server-clock seconds ``t``: ``TimeToStruct`` (the month
    by H. Hinnant's days-to-civil algorithm), all in whole float64 numbers, so exact."""

    def floor_div(a: str, d: float) -> str:
        return g.op("Floor", g.div(a, g.const(d)))

    def minus_times(a: str, b: str, k: float) -> str:
        return g.sub(a, g.mul(b, g.const(k)))

    days = floor_div(t, 86400.0)
    hour = floor_div(minus_times(t, days, 86400.0), 3600.0)
    shifted = g.add(days, g.const(4.0))  # 1970-01-01 was a Thursday
    weekday = minus_times(shifted, floor_div(shifted, 7.0), 7.0)
    z = g.add(days, g.const(719468.0))
    era = floor_div(z, 146097.0)
    doe = minus_times(z, era, 146097.0)
    yoe = g.sub(g.add(g.sub(doe, floor_div(doe, 1460.0)), floor_div(doe, 36524.0)), floor_div(doe, 146096.0))
    yoe = floor_div(yoe, 365.0)
    doy = g.sub(doe, g.sub(g.add(g.mul(yoe, g.const(365.0)), floor_div(yoe, 4.0)), floor_div(yoe, 100.0)))
    mp = floor_div(g.add(g.mul(doy, g.const(5.0)), g.const(2.0)), 153.0)
    month = minus_times(g.add(mp, g.const(3.0)), floor_div(mp, 10.0), 12.0)
    return hour, weekday, month


def _rsi(g: Graph, close: str, n: int, depth: int) -> str:
    diff = g.sub(g.cols(close, 1, n), g.cols(close, 0, n - 1))  # (B, N-1)
    zero = g.const(0.0)
    gain, loss = g.op("Max", diff, zero), g.op("Max", g.op("Neg", diff), zero)
    w = g.const(_wilder_weights(n - 1, RSI, range(n - depth, n)))
    pos, neg = g.op("MatMul", gain, w), g.op("MatMul", loss, w)  # (B, depth)
    hundred = g.const(100.0)
    value = g.sub(hundred, g.div(hundred, g.add(g.const(1.0), g.div(pos, neg))))
    flat = g.op("Where", g.op("Equal", pos, zero), g.const(50.0), hundred)
    return g.op("Where", g.op("Equal", neg, zero), flat, value)


def _cci(g: Graph, high: str, low: str, close: str, n: int, depth: int) -> str:
    tp = g.div(g.add(g.add(high, low), close), g.const(3.0))  # (B, N)
    win = _windows(g, tp, n, depth, CCI)  # (B, depth, 14)
    mean = g.div(g.op("ReduceSum", win, g.ints(2), keepdims=0), g.const(float(CCI)))
    dev = g.op("Abs", g.sub(win, g.op("Unsqueeze", mean, g.ints(2))))
    mad = g.op("ReduceMean", dev, axes=[2], keepdims=0)
    value = g.div(g.sub(g.cols(tp, n - depth, n), mean), g.mul(g.const(0.015), mad))
    deviates = g.op("Greater", mad, g.mul(g.op("Abs", mean), g.const(FLAT_CCI)))  # indicators.cci's rule
    return g.op("Where", deviates, value, g.const(0.0))


def _atr(g: Graph, high: str, low: str, close: str, n: int, depth: int) -> str:
    prev = g.cols(close, 0, n - 1)
    tr = g.sub(g.op("Max", g.cols(high, 1, n), prev), g.op("Min", g.cols(low, 1, n), prev))  # bars 1..N-1
    win = _windows(g, tr, n - 1, depth, ATR)
    return g.div(g.op("ReduceSum", win, g.ints(2), keepdims=0), g.const(float(ATR)))


def _macd(g: Graph, close: str, n: int, depth: int) -> tuple[str, str]:
    rows = range(n - depth - SIGNAL + 1, n)
    w = _ema_weights(n, FAST, rows) - _ema_weights(n, SLOW, rows)
    main = g.op("MatMul", close, g.const(w))  # (B, depth + 8)
    avg = np.zeros((len(rows), depth))
    for col in range(depth):
        avg[col : col + SIGNAL, col] = 1.0
    signal = g.div(g.op("MatMul", main, g.const(avg)), g.const(float(SIGNAL)))
    return g.cols(main, SIGNAL - 1, len(rows)), signal


def fractal_features(g: Graph, rates: str, n: int, depth: int) -> str:
    """``rates (B, N, 7)`` -> ``(B, depth·12)`` float64, the inputs ``FractalEA`` feeds its network."""
    col = {name: g.op("Gather", rates, g.const(k, np.int64), axis=2) for k, name in enumerate(COLUMNS)}
    last = {name: g.cols(col[name], n - depth, n) for name in ("time", "open", "high", "low", "close")}
    volume = g.div(g.cols(col["tick_volume"], n - depth, n), g.const(1000.0))
    hour, weekday, month = _calendar(g, last["time"])
    main, signal = _macd(g, col["close"], n, depth)
    feats = [
        g.sub(last["close"], last["open"]),
        g.sub(last["high"], last["open"]),
        g.sub(last["low"], last["open"]),
        volume,
        hour,
        weekday,
        month,
        _rsi(g, col["close"], n, depth),
        _cci(g, col["high"], col["low"], col["close"], n, depth),
        _atr(g, col["high"], col["low"], col["close"], n, depth),
        main,
        signal,
    ]
    stacked = g.op("Concat", *(g.op("Unsqueeze", f, g.ints(2)) for f in feats), axis=2)  # (B, depth, 12)
    return g.op("Reshape", stacked, g.ints(0, depth * len(feats)))
