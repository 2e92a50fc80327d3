"""Where an account's deals change its balance and its open volume on the prices a run models: the one
builder of events that the equity path of one symbol (``equity_path``) and of several (``account_path``,
``merged_path``) read.

Each price a bar models has a key, ``bar << KEY_SHIFT | its rank inside the bar``. A deal takes effect at a
bar's open (a decision, a gap), at the minute or tick of its time stamp, inside a stretch of prices from the
first price beyond the deal's price (a deal at a price of the path itself counts from that price), or after
the last price for the end of the test (``LAST_RANK``). An event is a change of the money the equity holds
besides the floating profit (column 0: the balance, and the open positions' swap accrued at a rollover, at
the bar's open or at the moment of a midnight inside the bar, until the closing deal moves it onto the
balance) or of one symbol's open volume (four columns a symbol: long lots, long lots x price, short lots,
short lots x price, prices in whole points) at its key.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from backtests.broker.columns import Events
from backtests.paths import M1Path, ohlc_rising, ohlc_rows
from backtests.ticks import TickPath

KEY_SHIFT = 32  # a price's key: bar << 32 | its rank inside the bar
LAST_RANK = (1 << KEY_SHIFT) - 1  # the key's rank after every price of a bar


class BarPrices:
    """The modelled prices of bars (see the module docstring): bids and asks in whole points."""

    def __init__(self, broker):
        m = broker.market
        self.m, self.path, self.scale = m, broker.price_path, broker.scale  # points per price unit
        self._rising = ohlc_rising(m.o, m.c)  # each bar's own prices made only for the bars read

    def own(self, bars: slice | np.ndarray) -> np.ndarray:
        """(n, 4) each of ``bars``' own four prices, ordered as a minute's (bull: low first; bear: high
        first; ``backtests.paths.ohlc_points``)."""
        m = self.m
        return ohlc_rows(m.o[bars], m.h[bars], m.lo[bars], m.c[bars], self._rising[bars])

    def own_quotes(self, bars: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bids, asks)`` of ``bars``' own four prices each, in time order (the spread of the open at
        the open, the bar's at its extremes and that of the close at the close)."""
        m, own = self.m, self.own(bars)
        spread = np.column_stack([m.s_open[bars], m.s[bars], m.s[bars], m.s_close[bars]])
        return own.ravel(), (own + spread).ravel()

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
            return self.own_quotes(slice(a, b))
        path = self.path
        if covered.all():  # the rows of consecutive bars are one slice
            rows = slice(int(path.starts[a]), int(path.starts[b]))
            if isinstance(path, M1Path):
                return path.points[rows].ravel(), (path.points[rows] + path.spread[rows, None]).ravel()
            return path.bid_points[rows], path.ask_points[rows]
        bars = np.arange(a, b)[~covered]
        parts = [
            (((bars[:, None] << KEY_SHIFT) + np.arange(4)).ravel(), *self.own_quotes(bars)),
            self._fine(np.arange(a, b)[covered]),
        ]
        keys, bid, ask = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.argsort(keys, kind="stable")
        return bid[order], ask[order]

    def timed(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(keys, ns, bids, asks)`` of every price of bars ``a..b-1`` in time order, ``ns`` its UTC time
        (a minute's four prices its minute's, a bar's own four its opening time)."""
        covered = self.covered(a, b)
        own = np.arange(a, b)[~covered]
        opens = self.m.time.as_unit("ns").asi8[own] if len(own) else np.zeros(0, dtype=np.int64)
        parts = [
            (((own[:, None] << KEY_SHIFT) + np.arange(4)).ravel(), np.repeat(opens, 4), *self.own_quotes(own))
        ]
        if covered.any():
            fine = np.arange(a, b)[covered]
            keys, bid, ask = self._fine(fine)
            starts = self.path.starts
            rows = np.arange(int(starts[a]), int(starts[b]))  # the covered bars' rows, in order
            ns = self.path.row_ns[rows]
            parts.append((keys, np.repeat(ns, 4) if isinstance(self.path, M1Path) else ns, bid, ask))
        if len(parts) == 1 or not len(own):
            return parts[-1]
        keys, ns, bid, ask = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.argsort(keys, kind="stable")
        return keys[order], ns[order], bid[order], ask[order]

    def moment_key(self, t: int, ns: int) -> int:
        """The key of the first price of bar ``t`` at or after UTC ``ns`` (its open on a bar of its own
        prices; after its last where none is)."""
        path, base = self.path, t << KEY_SHIFT
        if path is None or path.starts[t + 1] <= path.starts[t]:
            return base
        s, e = int(path.starts[t]), int(path.starts[t + 1])
        if isinstance(path, M1Path):
            return base + 4 * int(np.searchsorted(path.time_ns[s:e], ns))
        return base + int(np.searchsorted(path.ns[s:e], ns))

    def _fine(self, bars: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keys, bids, asks)`` of the minutes' or ticks' prices of ``bars`` (covered ones)."""
        path = self.path
        starts, ends = path.starts[bars], path.starts[bars + 1]
        counts = ends - starts
        bar = np.repeat(bars, counts)
        rows = np.repeat(ends - counts.cumsum(), counts) + np.arange(counts.sum())  # each bar's rows
        rank = rows - np.repeat(starts, counts)
        if isinstance(path, M1Path):
            keys = ((bar << KEY_SHIFT) + 4 * rank)[:, None] + np.arange(4)
            bid = path.points[rows]
            return keys.ravel(), bid.ravel(), (bid + path.spread[rows, None]).ravel()
        return (bar << KEY_SHIFT) + rank, path.bid_points[rows], path.ask_points[rows]

    def key(self, t: int, ns: int | None, price: float, buy: bool) -> int:
        """Where a deal of bar ``t``, a bar of minutes or ticks, at UTC ``ns`` (None: the bar's open) and
        ``price`` (points; a buy deal at the ask) takes effect (a bar of its own prices: ``_keys``)."""
        path, base = self.path, t << KEY_SHIFT
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


def deal_events(
    ledger, symbols: Mapping[str, BarPrices], *, timed: bool = True
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keys, moves)`` of ``event_table``, sorted: on one symbol's prices a swap charged at a midnight
    inside its bar at the symbol's first price from that moment on (several symbols' bars of their own
    four prices, open prices, have no midnight inside a bar: ``merged_path`` merges finer ones)."""
    table = event_table(ledger, symbols, timed=timed)
    if table is None:
        return None
    keys, _, moments, moves = table
    inside = np.flatnonzero(moments >= 0)
    if len(inside) and len(symbols) == 1:
        (bars,) = symbols.values()
        keys = keys.copy()
        keys[inside] = [
            bars.moment_key(int(k >> KEY_SHIFT), int(moments[i]))
            for i, k in zip(inside, keys[inside], strict=True)
        ]
    order = np.argsort(keys, kind="stable")
    return keys[order], moves[order]


def event_table(
    ledger, symbols: Mapping[str, BarPrices], *, timed: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(keys, owners, moments, moves)``, in the ledger's order (deals, then balance events, then swap
    events): every change of the balance and the accrued swap (column 0) and of each symbol's open volume
    (the four columns of the i-th symbol of ``symbols`` from ``1 + 4 * i``; each symbol's deals placed on
    its own ``BarPrices``) at the key it takes effect on its owner's prices (``owners``: the i of the deal's
    symbol, -1 for an event of no deal, at its bar's open, or at ``moments``, UTC ns of a swap charged at a
    midnight inside its bar, -1 where none); None when a deal is neither an entry nor an exit (a netting
    reversal). ``timed``: a deal's time stamp places it inside a bar of minutes or ticks, and only a deal
    without one is taken at the bar's open; without, every deal is placed by its price on its bar's own
    four prices."""
    width = 1 + 4 * len(symbols)
    # the fields as columns, read from the rows the ledger recorded (``Ledger.columns``): no record built
    deals, trades = ledger.columns("deals"), ledger.columns("trades")
    n = len(deals)
    entry = deals.texts("entry")
    is_in = entry == "in"
    is_out = (entry == "out") | (entry == "out_by")
    if not (is_in | is_out).all() or int(is_out.sum()) > len(trades):
        return None  # a netting reversal, or an exit without its trade
    symbol = deals.texts("symbol")
    buy = deals.texts("type") == "buy"
    lots = deals.numbers("lots")
    bar = deals.numbers("bar", np.int64)
    end = deals.texts("comment") == "end of test"
    ns = deals.values("ns") if timed else None
    if ns is not None and ns.count(None) == n:
        ns = None  # no deal has a time stamp (open prices): every one is placed by its price on its bar
    scale = np.zeros(n)
    sym_col = np.zeros(n, dtype=np.int64)
    for i, name in enumerate(symbols):
        mine = symbol == name
        scale[mine], sym_col[mine] = symbols[name].scale, 1 + 4 * i
    # round() of each price in points: to the nearest, half to even
    price = np.rint(deals.numbers("price") * scale)
    closed = int(is_out.sum())  # the exits close the trades in their order
    volume = np.where(is_in, lots, 0.0)
    amount = np.where(is_in, lots * price, 0.0)
    out = np.flatnonzero(is_out)
    t_lots = trades.numbers("lots")[:closed]
    volume[out] = -t_lots
    amount[out] = -t_lots * (trades.numbers("entry_price")[:closed] * scale[out])
    # an entry adds to its side (long: +0, short: +2), an exit takes from the other one
    side = sym_col + np.where(is_in == buy, 0, 2)
    balance = [ledger.events("balance_events"), ledger.events("swap_events")]
    balance = Events(*(np.concatenate(columns) for columns in zip(*balance, strict=True)))
    moves = np.zeros((n + len(balance.bars), width))
    moves[np.arange(n), side] = volume
    moves[np.arange(n), side + 1] = amount
    keys = np.zeros(n + len(balance.bars), dtype=np.int64)
    owners = np.concatenate([(sym_col - 1) // 4, np.full(len(balance.bars), -1, dtype=np.int64)])
    moments = np.concatenate([np.full(n, -1, dtype=np.int64), balance.moments])
    for name in symbols:
        mine = np.flatnonzero(symbol == name)
        stamps = None if ns is None else [ns[i] for i in mine]
        keys[mine] = _keys(symbols[name], bar[mine], stamps, price[mine], buy[mine], end[mine])
    if len(balance.bars):  # at its deal's key, else at its bar's open
        of = np.full(len(balance.bars), -1, dtype=np.int64)
        known = balance.deals < n  # NaN (no deal) is not
        of[known] = balance.deals[known]
        keys[n:] = np.where(of >= 0, keys[np.maximum(of, 0)], balance.bars << KEY_SHIFT)
        owners[n:] = np.where(of >= 0, owners[np.maximum(of, 0)], -1)
        moves[n:, 0] = balance.amounts
    return keys, owners, moments, moves


def _keys(
    bars: BarPrices, bar: np.ndarray, ns: list | None, price: np.ndarray, buy: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """The key of each deal of one symbol (its bar, UTC time or None, or None for all, price in points, buy,
    end of test):
    on a bar of its own four prices found for all such deals at once (``_legs``), on a bar of minutes or
    ticks one by one."""
    if not len(bar):
        return np.zeros(0, dtype=np.int64)
    at_open = np.ones(len(bar), dtype=bool) if ns is None else np.array([x is None for x in ns], dtype=bool)
    # The end of the test closes at the last bar's close, after every price of the bar.
    keys = (bar << KEY_SHIFT) + np.where(end, LAST_RANK, 0)
    path = bars.path
    own = ~end if path is None else ~end & (path.starts[bar + 1] <= path.starts[bar])
    if own.any():
        m, t = bars.m, bar[own]
        opened = at_open[own] & (price[own] - np.where(buy[own], m.s_open[t], 0.0) == m.o[t])
        legs = _legs(bars.own(t), price[own] - np.where(buy[own], m.s[t], 0.0))
        keys[own] += np.where(opened, 0, legs)  # at the open: a decision, a gap
    for i in np.flatnonzero(~end & ~own):
        keys[i] = bars.key(int(bar[i]), None if ns is None else ns[i], float(price[i]), bool(buy[i]))
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
