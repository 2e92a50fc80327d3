"""The legs a symbol's positions hold over every bar, kept as steps: the lots and lots x price of its longs
and shorts (and lots x margin price) change only where a position opens or closes, so a million bars hold
about a hundred thousand steps, and what is a function of the legs alone (the margin) is worked out once a
step; values at every bar are spread from the steps where read."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from backtests.curves import distinct

_CHUNK = 1 << 16  # bars a chunk of ``Held.floating``: four rows of legs for a chunk, not for every bar
Prices = Callable[[int, int], np.ndarray]  # the prices of bars a..b-1


def _field(records: list[tuple], k: int, dtype: type) -> np.ndarray:
    """Field ``k`` of every record as one array, read in one pass (``zip(*records)`` would make an iterator
    per record: a hundred thousand objects for the collector at a million bars)."""
    return np.fromiter(map(itemgetter(k), records), dtype=dtype, count=len(records))


class Held(NamedTuple):
    """The legs a symbol's positions hold, as steps: ``legs[:, k]`` (six rows: see ``Ledger._curves``) over
    bars ``bars[k]`` up to the next step's, nothing before the first. A million bars hold about a hundred
    thousand steps, and what is a function of the legs alone (the margin) is worked out once a step."""

    bars: np.ndarray  # (K,) int64, increasing, each below n
    legs: np.ndarray  # (6, K)
    n: int

    def spread(self, values: np.ndarray) -> np.ndarray:
        """``values`` (..., K) of each step, at each of the n bars (0 before the first step)."""
        if not len(self.bars):
            return np.zeros((*values.shape[:-1], self.n))
        lengths = np.diff(np.append(self.bars, self.n))
        if self.bars[0] > 0:  # nothing held before the first step
            zero = np.zeros((*values.shape[:-1], 1))
            values, lengths = np.concatenate((zero, values), axis=-1), np.append(self.bars[0], lengths)
        return np.repeat(values, lengths, axis=-1)

    def floating(self, bid: Prices, ask: Prices, contract_size: float) -> np.ndarray:
        """The floating profit (profit currency) at each of the n bars of the positions held over it,
        longs at ``bid(a, b)`` and shorts at ``ask(a, b)`` (each the prices of bars a..b-1):
        ``contract_size * (long lots * bid - long lots x price + short lots x price - short lots * ask)``.
        Worked a chunk of bars at a time, each bar's legs read from its step: the same values as from the
        legs spread over every bar at once, without those (4, N) rows and the prices' own (N,) copies."""
        out = np.empty(self.n)
        for a in range(0, self.n, _CHUNK):
            b = min(self.n, a + _CHUNK)
            legs = self._legs_over(a, b)
            out[a:b] = contract_size * (legs[0] * bid(a, b) - legs[1] + legs[3] - legs[2] * ask(a, b))
        return out

    def _legs_over(self, a: int, b: int) -> np.ndarray:
        """The first four legs (4, b - a) held over bars a..b-1 (0 before the first step): the steps over
        the chunk, each repeated over its bars in it, as ``spread`` does over all of them."""
        if not len(self.bars):
            return np.zeros((4, b - a))
        first = int(np.searchsorted(self.bars, a, side="right")) - 1  # the step held at bar a (-1: none)
        end = int(np.searchsorted(self.bars, b))  # the steps that begin before bar b
        lengths = np.diff(np.concatenate(([a], self.bars[first + 1 : end], [b])))
        if first < 0:  # nothing held before the first step
            return np.repeat(np.concatenate((np.zeros((4, 1)), self.legs[:4, :end]), axis=1), lengths, axis=1)
        return np.repeat(self.legs[:4, first:end], lengths, axis=1)

    def at(self, bars: np.ndarray) -> np.ndarray:
        """The legs (6, len(bars)) held over each of ``bars`` (``spread(legs)[:, bars]``, read at those
        bars only)."""
        if not len(self.bars):
            return np.zeros((len(self.legs), len(bars)))
        step = np.searchsorted(self.bars, bars, side="right") - 1
        legs = self.legs[:, np.maximum(step, 0)]
        legs[:, step < 0] = 0.0  # nothing held before the first step
        return legs


def held_steps(segments: list[tuple], n: int) -> Held:
    """The legs held over each of ``n`` bars by ``segments`` (``backtests.broker.records.Segment`` rows:
    start bar, end bar, side, lots, price, margin price), as steps.

    Each leg at a bar is the running sum, bar by bar, of the segments' starts at each bar and then its ends,
    each bar's in segment order: the sums ``np.cumsum`` of a ``bincount`` over every bar gives, less the
    bars where nothing starts or ends (adding their 0.0 changes no sum: none is ever -0.0)."""
    if not segments:
        return Held(np.zeros(0, dtype=np.int64), np.zeros((6, 0)), n)
    start, end, side = (_field(segments, k, np.int64) for k in range(3))
    lots, price, mprice = (_field(segments, k, np.float64) for k in range(3, 6))
    steps = distinct(np.concatenate((start, end)))
    legs = np.zeros((6, len(steps)))
    for row, mask in ((0, side > 0), (2, side < 0)):
        cols = ((row, lots[mask]), (row + 1, (lots * price)[mask]), (4 + row // 2, (lots * mprice)[mask]))
        # each bar's starts, then its ends, summed in segment order (``bincount`` adds one by one)
        at = np.searchsorted(steps, np.concatenate((start[mask], end[mask])))
        for col, amount in cols:
            legs[col] = np.bincount(at, np.concatenate((amount, -amount)), minlength=len(steps))
    kept = int(np.searchsorted(steps, n))  # the bars of the run only
    return Held(steps[:kept], np.cumsum(legs[:, :kept], axis=1), n)
