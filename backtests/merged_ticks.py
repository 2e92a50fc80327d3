"""The ticks of several symbols worked in time order on one account (model "ticks").

MetaTrader's tester in "Every tick based on real ticks" feeds a multi-currency EA every symbol's ticks
merged in time order: a tick moves its own symbol's bid and ask only, and every other symbol stands at its
last tick at or before that moment (MetaTrader 5 Help, "Strategy Tester > Multi-Currency Testing": the
ticks of the other symbols are synchronised by time). So here:

- the EA decides at the bar's open, the main symbol's first tick of the bar (the bar's opening price, as one
  symbol's tick walk and the other models open a bar); before it, each symbol's opening checks of the bar
  (``Broker.open_checks``: expiries, the gaps to its pending orders and stops, the stop-out; the rollover's
  swap is charged to every symbol before any of them, ``multi_replay.rollover``) and the other symbols' ticks
  of the bar up to that moment are worked in one time order (``to_decision``): a symbol's opening at its first
  tick of the bar, before its own later ticks, the main symbol's at the decision. The tester generates one
  tick sequence per symbol and emulates the margin and trading conditions of all of them on the one account
  (MQL5 Book, "Multicurrency testing"); a pending order or SL/TP triggers on its own symbol's bid and ask and
  executes at the prices of the moment of triggering (MetaTrader 5 Help, "Testing Features: Order Triggering
  and Execution"). So a tick of 10:00:02 is checked against the account as it stood at 10:00:02: never a
  position that another symbol's gap fills at 10:00:03, nor the main symbol's open, nor a price of a later
  tick. A symbol whose first tick of the bar comes after the decision has its opening checks at the decision,
  at its last tick before the bar (the tick still to come is never read; it is worked after the decision, its
  gap included), and a symbol holding something with no tick in the bar at the bar's opening time, by the
  open-prices rules, before any tick (the tester generates ticks from a bar without real ones, MetaTrader 5
  Help, "Real and Generated Ticks": its open is its first, at the bar's time). At the decision each symbol
  stands at its last tick at or before it, where market orders fill, and the account has one clock there, the
  decision's (MetaTrader's ``TimeCurrent``), a symbol without a tick in the bar included: its requests are
  judged and stamped at that moment, and its range, worked by the open-prices rules after the decision (which
  did not see it), is stamped there too, never at the bar's opening time before it;
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
others set to their prices of that moment first, and every opening is worked (its checks find what its
gap reaches); a fill changes the account's margin and a rollover's swap its equity, so after either the
bound is taken again. One symbol alone with nothing open elsewhere and neither profit nor margin converted
through another symbol keeps the single-symbol walk.
"""

from __future__ import annotations

import bisect

import numpy as np

from backtests.bar_plan import BarPlan
from backtests.merged import NO_QUOTE, closed_at, stop_out_possible
from backtests.pair_moves import checked_at_rates, moved_by, priced_through
from strategies.trade import Tick

_NEVER = np.iinfo(np.int64).max  # the moment after a symbol's last tick


def to_decision(desks: list, t: int, plan: BarPlan | None = None) -> None:
    """Bar ``t`` up to the EA's decision (the main symbol's first tick of the bar), every symbol having
    entered it (``Broker.enter``): each symbol's opening checks and its ticks before the decision worked
    in one time order (see the module docstring), then each symbol stands at its last tick at or before
    that moment (``Broker.now``), which the EA's quotes and fills read. ``plan``: the run's ``BarPlan``
    (made here where not given)."""
    plan = plan or BarPlan(desks, "right")
    walking = plan.walking[t]
    now = plan.decision[t]
    opens = [(plan.opening[d][t], d.now) for d in walking]  # ``Broker.enter`` set its first tick
    idle = [d for d in desks if d.book and d not in walking and not closed_at(d, t)]
    if idle:
        _open_without_ticks(idle, walking, t)
    rows = [plan.at[d][t] for d in walking]
    if any(d.book for d in walking):
        starts = [plan.starts[d][t] for d in walking]
        at = [s + 1 for s in starts]  # its ticks after its first
        if all(r <= s for r, s in zip(rows, starts, strict=True)):
            # Openings alone, no other tick before the decision: each is worked and checked whole, as where
            # the stop-out is possible (no bound to take for so few; the prices are set below).
            try:
                clock = _Clock(walking, [s - 1 for s in starts])
                _every_tick(walking, t, [(s, s) for s in starts], at, opens, clock, plan)
            finally:
                walking[0].funds.screening = True
        else:
            _run(walking, t, at, [r + 1 for r in rows], plan, opens)
    for d, row in zip(walking, rows, strict=True):
        if row < 0:  # no tick yet at all: no quote until its first
            d.now, d.inside = None, NO_QUOTE
        else:
            d.now, d.inside = _stood_at(d.price_path, row, now), None
    for d in desks:  # one server clock: a symbol without a tick of its own yet is at the decision too
        d.now_ns = now


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
        _run(walking, t, at, [plan.starts[d][t + 1] for d in walking], plan)


def _stood_at(path, row: int, now: int) -> Tick:
    """The quote of ``path``'s tick ``row`` as it stands at UTC ``now`` (the decision's moment, at or after
    that tick): the prices of its last tick, the clock of the server now, which a request's time, its
    "today" and the orders' expiries read (MetaTrader's ``TimeCurrent``, the newest tick of any symbol)."""
    return Tick.at(now, float(path.bid[row]), float(path.ask[row]))


def _run(walking: list, t: int, at: list, ends: list, plan: BarPlan, opens: list | None = None) -> None:
    """Walk ``walking``'s ticks ``at[j]..ends[j]-1`` in time order (see the module docstring), and where
    ``opens[j]`` is (a moment in UTC ns, its first tick of the bar), symbol ``j``'s opening checks there
    (``_open``), before its ticks."""
    for d in walking:
        d.walking = True
    try:
        _walk(walking, t, at, ends, plan, opens or [None] * len(walking))
    finally:
        walking[0].funds.screening = True
        for d in walking:
            d.walking = False
            d.now = None
            d.now_ns = None
            d.inside = None


def _walk(walking: list, t: int, at: list, ends: list, plan: BarPlan, opens: list) -> None:
    paths = [d.price_path for d in walking]
    spans = [(plan.starts[d][t], end) for d, end in zip(walking, ends, strict=True)]
    touches: list[int | None] = [None] * len(walking)
    found_at = [-1] * len(walking)  # the revision of its book each touch was found at
    funds = walking[0].funds
    clock = _Clock(
        walking, [a - 1 if o is None else s - 1 for a, o, (s, _) in zip(at, opens, spans, strict=True)]
    )
    state = None
    while True:
        # A fill or a close changes the margin, a rollover's swap at an opening the equity: the account's
        # revision counts both.
        now = funds.revision
        if now != state:  # first, or the account changed
            state = now
            if _bound(walking, t, spans, plan):
                _every_tick(walking, t, spans, at, opens, clock, plan)
                return
        key = None
        for j, d in enumerate(walking):
            if opens[j] is not None:  # its opening comes before any tick of its own
                if d.book and (key is None or (opens[j][0], j) < key):
                    key = (opens[j][0], j)
                continue
            end = spans[j][1]
            if touches[j] is None or found_at[j] != d.revision:  # its own levels are as they were
                a = at[j]
                if a >= end:
                    touches[j] = end
                elif d.book:
                    touches[j] = paths[j].next_touch(d, t, a, end, False)
                else:  # nothing of its own: only a midnight stops it, the account's rollover (``midnights``)
                    touches[j] = paths[j].next_midnight(d, a, end)
                found_at[j] = d.revision
            m = touches[j]
            if m < end:
                mine = (int(paths[j].ns[m]), j)
                if key is None or mine < key:
                    key = mine
        if key is None:
            return  # no symbol can reach a level in the rest of the bar
        ns, k = key
        clock.stand(k, ns)
        for j in range(len(walking)):
            if j != k:
                # its ticks before this moment have passed (none of them could reach a level), and its
                # opening where it had nothing to check
                at[j] = max(at[j], clock.rows[j] + 1)
                if opens[j] is not None and (opens[j][0], j) < key:
                    opens[j] = None
        if opens[k] is not None:
            clock.worked(k, _open(walking[k], t, *opens[k]))
            opens[k] = None
        else:
            m = touches[k]
            paths[k].tick(walking[k], t, m)
            clock.worked(k, m)
            at[k] = m + 1
        touches[k] = None


def _every_tick(
    walking: list, t: int, spans: list, at: list, opens: list, clock: _Clock, plan: BarPlan
) -> None:
    """Every remaining tick of every symbol holding something or converting the profit of a symbol that
    does, in time order (ties: the symbols' order), each one's opening first where still to come. A tick
    of a converting symbol moves the equity of the positions it converts (EURGBP's pounds at GBPUSD's
    price): the account's stop-out is checked there, those positions standing at their prices then, as
    MetaTrader checks the margin level at every tick."""
    funds = walking[0].funds
    funds.screening = False  # the bar's own range does not bound these prices (see the module docstring)
    moved = [moved_by(walking, p) for p in walking] if plan.converted else [()] * len(walking)
    openings = []  # row -1: an opening, before its symbol's own ticks of that instant
    rows = []
    for k, d in enumerate(walking):
        if not (d.book or moved[k]):  # nothing of its own: only its midnights, the account's rollover
            marks = _midnights(d, at[k], spans[k][1])
            if marks:
                rows.append(np.column_stack((d.price_path.ns[marks], np.full(len(marks), k), marks)))
            continue
        if opens[k] is not None:
            openings.append((opens[k][0], k, -1))
        a, b = at[k], spans[k][1]
        if a < b:
            ns = d.price_path.ns[a:b]
            rows.append(np.column_stack((ns, np.full(b - a, k), np.arange(a, b))))
    if rows:
        order = np.concatenate([np.array(openings, dtype=np.int64).reshape(-1, 3), *rows])
        events = order[np.lexsort((order[:, 2], order[:, 1], order[:, 0]))].tolist()
    else:
        events = sorted(openings)
    for ns, k, m in events:
        clock.stand(k, ns)  # one clock: a stop-out may close another symbol's position now
        if m < 0:
            m = _open(walking[k], t, *opens[k])
        else:
            walking[k].price_path.tick(walking[k], t, m)
        clock.worked(k, m)
        for d in moved[k]:
            if d.book.positions:  # at the price it stands at: only the conversion moved
                checked_at_rates(d, t, book=False)


def _open(desk, t: int, ns: int, first: Tick) -> int:
    """``desk``'s opening checks of bar ``t`` (``Broker.open_checks``: expiries, the gaps to its pending
    orders and stops, the stop-out) at UTC ``ns``: at ``first``, its first tick of the
    bar, or at the decision's moment where that tick comes later (it stands then at its last tick before
    the bar, or has no quote; its first tick is worked after the decision, its gap included). Returns the
    tick it stands at."""
    path = desk.price_path
    s = path.starts[t]
    desk.now_ns, desk.inside = None, None
    if first[0] <= ns:
        row = s
        desk.now = first
    elif s > 0:
        row = s - 1
        desk.now = _stood_at(path, row, ns)
    else:
        desk.now, desk.inside = None, NO_QUOTE
        desk.open_checks(t, (*NO_QUOTE, *NO_QUOTE))
        return -1
    bid = float(path.bid_points[row])  # a quote is in points, as ``TickPath.open_bar``'s
    desk.open_checks(t, (bid, bid, bid, float(path.ask_points[row]) - bid))
    return row


def _open_without_ticks(idle: list, walking: list, t: int) -> None:
    """The opening checks of the symbols holding something with no tick of their own in bar ``t``, by
    the open-prices rules at its opening time, before any tick of the bar: every other symbol stands at
    its last tick before it (the account's screen of the bar does not bound that price)."""
    _Clock(walking).stand(-1, int(idle[0].price_path.edges_ns[t]))
    funds = idle[0].funds
    funds.screening = False
    try:
        for d in idle:
            d.open_checks(t, None)
    finally:
        funds.screening = True


def _bound(walking: list, t: int, spans: list, plan: BarPlan) -> bool:
    """``_stop_out_possible``, asked once per bar and state of the account (``Account.revision``): with
    every symbol's bar screened (``TickPath.reach``) it reads the whole bar and the tick before it whatever
    part of the bar is left, so the walk after the decision takes the answer of the walk before it where
    the EA's decision changed nothing."""
    key = (t, walking[0].funds.revision)
    held = plan.stop_out
    if held is not None and held[0] == key:
        return held[1]
    answer = _stop_out_possible(walking, t, spans)
    if all(d.price_path.reach is not None for d in walking):
        plan.stop_out = (key, answer)
    return answer


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


def _midnights(desk, a: int, b: int) -> list[int]:
    """``desk``'s rows ``a..b-1`` that open a new server day inside their bar (``Broker.midnights``)."""
    rows = desk.midnight_rows
    return rows[bisect.bisect_left(rows, a) : bisect.bisect_left(rows, b)]


def _passed(path, ns: int, same: bool) -> int:
    """The first row of ``path`` not passed at UTC ``ns``: those before ``ns`` have (and those at ``ns``
    where ``same``: the symbol comes first in the order, so its ticks of that instant were worked)."""
    return int(path.ns.searchsorted(ns, side="right" if same else "left"))


class _Clock:
    """The one clock of a walk over ``walking``: before symbol ``k``'s tick or opening at UTC ``ns`` is
    worked, every other symbol stands at its last tick passed then (``_passed``; none, ``NO_QUOTE``, where
    none has), never a later one. ``rows``: the tick each stands at to begin with (before the walk's first
    tick or opening of it). A symbol's tick is searched again only once the clock reaches its next tick
    (the clock only moves forward), and its price set again after a tick or an opening of its own."""

    def __init__(self, walking: list, rows: list | None = None):
        self.walking = walking
        # The account's symbols without ticks in the walk: on the same clock (a stop-out may close their
        # positions), at the prices they stand at
        self.others = [d for d in walking[0].funds.desks if d not in walking]
        n = len(walking)
        self.rows = list(rows) if rows is not None else [-1] * n  # the tick each symbol stands at
        # The moment of its next tick, from which it is searched again (-1: search now; -2: not yet known)
        self.until = [-1] * n if rows is None else [-2] * n
        self.placed = [False] * n  # whether its price is the one of ``rows``

    def worked(self, k: int, row: int) -> None:
        """``walking[k]``'s own tick or opening was worked: it stands at ``row`` (its price is to be set
        again: the tick set it, with the tick's own time)."""
        self.rows[k] = row
        self._next(k)
        self.placed[k] = False

    def _next(self, j: int) -> None:
        ns = self.walking[j].price_path.ns
        row = self.rows[j] + 1
        self.until[j] = int(ns[row]) if row < len(ns) else _NEVER

    def stand(self, k: int, ns: int) -> None:
        """Every symbol but ``walking[k]`` at ``ns`` (those before it in the order at their ticks of ``ns``
        too: the ticks of one instant are worked in the symbols' order)."""
        rows, until, placed = self.rows, self.until, self.placed
        for desk in self.others:
            desk.now_ns = ns
        for j, desk in enumerate(self.walking):
            if j == k:
                continue
            if until[j] == -2:
                self._next(j)
            if ns < until[j]:  # no tick of its own passed since: it stands where it stood
                if placed[j]:
                    desk.now_ns = ns
                    continue
            else:
                rows[j] = _passed(desk.price_path, ns, j < k) - 1
                self._next(j)
            placed[j] = True
            path, row = desk.price_path, rows[j]
            desk.now = None
            desk.now_ns = ns
            desk.inside = (float(path.bid_points[row]), float(path.ask_points[row])) if row >= 0 else NO_QUOTE
