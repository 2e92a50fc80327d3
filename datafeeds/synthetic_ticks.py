"""Seeded synthetic ticks that make up given M1 candles exactly (tests and benchmarks of the tick model).

Each minute gets at least four ticks (on average ``ticks_per_minute``, more in busy hours: the counts
follow the candles' tick volume): its first tick's bid is the minute's open, its last one's the close, two
ticks in between sit at the high and the low (in random order), and the rest fall anywhere in the range,
on whole points. So the M1 bars built from the ticks (``datafeeds.ticks.bars_from_ticks``) have the
candles' open, high, low and close, and any coarser bars built from those equal the candles resampled.
The ask is the bid plus the minute's spread. Times are whole milliseconds, in order inside the minute.

Vectorised, in chunks of minutes (a year of EURUSD, some 30 M ticks, in seconds), into arrays allocated
once: time (int64) and bid, ask (float64), 24 bytes a tick.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from datafeeds.candles import meta_of
from datafeeds.errors import DataError
from datafeeds.ticks import TickMeta, make_ticks
from datafeeds.timeframes import Timeframe

CHUNK_MINUTES = 5_000  # about 400,000 ticks: the temporaries stay near 50 MB


def synthetic_ticks(m1: pd.DataFrame, *, seed: int = 0, ticks_per_minute: float = 80.0) -> pd.DataFrame:
    """Ticks whose M1 bars are ``m1``'s (M1 candles, e.g. ``synthetic_candles(..., "M1")``)."""
    meta = meta_of(m1)
    if meta.timeframe is not Timeframe.M1:
        raise DataError(f"synthetic ticks are built from M1 candles, not {meta.timeframe.name}")
    if not ticks_per_minute >= 4:
        raise DataError(
            f"ticks_per_minute must be at least 4 (open, high, low, close), not {ticks_per_minute}"
        )
    rng = np.random.default_rng(seed)
    n = len(m1)
    volume = m1["tick_volume"].to_numpy(dtype=np.float64)
    weight = volume / volume.mean() if n and volume.mean() > 0 else np.ones(n)
    counts = np.maximum(4, rng.poisson(ticks_per_minute * weight)).astype(np.int64)
    total = int(counts.sum())
    out_ns = np.empty(total, dtype=np.int64)
    out_bid = np.empty(total, dtype=np.float64)
    out_ask = np.empty(total, dtype=np.float64)
    scale = 10.0**meta.digits
    pts = {c: np.rint(m1[c].to_numpy(dtype=np.float64) * scale) for c in ("open", "high", "low", "close")}
    spread = m1["spread"].to_numpy(dtype=np.float64)
    minute_ns = m1.index.as_unit("ns").asi8
    ends = np.cumsum(counts)
    for a in range(0, n, CHUNK_MINUTES):
        b = min(n, a + CHUNK_MINUTES)
        lo, hi = int(ends[a] - counts[a]), int(ends[b - 1])
        c = counts[a:b]
        chunk = {k: v[a:b] for k, v in pts.items()}
        bid_pts, offset_ms = _minutes(rng, c, chunk)
        minute = np.repeat(np.arange(a, b), c)
        out_ns[lo:hi] = minute_ns[minute] + offset_ms * 1_000_000
        out_bid[lo:hi] = bid_pts / scale
        out_ask[lo:hi] = (bid_pts + spread[minute]) / scale
    tick_meta = TickMeta(meta.symbol, meta.digits, f"synthetic ticks (seed {seed})")
    return make_ticks(out_ns, out_bid, out_ask, tick_meta)


def _minutes(rng: np.random.Generator, counts: np.ndarray, pts: dict[str, np.ndarray]):
    """Bid prices in points and millisecond offsets for one chunk of minutes (``counts`` ticks each)."""
    total = int(counts.sum())
    first = np.cumsum(counts) - counts  # index of each minute's first tick in the chunk
    rep = np.repeat(np.arange(len(counts)), counts)
    low, high = pts["low"][rep], pts["high"][rep]
    bid = low + np.floor(rng.random(total) * (high - low + 1))  # anywhere in the range, whole points
    # Two distinct inner positions take the high and the low; the first and last the open and close.
    inner = counts - 2
    at_high = 1 + np.floor(rng.random(len(counts)) * inner).astype(np.int64)
    at_low = 1 + np.floor(rng.random(len(counts)) * (inner - 1)).astype(np.int64)
    at_low += at_low >= at_high
    bid[first + at_high] = pts["high"]
    bid[first + at_low] = pts["low"]
    bid[first] = pts["open"]
    bid[first + counts - 1] = pts["close"]
    # Sorted uniform times inside each minute: normalised running sums of exponential gaps.
    gaps = rng.exponential(size=total + len(counts))
    ends = np.cumsum(counts + 1)
    run = np.cumsum(gaps)
    before = np.r_[0.0, run[ends[:-1] - 1]]  # running sum before each minute's gaps
    span = run[ends - 1] - before
    k = np.arange(total) + rep  # each tick's gap index (one spare gap per minute closes it)
    offset_ms = np.floor((run[k] - before[rep]) / span[rep] * 60_000).astype(np.int64)
    return bid, np.minimum(offset_ms, 59_999)
