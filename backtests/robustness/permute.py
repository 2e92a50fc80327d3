"""Permuted price histories for permutation tests: the bars' relative moves in another order.

Masters, T. (2020), "Permutation and Randomization Tests for Trading System Development", the bar
permutation: in log prices, each bar is its gap from the previous close (``open − previous close``) and
its moves from its own open (``high − open``, ``low − open``, ``close − open``). The gaps are shuffled
among themselves and the intrabar triples (with the bar's spread and volumes) among themselves, then the
history is rebuilt from the first bar's prices kept as they are. Every rebuilt bar is a real bar's shape
moved to another level, so ``high ≥ max(open, close) ≥ min(open, close) ≥ low`` holds as in the data;
prices are rounded to the symbol's digits (rounding is monotone, so the order survives it). The bar times
stay, so the calendar, sessions and weekends are the real ones.

``block > 1`` shuffles runs of ``block`` consecutive bars whole (gaps and intrabar moves together) instead
of single bars, which keeps volatility clustering within a block.

Periods are permuted separately: the study window ``[1, forward_start)`` and the forward window
``[forward_start, n)`` each among themselves (``scope="both"``), or the forward window only
(``scope="forward"``, Masters' out-of-sample test: the EA trains on the real study window). No move of the
forward period ever enters the study window, so a permuted history never shows the EA the real future
while it trains; and because a permuted window's moves add up to the same total, the forward window starts
from the real last study close.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.robustness.errors import RobustnessError

SCOPES = ("both", "forward")


def segments(n: int, forward_start: int, scope: str) -> list[tuple[int, int]]:
    """The ``[a, b)`` bar ranges shuffled within themselves (bar 0 is never moved)."""
    if scope not in SCOPES:
        raise RobustnessError(f"permutation scope {scope!r}: choose {' or '.join(SCOPES)}")
    parts = [(1, forward_start), (forward_start, n)] if scope == "both" else [(forward_start, n)]
    return [(max(a, 1), b) for a, b in parts if b - max(a, 1) >= 2]


def _order(rng: np.random.Generator, a: int, b: int, block: int) -> np.ndarray:
    """Positions ``a..b-1`` in a random order of whole blocks of ``block`` bars (the last may be shorter)."""
    starts = np.arange(a, b, block)
    picked = rng.permutation(len(starts))
    return np.concatenate([np.arange(s, min(s + block, b)) for s in starts[picked]])


def permute_candles(
    candles: pd.DataFrame,
    forward_start: int,
    rng: np.random.Generator,
    *,
    block: int = 1,
    scope: str = "both",
) -> pd.DataFrame:
    """A permuted copy of ``candles`` (same index, metadata and columns), as the module describes."""
    n = len(candles)
    o, h, lo, c = (np.log(candles[k].to_numpy(np.float64)) for k in ("open", "high", "low", "close"))
    gap = np.empty(n)
    gap[0] = 0.0
    gap[1:] = o[1:] - c[:-1]
    intra = np.column_stack([h - o, lo - o, c - o])  # (n, 3)
    rows = np.arange(n)  # where each bar's own columns (spread, volumes, intrabar moves) come from
    gaps_from = np.arange(n)
    for a, b in segments(n, forward_start, scope):
        if block <= 1:
            rows[a:b] = a + rng.permutation(b - a)
            gaps_from[a:b] = a + rng.permutation(b - a)
        else:
            order = _order(rng, a, b, block)
            rows[a:b] = order
            gaps_from[a:b] = order
    moved = intra[rows]
    g = gap[gaps_from]
    close = c[0] + np.cumsum(g + moved[:, 2]) - (g[0] + moved[0, 2])  # bar 0 keeps its own close
    opens = np.concatenate(([o[0]], close[:-1] + g[1:]))
    scale = 10.0 ** int(candles.attrs["candles"].digits)
    out = candles.iloc[rows].copy()
    out.index = candles.index
    out.attrs = dict(candles.attrs)
    for name, values in (
        ("open", opens),
        ("high", opens + moved[:, 0]),
        ("low", opens + moved[:, 1]),
        ("close", close),
    ):
        out[name] = np.round(np.exp(values) * scale) / scale
    out.iloc[0, :] = candles.iloc[0, :]
    return out
