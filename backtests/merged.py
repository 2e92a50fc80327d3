"""The minutes of several symbols' bars worked in time order, on one account (model "ohlc1m").

MetaTrader's tester feeds a multi-currency EA every symbol's prices in the order of their times, so a
stop-out or a pending order on one symbol sees the others' prices of that minute. Here each bar's minutes of
every symbol are merged by time (ties in the symbols' order); each broker works its own minutes as the
single-symbol walk does (``M1Path.minute``), and after each minute its price now is that minute's close
(``Broker.inside``), which the other symbols' equity, margin and conversions read. One symbol alone with
nothing open elsewhere keeps the single-symbol walk, which skips the minutes no level can be reached in.
"""

from __future__ import annotations

import numpy as np


def walk_bar(desks: list, t: int) -> None:
    """Bar ``t`` of every broker in ``desks`` after the decision (see the module docstring)."""
    busy = [d for d in desks if d.book and not _closed(d, t)]
    if not busy:
        return
    if len(busy) == 1 and not any(d.book.positions for d in desks if d is not busy[0]):
        busy[0].bar_range(t)
        return
    walking = [d for d in desks if not _closed(d, t) and d.price_path is not None and d.price_path.covers(t)]
    rows = []
    for k, d in enumerate(walking):
        path = d.price_path
        a, b = int(path.starts[t]), int(path.starts[t + 1])
        rows.append(np.column_stack((path.time_ns[a:b], np.full(b - a, k), np.arange(a, b))))
    for d in desks:
        if d not in walking and d.book and not _closed(d, t):
            d.bar_range(t)  # no minutes in this bar: its own high and low
    if not rows:
        return
    order = np.concatenate(rows)
    order = order[np.lexsort((order[:, 1], order[:, 0]))]
    for d in walking:
        d.walking = True
    try:
        for ns, k, m in order.tolist():
            for w in walking:  # one clock: a stop-out may close another symbol's position at this minute
                w.now_ns = ns
            d = walking[k]
            d.inside = d.price_path.minute(d, t, m)
    finally:
        for d in walking:
            d.walking = False
            d.now_ns = None
            d.inside = None


def _closed(desk, t: int) -> bool:
    closed = desk.market.closed
    return closed is not None and bool(closed[t])
