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
price of the path itself counts from that price), and after the last price for the end of the test.
Equity there is the balance plus every open position's floating profit: longs at the bid, shorts at the
ask. The path is rebuilt after the run, a chunk of bars at a time, from the bars, the price path and the
ledger, so the bar loop pays nothing for it; it is kept as its skeleton (each peak the equity fell from and
the lowest equity after it), from which every drawdown MetaTrader reports follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from backtests.paths import M1Path, ohlc_points
from backtests.ticks import TickPath

_SHIFT = 32  # a price's key: bar << 32 | its rank inside the bar
_LAST = (1 << _SHIFT) - 1  # the key's rank after every price of a bar
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
    broker, first: int, last: int, deposit: float, start: pd.Timestamp, frame: bool = True
) -> EquityPath | None:
    """The equity path over the prices of bars ``first..last`` from ``deposit`` at ``start`` (the report's
    first row; ``EquityPath``, its skeleton's table only with ``frame``); None when the ledger's deals
    cannot be replayed as positions (a live account's reversal deals), where the caller keeps the
    bar-level estimate.

    Between two events the open volume is constant, so each chunk of prices is cut into the stretches
    between the events that fall in it (an event's place is its bar's first price plus its rank in the
    bar) and each stretch's balance and volume are repeated over its prices: no per-price search."""
    bars = _BarPrices(broker)
    events = _events(broker, bars)
    if events is None:
        return None
    keys, moves = events  # (E,), (E, 5): balance, long lots, lots x price, short lots, lots x price
    state = np.vstack([np.zeros((1, 5)), np.cumsum(moves, axis=0)])  # row j: after the first j events
    money = deposit + state[:, 0]
    volume = [np.ascontiguousarray(state[:, i]) for i in range(1, 5)]
    event_bar, event_rank = keys >> _SHIFT, keys & _LAST
    per_point = broker.config.contract_size / broker.scale
    skeleton = _Skeleton(deposit, start)
    step = max(1, _CHUNK // bars.per_bar(first, last + 1))
    for a in range(first, last + 1, step):
        b = min(last + 1, a + step)
        counts = bars.counts(a, b)
        offsets = np.concatenate(([0], np.cumsum(counts)))  # each bar's first price in the chunk
        lo, hi = np.searchsorted(event_bar, (a, b))  # events before the chunk count from its first price
        inside = event_bar[lo:hi] - a
        at = offsets[inside] + np.minimum(event_rank[lo:hi], counts[inside])
        lengths = np.diff(np.concatenate(([0], at, [offsets[-1]])))  # prices of each stretch, rows lo..hi
        bid, ask = bars.prices(a, b)
        where = None  # the prices kept, when stretches without positions are cut to their first price
        flat = (volume[0][lo : hi + 1] == 0) & (volume[2][lo : hi + 1] == 0)
        if lengths[flat].sum() >= _SPARSE * len(bid):
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


class _BarPrices:
    """The modelled prices of bars (see the module docstring): bids and asks in whole points."""

    def __init__(self, broker):
        m = broker.market
        self.m, self.path = m, broker.price_path
        # Each bar's own four prices, ordered as a minute's (bull: low first; bear: high first).
        self.own = ohlc_points(m.o, m.h, m.lo, m.c)
        self.own_spread = np.column_stack([m.s_open, m.s, m.s, m.s_close])

    def per_bar(self, a: int, b: int) -> int:
        """The prices of a bar, on average over bars ``a..b-1`` (at least the four of a bar's own)."""
        if self.path is None or b <= a:
            return 4
        rows = int(self.path.starts[b] - self.path.starts[a])
        return max(4, (rows * (4 if isinstance(self.path, M1Path) else 1)) // (b - a))

    def covered(self, a: int, b: int) -> np.ndarray:
        if self.path is None:
            return np.zeros(b - a, dtype=bool)
        return self.path.starts[a + 1 : b + 1] > self.path.starts[a:b]

    def counts(self, a: int, b: int) -> np.ndarray:
        """The number of prices of each bar ``a..b-1``: four of its own, or its minutes' four each, or its
        ticks (their ranks in the bar run from 0 without a gap)."""
        if self.path is None:
            return np.full(b - a, 4, dtype=np.int64)
        rows = np.diff(self.path.starts[a : b + 1]).astype(np.int64)
        fine = rows * 4 if isinstance(self.path, M1Path) else rows
        return np.where(rows > 0, fine, 4)

    def prices(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """``(bids, asks)`` of every price of bars ``a..b-1``, in time order."""
        covered = self.covered(a, b)
        if not covered.any():  # the bars' own prices
            return self.own[a:b].ravel(), (self.own[a:b] + self.own_spread[a:b]).ravel()
        path = self.path
        if covered.all():  # the rows of consecutive bars are one slice
            rows = slice(int(path.starts[a]), int(path.starts[b]))
            if isinstance(path, M1Path):
                return path.points[rows].ravel(), (path.points[rows] + path.spread[rows, None]).ravel()
            return path.bid_points[rows], path.ask_points[rows]
        bars = np.arange(a, b)[~covered]
        parts = [(
            ((bars[:, None] << _SHIFT) + np.arange(4)).ravel(),
            self.own[bars].ravel(),
            (self.own[bars] + self.own_spread[bars]).ravel(),
        ), self._fine(np.arange(a, b)[covered])]  # fmt: skip
        keys, bid, ask = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.argsort(keys, kind="stable")
        return bid[order], ask[order]

    def _fine(self, bars: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keys, bids, asks)`` of the minutes' or ticks' prices of ``bars`` (covered ones)."""
        path = self.path
        starts, ends = path.starts[bars], path.starts[bars + 1]
        counts = ends - starts
        bar = np.repeat(bars, counts)
        rows = np.repeat(ends - counts.cumsum(), counts) + np.arange(counts.sum())  # each bar's rows
        rank = rows - np.repeat(starts, counts)
        if isinstance(path, M1Path):
            keys = ((bar << _SHIFT) + 4 * rank)[:, None] + np.arange(4)
            bid = path.points[rows]
            return keys.ravel(), bid.ravel(), (bid + path.spread[rows, None]).ravel()
        return (bar << _SHIFT) + rank, path.bid_points[rows], path.ask_points[rows]

    def key(self, t: int, ns: int | None, price: float, buy: bool) -> int:
        """Where a deal of bar ``t``, a bar of minutes or ticks, at UTC ``ns`` (None: the bar's open) and
        ``price`` (points; a buy deal at the ask) takes effect (a bar of its own prices: ``_deal_keys``)."""
        path, base = self.path, t << _SHIFT
        if ns is None:
            return base  # at the bar's open (its first minute or tick)
        s = int(path.starts[t])
        if isinstance(path, M1Path):
            r = s + int(np.searchsorted(path.time_ns[s : path.starts[t + 1]], ns))
            return base + 4 * (r - s) + _leg(path.points[r], price - (path.spread[r] if buy else 0.0))
        assert isinstance(path, TickPath)
        lo, hi = (
            s + int(np.searchsorted(path.ns[s : path.starts[t + 1]], ns, side=x)) for x in ("left", "right")
        )
        quotes = (path.ask_points if buy else path.bid_points)[lo:hi]
        match = np.flatnonzero(quotes == price)
        return base + (lo + (int(match[0]) if len(match) else 0)) - s


def _leg(points: np.ndarray, price: float) -> int:
    """The rank of the first of four path prices from which a deal at ``price`` counts: the first place the
    path reaches it, that price itself or the end of the stretch that crosses it."""
    for i in range(4):
        if points[i] == price:
            return i
        if i < 3 and min(points[i], points[i + 1]) < price < max(points[i], points[i + 1]):
            return i + 1
    return 0


def _events(broker, bars: _BarPrices) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keys, moves)``: every change of the balance and of the open volume (lots and lots x price, long
    and short) at the key it takes effect, sorted; None when a deal is not an entry or an exit."""
    ledger, scale = broker.ledger, broker.scale
    trades = iter(ledger.trades)
    where, rows = [], []  # each deal's (bar, time, price in points, buy, end of test); its volume change
    for d in ledger.deals:
        buy = d.type == "buy"
        price = round(d.price * scale)
        where.append((d.bar, d.ns, price, buy, d.comment == "end of test"))
        if d.entry == "in":
            rows.append(
                (0.0, *((d.lots, d.lots * price, 0.0, 0.0) if buy else (0.0, 0.0, d.lots, d.lots * price)))
            )
        elif d.entry in ("out", "out_by"):
            trade = next(trades, None)
            if trade is None:
                return None
            entry = trade.entry_price * scale
            closed = (
                (0.0, 0.0, -trade.lots, -trade.lots * entry)
                if buy
                else (-trade.lots, -trade.lots * entry, 0.0, 0.0)
            )
            rows.append((0.0, *closed))
        else:
            return None
    deal_keys = _deal_keys(bars, where)
    keys = [*deal_keys]
    for bar, amount, deal in ledger.balance_events:
        keys.append(bar << _SHIFT if deal is None or deal >= len(deal_keys) else int(deal_keys[deal]))
        rows.append((amount, 0.0, 0.0, 0.0, 0.0))
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 5))
    table = np.array(rows, dtype=np.float64)
    keys = np.array(keys, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], table[order]


def _deal_keys(bars: _BarPrices, where: list[tuple]) -> np.ndarray:
    """The key of each deal (``where``: bar, time, price in points, buy, end of test): on a bar of its own
    four prices found for all such deals at once (``_legs``), on a bar of minutes or ticks one by one."""
    if not where:
        return np.zeros(0, dtype=np.int64)
    bar = np.array([w[0] for w in where], dtype=np.int64)
    price = np.array([w[2] for w in where], dtype=np.float64)
    buy = np.array([w[3] for w in where], dtype=bool)
    at_open = np.array([w[1] is None for w in where], dtype=bool)
    end = np.array([w[4] for w in where], dtype=bool)
    # The end of the test closes at the last bar's close, after every price of the bar.
    keys = (bar << _SHIFT) + np.where(end, _LAST, 0)
    path = bars.path
    own = ~end if path is None else ~end & (path.starts[bar + 1] <= path.starts[bar])
    if own.any():
        m, t = bars.m, bar[own]
        opened = at_open[own] & (price[own] - np.where(buy[own], m.s_open[t], 0.0) == m.o[t])
        legs = _legs(bars.own[t], price[own] - np.where(buy[own], m.s[t], 0.0))
        keys[own] += np.where(opened, 0, legs)  # at the open: a decision, a gap
    for i in np.flatnonzero(~end & ~own):
        t, ns, p, b, _ = where[i]
        keys[i] = bars.key(t, ns, p, b)
    return keys


def _legs(points: np.ndarray, price: np.ndarray) -> np.ndarray:
    """``_leg`` of each row of four prices ``points`` (n, 4) and its ``price``, all at once: its checks
    in the same order, the first that holds."""
    low, high = np.minimum(points[:, :3], points[:, 1:]), np.maximum(points[:, :3], points[:, 1:])
    between = (low < price[:, None]) & (price[:, None] < high)
    equal = points == price[:, None]
    checks = np.column_stack(
        [equal[:, 0], between[:, 0], equal[:, 1], between[:, 1], equal[:, 2], between[:, 2], equal[:, 3]]
    )
    first = np.argmax(checks, axis=1)
    return np.where(checks.any(axis=1), np.array([0, 1, 1, 2, 2, 3, 3])[first], 0)


class _Skeleton:
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
