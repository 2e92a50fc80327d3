"""Equity at every price the modelling mode models, and MetaTrader's equity drawdowns measured on it.

MetaTrader's tester tracks equity at every tick it models, so an equity peak inside a bar counts as much as
a trough. The prices of each bar, in time order:

- a bar worked through its minutes ("1 minute OHLC"): each minute's open, its extremes and its close, in
  the order MetaTrader generates them (``backtests.paths.ohlc_points``), at that minute's spread;
- a bar worked through its ticks: each tick's bid and ask;
- any other bar ("open prices only", or a bar without finer data): its open, its two extremes in the same
  order as a minute's (a bull bar low first, a bear bar high first) and its close, at the bar's spreads.

Positions and the balance change where the ledger's deals happened: at a bar's open, at the minute or tick
of their time stamp, inside a stretch of prices from the first price beyond the deal's price (a deal at a
price of the path itself counts from that price), and after the last price for the end of the test
(``path_events.deal_events``, the builder the equity path of several symbols, ``account_path``, reads too);
a night's swap charged at a midnight inside a bar (the 00:00 bar missing) at the first minute or tick from
that moment on, where it was charged.
Equity there is the balance plus every open position's accrued swap and floating profit: longs at the bid,
shorts at the ask. The path is rebuilt after the run, a chunk of bars at a time, from the bars, the price path
and the ledger, so the bar loop pays nothing for it; it is kept as its skeleton (each peak the equity fell
from and the lowest equity after it), from which every drawdown MetaTrader reports follows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from backtests.path_events import KEY_SHIFT, LAST_RANK, BarPrices, deal_events

_CHUNK = 1 << 16  # prices a chunk, about: its temporaries stay in the processor's cache
_FEW = 64  # records of a chunk up to which their lows are found one slice at a time
_SPARSE = 0.25  # share of a chunk's prices with nothing open from which those stretches are cut short


@dataclass(frozen=True)
class EquityPath:
    """MetaTrader's equity drawdowns on the path (``metrics.drawdowns``' keys) and the path's skeleton they
    are all computed from: each peak the equity fell from (a value above every one before it, the deposit
    first) followed by the lowest equity before the next higher one (``time``: the opening time of the bar
    each happened in, the report's start for the deposit)."""

    drawdowns: dict
    skeleton: pd.DataFrame | None  # columns time, equity (None when not asked for)


def path_drawdowns(
    broker,
    first: int,
    last: int,
    deposit: float,
    start: pd.Timestamp,
    frame: bool = True,
    convert: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> EquityPath | None:
    """The equity path over the prices of bars ``first..last`` from ``deposit`` at ``start`` (the report's
    first row; ``EquityPath``, its skeleton's table only with ``frame``); None when the ledger's deals
    cannot be replayed as positions (a live account's reversal deals), where the caller keeps the
    bar-level estimate. ``convert(amount, bids, asks)``: the floating profit (the symbol's profit
    currency) in the deposit currency at each price's own quotes (a symbol converting through its own
    price, ``account_path``); None: the profit currency is the deposit currency.

    Between two events the open volume is constant, so each chunk of prices is cut into the stretches
    between the events that fall in it (an event's place is its bar's first price plus its rank in the
    bar) and each stretch's balance and volume are repeated over its prices: no per-price search."""
    bars = BarPrices(broker)
    events = deal_events(broker.ledger, {broker.symbol: bars})
    if events is None:
        return None
    keys, moves = events  # (E,), (E, 5): balance, long lots, lots x price, short lots, lots x price
    state = np.vstack([np.zeros((1, 5)), np.cumsum(moves, axis=0)])  # row j: after the first j events
    money = deposit + state[:, 0]
    volume = [np.ascontiguousarray(state[:, i]) for i in range(1, 5)]
    event_bar, event_rank = keys >> KEY_SHIFT, keys & LAST_RANK
    per_point = broker.config.contract_size / broker.scale
    skeleton = Skeleton(deposit, start)
    step = max(1, _CHUNK // bars.per_bar(first, last + 1))
    for a in range(first, last + 1, step):
        b = min(last + 1, a + step)
        counts = bars.counts(a, b)
        offsets = np.concatenate(([0], np.cumsum(counts)))  # each bar's first price in the chunk
        lo, hi = np.searchsorted(event_bar, (a, b))  # events before the chunk count from its first price
        inside = event_bar[lo:hi] - a
        at = offsets[inside] + np.minimum(event_rank[lo:hi], counts[inside])
        lengths = np.diff(np.concatenate(([0], at, [offsets[-1]])))  # prices of each stretch, rows lo..hi
        where = None  # the prices kept, when stretches without positions are cut to their first price
        flat = (volume[0][lo : hi + 1] == 0) & (volume[2][lo : hi + 1] == 0)
        if flat.all() and _SPARSE <= 1.0:  # nothing open in the chunk: each stretch's money at one price,
            kept = np.minimum(lengths, 1)
            where = np.cumsum(lengths) - lengths
            where = where[kept > 0]
            lengths = kept
            # and no price read (each is positive and finite: no lots times it is +0.0, as times 1.0)
            bid = ask = np.ones(int(kept.sum()))
        else:
            bid, ask = bars.prices(a, b)
        if where is None and lengths[flat].sum() >= _SPARSE * len(bid):
            # Nothing open: the equity is the same at every price of the stretch (0 x a price is 0), and a
            # repeated value is never a new peak nor a first low, so the stretch's first price stands for it.
            kept = np.where(flat, np.minimum(lengths, 1), lengths)
            shift = (np.cumsum(lengths) - lengths) - (np.cumsum(kept) - kept)  # stretch starts: chunk - kept
            where = np.repeat(shift, kept) + np.arange(kept.sum())
            bid, ask, lengths = bid[where], ask[where], kept
        balance, long_lots, long_value, short_lots, short_value = (
            np.repeat(column[lo : hi + 1], lengths) for column in (money, *volume)
        )
        floating = per_point * (long_lots * bid - long_value + short_value - short_lots * ask)
        if convert is not None:
            floating = convert(floating, bid, ask)
        skeleton.add(
            balance + floating,
            lambda i, a=a, offsets=offsets, where=where: (
                a + _bar_of(offsets, i if where is None else where[i])
            ),
        )
    figures = skeleton_drawdowns(skeleton.values(), deposit)
    return EquityPath(figures, skeleton.frame(broker.market.time) if frame else None)


def _bar_of(offsets: np.ndarray, index: np.ndarray | int) -> np.ndarray:
    """The bar (from the chunk's first) of prices at ``index`` in a chunk whose bars start at ``offsets``."""
    return np.searchsorted(offsets, index, side="right") - 1


def skeleton_drawdowns(skeleton: np.ndarray, deposit: float) -> dict:
    """MetaTrader's equity drawdowns from a path's skeleton (``EquityPath.skeleton``'s equity: each peak
    the equity fell from and the lowest equity after it): absolute (deposit - the lowest equity), maximal
    (the largest fall from a peak, in money, with its percent of the peak) and relative (the largest in
    percent, with its money), as ``metrics.drawdowns`` defines them."""
    peaks, troughs = skeleton[0::2], skeleton[1::2]
    fall = peaks - troughs
    pct = np.where(peaks > 0, fall / np.where(peaks > 0, peaks, 1.0) * 100.0, 0.0)
    i = int(np.argmax(fall)) if len(fall) else 0
    j = int(np.argmax(pct)) if len(pct) else 0
    figures = {
        "absolute": max(0.0, deposit - float(skeleton.min())) if len(skeleton) else 0.0,
        "maximal": float(fall[i]) if len(fall) else 0.0,
        "maximal_pct": float(pct[i]) if len(pct) else 0.0,
        "relative_pct": float(pct[j]) if len(pct) else 0.0,
        "relative": float(fall[j]) if len(fall) else 0.0,
    }
    return {k: round(v, 6) if np.isfinite(v) else None for k, v in figures.items()}


class Skeleton:
    """A curve given in pieces, kept as its skeleton: each peak it fell from (a value above every one
    before it, the deposit first) and the lowest value before the next higher one. Every drawdown
    MetaTrader reports is such a peak and its low (a rise without a fall leaves nothing)."""

    def __init__(self, deposit: float, start: pd.Timestamp):
        self.start = start
        self.pairs: list[tuple[np.ndarray, ...]] = []  # (peaks, their bars, lows, their bars), as found
        self.peak, self.low = deposit, deposit  # the last peak and the lowest value since
        self.peak_bar = self.low_bar = -1  # -1: the start

    def add(self, curve: np.ndarray, bar_of) -> None:
        """The next piece of the curve; ``bar_of(indices)`` gives the bars of its values at ``indices``."""
        if not len(curve):
            return
        running = np.maximum.accumulate(curve)
        head = int(np.searchsorted(running, self.peak, side="right"))  # the first value above the peak
        if head:  # values before the next record belong to the last peak: its low may deepen
            k = int(np.argmin(curve[:head]))
            if curve[k] < self.low:
                self.low, self.low_bar = float(curve[k]), int(bar_of(k))
        if head == len(curve):
            return
        if self.low < self.peak:
            self.pairs.append(
                tuple(np.array([v]) for v in (self.peak, self.peak_bar, self.low, self.low_bar))
            )
        # each later value above all before it is a record: where the running maximum rises
        record = np.concatenate(([head], head + 1 + np.flatnonzero(running[head + 1 :] > running[head:-1])))
        # the lowest value after each record, before the next, and where it first came
        if len(record) <= _FEW:
            pieces = zip(record.tolist(), [*record[1:].tolist(), len(curve)], strict=True)
            low_at = np.array([s + int(np.argmin(curve[s:e])) for s, e in pieces])
            lows = curve[low_at]
        else:
            tail = curve[head:]
            starts = record - head
            lows = np.minimum.reduceat(tail, starts)
            lengths = np.diff(np.append(starts, len(tail)))
            at = np.where(tail == np.repeat(lows, lengths), np.arange(len(tail)), len(tail))
            low_at = np.minimum.reduceat(at, starts) + head
        peaks = curve[record]
        fell = lows[:-1] < peaks[:-1]  # the last one stays open: later values may deepen it
        self.pairs.append(
            (peaks[:-1][fell], bar_of(record[:-1][fell]), lows[:-1][fell], bar_of(low_at[:-1][fell]))
        )
        self.peak, self.peak_bar = float(peaks[-1]), int(bar_of(record[-1]))
        self.low, self.low_bar = float(lows[-1]), int(bar_of(low_at[-1]))

    def _columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, bars): peak, low, peak, low, ... and the bar each fell in (-1: the start)."""
        pairs = [*self.pairs]
        if self.low < self.peak:
            pairs.append(tuple(np.array([v]) for v in (self.peak, self.peak_bar, self.low, self.low_bar)))
        if not pairs:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        peaks, peak_bars, lows, low_bars = (np.concatenate(x) for x in zip(*pairs, strict=True))
        values = np.column_stack([peaks, lows]).ravel()
        return values, np.column_stack([peak_bars, low_bars]).ravel().astype(np.int64)

    def values(self) -> np.ndarray:
        """The skeleton's equity: peak, low, peak, low, ..."""
        return self._columns()[0]

    def frame(self, time: pd.DatetimeIndex) -> pd.DataFrame:
        """``time`` (the bar each value fell in; the start for the deposit), ``equity``: peak, low, ..."""
        values, bars = self._columns()
        if not len(values):
            return pd.DataFrame({"time": pd.DatetimeIndex([], tz="UTC"), "equity": np.zeros(0)})
        times = time[np.maximum(bars, 0)].where(bars >= 0, self.start)
        return pd.DataFrame({"time": times, "equity": values})
