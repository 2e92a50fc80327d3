"""The ticks of several symbols worked in time order on one account (model "ticks").

MetaTrader's tester in "Every tick based on real ticks" feeds a multi-currency EA every symbol's ticks
merged in time order: a tick moves its own symbol's bid and ask only, and every other symbol stands at its
last tick at or before that moment (MetaTrader 5 Help, "Strategy Tester > Multi-Currency Testing": the
ticks of the other symbols are synchronised by time). So here:

- the EA decides at the bar's open, the main symbol's first tick of the bar (the bar's opening price, as
  one symbol's tick walk and the other models open a bar); each other symbol's ticks of the bar up to that
  moment are worked first, in time order (``to_decision``), and it stands at its last tick at or before it,
  where market orders fill: its first tick of the bar, a later one, or, where its first comes after the
  decision, its last tick before the bar (``open_ticks``: the tick still to come is never read; it is
  worked after the decision, its gap included);
- after the decision the rest of every symbol's ticks of the bar are taken in time order (ties in the
  symbols' order), each worked by its own symbol's path as the single-symbol walk works it
  (``TickPath.tick``); before a tick at time ``x`` is worked, every other symbol is set to its last tick
  before ``x`` (at ``x`` itself only where that symbol comes earlier in the order, its tick of the same
  instant having been worked first). That may be a tick of an earlier bar when its bar's first tick comes
  after ``x``: a price of the future is never read. A symbol with no tick at all before ``x`` has no quote
  (MetaTrader's tester has given it none): its price is NaN (``NO_QUOTE``), the EA sees none, and a request
  on it or on a symbol it converts is refused with 10021 (``backtests.context``); its first tick is worked
  after the decision like any other.

Stop-outs, pending fills and their margin checks, SL/TP and the conversions of profit through another
symbol all read those prices. Walking every tick of every symbol costs a Python step per tick, so it is done
only where the account's stop-out may happen in the rest of the bar: the equity with every symbol at the
worst of the ticks it may stand at (longs at the lowest bid, shorts at the highest ask, its last tick before
the bar included) above the stop-out level with a tenth to spare for the conversions' moves rules it out.
Otherwise only the ticks at which a symbol's own pending prices, stops or expiries can be reached are
worked (the single-symbol walk's vectorised search, ``TickPath.next_touch``), still in time order, the
others set to their prices of that moment first; a fill changes the account's margin, so after one the
bound is taken again. One symbol alone with nothing open elsewhere and neither profit nor margin converted
through another symbol keeps the single-symbol walk.
"""

from __future__ import annotations

import numpy as np

from backtests.bar_plan import BarPlan
from backtests.merged import NO_QUOTE, closed_at, stop_out_possible
from backtests.pair_moves import checked_at_rates, moved_by, priced_through
from strategies.trade import Tick


def open_ticks(desks: list, t: int, firsts: list, plan: BarPlan | None = None) -> list:
    """Bar ``t`` begins on the account: a symbol whose first tick of the bar comes after the main symbol's
    (the moment the EA decides) stands at its last tick before the bar until then, as MetaTrader's tester
    has given it no newer tick: the EA's quotes, fills and the account's equity read that, never the tick
    still to come. ``firsts`` (``Broker.enter``'s quotes) with those symbols' opening checks made at that
    tick; their first tick of the bar is worked after the decision, its gap included. ``plan``: the run's
    ``BarPlan`` (made here where not given)."""
    plan = plan or BarPlan(desks, "right")
    late = plan.late[t]  # those whose first tick of the bar comes after the main symbol's
    if not late:
        return firsts
    firsts = list(firsts)
    for d in late:
        row = plan.at[d][t]
        j = desks.index(d)
        if row < 0:  # no tick yet at all: no quote until its first
            d.now, d.inside = None, NO_QUOTE
            firsts[j] = (*NO_QUOTE, *NO_QUOTE)
        else:  # its first tick of the bar comes later
            path = d.price_path
            d.now = _stood_at(path, row, plan.decision[t])
            bid = float(path.bid_points[row])  # a quote is in points, as ``TickPath.open_bar``'s
            firsts[j] = (bid, bid, bid, float(path.ask_points[row]) - bid)
    return firsts


def to_decision(desks: list, t: int, plan: BarPlan | None = None) -> None:
    """After the opening checks, before the EA decides: every other symbol's ticks of bar ``t`` up to the
    decision's moment (after its first, worked at the open) are worked in time order, so their fills, stops
    and stop-outs come before the decision as they did in time; then each symbol stands at its last tick at
    or before that moment (``Broker.now``), which the EA's quotes and fills read."""
    plan = plan or BarPlan(desks, "right")
    walking = plan.walking[t]
    rows = [plan.at[d][t] for d in walking]
    starts = plan.starts
    at = [starts[d][t] + 1 for d in walking]
    if any(a <= r for a, r in zip(at, rows, strict=True)) and any(d.book for d in walking):
        _run(walking, t, at, [r + 1 for r in rows])
    now = plan.decision[t]
    for d, row in zip(walking, rows, strict=True):
        d.now_ns = None
        if row < 0:  # no tick yet (``open_ticks``)
            d.now, d.inside = None, NO_QUOTE
        else:
            d.now, d.inside = _stood_at(d.price_path, row, now), None


def walk_ticks(desks: list, t: int, plan: BarPlan | None = None) -> None:
    """Bar ``t`` of every broker in ``desks`` after the decision (see the module docstring)."""
    busy = [d for d in desks if d.book and not closed_at(d, t)]
    if not busy:
        return
    plan = plan or BarPlan(desks, "right")
    walking = plan.walking[t]
    alone = busy[0]
    if (
        len(busy) == 1
        and not any(d.book.positions for d in desks if d is not alone)
        and not priced_through(alone)  # its deals read another symbol's price
        and (alone not in walking or plan.at[alone][t] == plan.starts[alone][t])
    ):
        alone.bar_range(t)  # its first tick was its opening, the rest are still to come
        return
    for d in busy:
        if d not in walking:
            d.bar_range(t)  # no ticks in this bar: its own high and low
    if any(d.book for d in walking):
        at = [plan.at[d][t] + 1 for d in walking]
        _run(walking, t, at, [plan.starts[d][t + 1] for d in walking])


def _stood_at(path, row: int, now: int) -> Tick:
    """The quote of ``path``'s tick ``row`` as it stands at UTC ``now`` (the decision's moment, at or after
    that tick): the prices of its last tick, the clock of the server now, which a request's time, its
    "today" and the orders' expiries read (MetaTrader's ``TimeCurrent``, the newest tick of any symbol)."""
    return Tick.at(now, float(path.bid[row]), float(path.ask[row]))


def _run(walking: list, t: int, at: list, ends: list) -> None:
    """Walk ``walking``'s ticks ``at[j]..ends[j]-1`` in time order (see the module docstring)."""
    for d in walking:
        d.walking = True
    try:
        _walk(walking, t, at, ends)
    finally:
        walking[0].funds.screening = True
        for d in walking:
            d.walking = False
            d.now = None
            d.now_ns = None
            d.inside = None


def _walk(walking: list, t: int, at: list, ends: list) -> None:
    paths = [d.price_path for d in walking]
    spans = [(int(p.starts[t]), end) for p, end in zip(paths, ends, strict=True)]
    touches: list[int | None] = [None] * len(walking)
    found_at = [-1] * len(walking)  # the revision of its book each touch was found at
    revision = None
    while True:
        now = sum(w.revision for w in walking)
        if now != revision:  # first, or something filled: the margin changed
            revision = now
            if _stop_out_possible(walking, t, spans):
                _every_tick(walking, t, spans, at)
                return
        key = None
        for j, d in enumerate(walking):
            end = spans[j][1]
            if touches[j] is None or found_at[j] != d.revision:  # its own levels are as they were
                a = at[j]
                touches[j] = paths[j].next_touch(d, t, a, end, False) if d.book and a < end else end
                found_at[j] = d.revision
            m = touches[j]
            if m < end:
                mine = (int(paths[j].ns[m]), j)
                if key is None or mine < key:
                    key = mine
        if key is None:
            return  # no symbol can reach a level in the rest of the bar
        ns, k = key
        m = touches[k]
        for j, d in enumerate(walking):
            if j != k:
                # its ticks before this moment have passed (none of them could reach a level)
                at[j] = max(at[j], _passed(paths[j], ns, j < k))
                _stand(d, j < k, ns)
        paths[k].tick(walking[k], t, m)
        at[k] = m + 1
        touches[k] = None


def _every_tick(walking: list, t: int, spans: list, at: list) -> None:
    """Every remaining tick of every symbol holding something or converting the profit of a symbol that
    does, in time order (ties: the symbols' order). A tick of a converting symbol moves the equity of the
    positions it converts (EURGBP's pounds at GBPUSD's price): the account's stop-out is checked there,
    those positions standing at their prices then, as MetaTrader checks the margin level at every tick."""
    funds = walking[0].funds
    funds.screening = False  # the bar's own range does not bound these prices (see the module docstring)
    moved = [moved_by(walking, p) for p in walking]
    rows = []
    for k, d in enumerate(walking):
        a, b = at[k], spans[k][1]
        if (d.book or moved[k]) and a < b:
            ns = d.price_path.ns[a:b]
            rows.append(np.column_stack((ns, np.full(b - a, k), np.arange(a, b))))
    if not rows:
        return
    order = np.concatenate(rows)
    order = order[np.lexsort((order[:, 1], order[:, 0]))]
    for ns, k, m in order.tolist():
        for j, d in enumerate(walking):  # one clock: a stop-out may close another symbol's position now
            if j != k:
                _stand(d, j < k, ns)
        walking[k].price_path.tick(walking[k], t, m)
        for d in moved[k]:
            if d.book.positions:  # at the price it stands at: only the conversion moved
                checked_at_rates(d, t, book=False)


def _stop_out_possible(walking: list, t: int, spans: list) -> bool:
    """Whether the account's margin level may reach the stop-out level in the rest of the bar (see the
    module docstring): every symbol at the worst of the ticks it may stand at, at once (its last tick
    before the bar too, which the bar's own range does not bound: no screen of the bar)."""

    def extremes(k: int, desk) -> tuple[float, float]:
        a = max(spans[k][0] - 1, 0)  # its last tick before the bar too
        path = desk.price_path
        low, high = float(path.bid_points[a]), float(path.ask_points[a])
        if path.reach is not None:  # the bar's lowest bid and highest ask, kept per bar
            return min(low, path.reach[0][t]), max(high, path.reach[3][t])
        b = spans[k][1]
        return min(low, float(path.bid_points[a:b].min())), max(high, float(path.ask_points[a:b].max()))

    return stop_out_possible(walking, t, extremes, screen=False)


def _passed(path, ns: int, same: bool) -> int:
    """The first row of ``path`` not passed at UTC ``ns``: those before ``ns`` have (and those at ``ns``
    where ``same``: the symbol comes first in the order, so its ticks of that instant were worked)."""
    return int(path.ns.searchsorted(ns, side="right" if same else "left"))


def _stand(desk, same: bool, ns: int) -> None:
    """``desk``'s clock at ``ns`` and its price: its last tick passed then (``_passed``; none, ``NO_QUOTE``,
    where none has), never a later one."""
    path = desk.price_path
    row = _passed(path, ns, same) - 1
    desk.now = None
    desk.now_ns = ns
    desk.inside = (float(path.bid_points[row]), float(path.ask_points[row])) if row >= 0 else NO_QUOTE
