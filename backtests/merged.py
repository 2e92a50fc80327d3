"""The minutes of several symbols' bars worked in time order, on one account (model "ohlc1m").

MetaTrader's tester feeds a multi-currency EA every symbol's prices in the order of their times, so a
stop-out or a pending order on one symbol sees the others' prices of that minute. Here each broker works
its own minutes as the single-symbol walk does (``M1Path.minute``), the symbols' minutes taken in time order
(ties in the symbols' order), and each broker's price now (``Broker.inside``), which the other symbols'
equity, margin and conversions read, is the price it stood at when the minute being worked began: the open
of its own minute of that time where it has one, else the close of its newest minute before it. A minute's
path is worked whole, so the others never stand at a price later in that minute (its close comes up to 59
seconds after the moment being worked): a symbol's minute that has already been worked at the same time
reads as its open again until the clock moves on. The EA decides at the main symbol's first minute of the
bar: the other symbols' minutes before that moment are worked first (``to_decision``), and one whose first
minute comes later stands at its close before the bar until then (``open_quotes``); one that has had no
minute at all yet has no quote (``NO_QUOTE``: the EA sees none and a request on it is refused, 10021).
Each symbol's opening checks of the bar (``Broker.open_checks``: expiries, the gaps to its pending orders
and stops, the stop-out; the rollover's swap is charged to every symbol before any of them, at the account's
first price of the new day, ``multi_replay.rollover``) are worked in that same time order, each at its own
first minute of the bar before that minute's path (the tester checks a pending order or SL/TP on its own
symbol's prices, at the moment they come: MetaTrader 5 Help, "Testing Features: Order Triggering and
Execution"), so
a minute of 02:02 never sees a position that another symbol's gap fills at 02:03, nor that symbol's open of
02:03. A symbol whose first minute comes after the decision has its opening at the decision, at its close
before the bar, and one holding something with no minute in the bar at the bar's opening time, by the
open-prices rules, before any minute. The account has one clock (MetaTrader's ``TimeCurrent``, the newest
price time of any symbol): the EA's decision, its requests on any symbol and their records are at the
decision's minute, the range of a symbol without minutes in the bar (worked by the open-prices rules after
the decision, which did not see it) is stamped there too, and a stop-out at a minute closes every symbol's
positions at that minute's time.

Walking every minute of every symbol costs a Python step per minute, so a bar is walked that way only where
the account's stop-out may happen in it: the equity with every symbol at the worst of its minutes still to
come and of the close it stands at until the first of them at once (longs at the lowest bid, shorts at the
highest ask; that close may lie outside the bar's range, so the account's screen of the bar has no say) above
the stop-out level, with a tenth to spare for the conversions' moves, rules it out. Otherwise only the minutes
where a symbol's own pending prices, stops or expiries can be reached are worked (as the single-symbol walk
skips), still in time order, and the other symbols' prices are set to their price of that moment first, and
every opening is worked (its checks find what its gap reaches). A fill changes the account's margin and a
rollover's swap its equity, so after either the bound is taken again, and the rest of the bar is walked minute
by minute where it no longer holds. One symbol alone with nothing open elsewhere, and neither its profit nor
its margin converted through another symbol, keeps the single-symbol walk.
"""

from __future__ import annotations

import numpy as np

from backtests.bar_plan import BarPlan
from backtests.pair_moves import money_pairs, moved_by, priced_through, stepped

# The price of a symbol that has had no minute or tick yet (MetaTrader's tester has given it no quote): NaN,
# so that nothing is priced from its first one, which lies in the future; requests on it are refused
# (``backtests.context``).
NO_QUOTE = (float("nan"), float("nan"))
_SLACK = 1.1  # the stop-out is ruled out only with a tenth of the level to spare (conversions move too)


def open_quotes(desks: list, t: int, firsts: list, plan: BarPlan | None = None) -> list:
    """Bar ``t`` begins on the account: each symbol whose first minute of the bar comes after the main
    symbol's (the moment the EA decides) stands at the close of its newest minute before the bar until then,
    as MetaTrader's tester has given it no tick since: the EA's quotes, fills and the account's equity read
    that, never the bar's open, a price still to come. ``firsts`` (``Broker.enter``'s quotes) with those
    symbols' opening checks made at that close instead; their gap to the bar's open is met where their first
    minute is worked. ``plan``: the run's ``BarPlan`` (made here where not given)."""
    if desks[0].price_path is None:
        return firsts
    late = (plan or BarPlan(desks, "left")).late[t]
    if not late:
        return firsts
    firsts = list(firsts)
    for d in late:
        j = desks.index(d)
        own = d.price_path
        a = own.starts[t]
        if a == 0:  # no minute yet at all: no quote until its first
            d.inside = NO_QUOTE
            firsts[j] = (*NO_QUOTE, *NO_QUOTE)
            continue
        close, spread = own.points[a - 1, 3], own.spread[a - 1]
        d.inside = (close, close + spread)
        firsts[j] = (close, close, close, spread)
    return firsts


def to_decision(desks: list, t: int, plan: BarPlan | None = None, firsts: list | None = None) -> None:
    """Bar ``t`` up to the EA's decision (the main symbol's first minute of the bar), every symbol having
    entered it and the late ones standing at their close before the bar (``open_quotes``, whose quotes
    ``firsts`` are): each symbol's opening checks (``Broker.open_checks``) and the other symbols' minutes
    before the decision worked in one time order (ties in the symbols' order, an opening before its own
    minute of that time): a symbol's opening at its first minute of the bar, at the decision where that comes
    later, and a symbol holding something with no minute in the bar at the bar's opening time, before any
    minute (``_open_idle``). Each symbol then stands at its price of the decision's moment (``_set_now``:
    the open of its minute of that time, else the close of its minute before). ``plan``: the run's
    ``BarPlan`` (made here where not given)."""
    plan = plan or BarPlan(desks, "left")
    walking = plan.walking[t]
    firsts = firsts if firsts is not None else [None] * len(desks)
    kept = [d.inside for d in walking]
    idle = [d for d in desks if d.book and d not in walking and not closed_at(d, t)]
    if idle:
        _open_idle(idle, walking, t, [firsts[desks.index(d)] for d in idle])
    starts, now = plan.starts, plan.decision[t]
    spans = [(starts[d][t], starts[d][t + 1]) for d in walking]
    ends = [plan.at[d][t] for d in walking]
    if any(d.book for d in walking):
        opens = [
            _Opening(min(int(d.price_path.time_ns[a]), now), firsts[desks.index(d)], price)
            for d, (a, _), price in zip(walking, spans, kept, strict=True)
        ]
        if all(e == a for e, (a, _) in zip(ends, spans, strict=True)):
            # Openings alone, every one at the decision's moment (no minute comes before it): in the
            # symbols' order, each symbol standing as it does at the decision, on the decision's clock.
            for d in desks:
                d.now_ns = now
            for d, opening in zip(walking, opens, strict=True):
                opening.make(d, t)
        else:
            _run(walking, t, [a for a, _ in spans], ends, opens)
    for d, span, e, price in zip(walking, spans, ends, kept, strict=True):
        if e > span[0] and d is not desks[0]:
            _set_now(d, span, e, now)
        else:  # its bar begins at the decision or later: as it stood at the bar's opening (``open_quotes``)
            d.inside = price
    for d in desks:  # one server clock: the decision's moment, after every minute worked before it
        d.now_ns = now


class _Opening:
    """A symbol's opening checks still to be made in a walk: at UTC ``ns`` with ``Broker.open_checks``'s
    ``first`` (None: its bar's own open, its first minute's), standing at ``inside`` (``open_quotes``)."""

    def __init__(self, ns: int, first: tuple | None, inside: tuple | None):
        self.ns, self.first, self.inside = ns, first, inside

    def make(self, desk, t: int) -> None:
        """The checks themselves, at this opening's moment."""
        desk.inside, desk.now_ns = self.inside, self.ns
        desk.open_checks(t, self.first)


def _open_idle(idle: list, walking: list, t: int, firsts: list) -> None:
    """The opening checks of the symbols holding something with no minute of their own in bar ``t``, by
    the open-prices rules at the bar's opening time, before any minute: every other symbol stands at its
    price of that moment (``_set_now``), never a later one (the account's screen of the bar does not bound
    it); then each stands again as it did at the bar's opening (``open_quotes``)."""
    ns = int(idle[0].price_path.edges_ns[t])
    kept = [d.inside for d in walking]
    for d in walking:
        span = (d.price_path.starts[t], d.price_path.starts[t + 1])
        _set_now(d, span, int(span[0]), ns)
    funds = idle[0].funds
    funds.screening = False
    try:
        for d, first in zip(idle, firsts, strict=True):
            d.open_checks(t, first)
    finally:
        funds.screening = True
        for d, price in zip(walking, kept, strict=True):
            d.inside, d.now_ns = price, None


def walk_bar(desks: list, t: int, plan: BarPlan | None = None) -> None:
    """Bar ``t`` of every broker in ``desks`` after the decision (see the module docstring); every broker's
    price then reads its own bar again. ``plan``: the run's ``BarPlan`` (made here where not given)."""
    try:
        _walk_bar(desks, t, plan)
    finally:
        for d in desks:
            d.inside = None


def _walk_bar(desks: list, t: int, plan: BarPlan | None) -> None:
    busy = [d for d in desks if d.book and not closed_at(d, t)]
    if not busy:
        return
    if desks[0].price_path is None:
        for d in busy:
            d.bar_range(t)
        return
    plan = plan or BarPlan(desks, "left")
    walking = plan.walking[t]
    starts = plan.starts
    at = [plan.at[d][t] for d in walking]
    begun = any(a > starts[d][t] for d, a in zip(walking, at, strict=True))  # minutes worked before
    alone = busy[0]
    if (
        len(busy) == 1
        and not begun
        and not any(d.book.positions for d in desks if d is not alone)
        and not priced_through(alone)  # its deals read another symbol's price
    ):
        alone.inside = None  # its own minutes set its prices from its first on
        alone.bar_range(t)
        return
    for d in busy:
        if d not in walking:
            d.bar_range(t)  # no minutes in this bar: its own high and low
    if walking:
        _run(walking, t, at, [starts[d][t + 1] for d in walking])


def _run(walking: list, t: int, at: list, ends: list, opens: list | None = None) -> None:
    """Work ``walking``'s minutes ``at[j]..ends[j]-1`` in time order (see the module docstring), and where
    ``opens[j]`` is (an ``_Opening``), symbol ``j``'s opening checks at its moment, before its minutes."""
    for d in walking:
        d.walking = True
    try:
        _walk(walking, t, at, ends, opens or [None] * len(walking))
    finally:
        walking[0].funds.screening = True
        for d in walking:
            d.walking = False
            d.now_ns = None


def _walk(walking: list, t: int, at: list, ends: list, opens: list) -> None:
    paths = [d.price_path for d in walking]
    spans = [(int(p.starts[t]), end) for p, end in zip(paths, ends, strict=True)]
    at = list(at)  # each symbol's next minute not yet worked
    touches: list[int | None] = [None] * len(walking)  # each symbol's next minute that can reach a level
    found_at = [-1] * len(walking)  # the revision of its book each touch was found at
    funds = walking[0].funds
    others = [d for d in funds.desks if d not in walking]  # no minutes in the walk: on its clock too
    revision = None
    while True:
        # A fill or a close changes the margin, a rollover's swap at an opening the equity: the account's
        # revision counts both.
        now = funds.revision
        if now != revision:  # first, or the account changed
            revision = now
            if _stop_out_possible(walking, t, spans, at):
                _every_minute(walking, t, spans, at, opens)
                return
        key = None
        for j, d in enumerate(walking):
            if opens[j] is not None:  # its opening comes before any minute of its own
                if d.book and (key is None or (opens[j].ns, j) < key):
                    key = (opens[j].ns, j)
                continue
            end = spans[j][1]
            if touches[j] is None or found_at[j] != d.revision:  # its own levels are as they were
                m = at[j]
                # The stop-out is ruled out for the rest of the bar until something fills (see above).
                if m >= end:
                    touches[j] = end
                elif d.book:
                    touches[j] = paths[j].next_touch(d, m, end, False, t)
                else:  # nothing of its own: only a midnight stops it, the account's rollover (``midnights``)
                    touches[j] = paths[j].next_midnight(d, m, end)
                found_at[j] = d.revision
            m = touches[j]
            if m < end:
                mine = (int(paths[j].time_ns[m]), j)
                if key is None or mine < key:
                    key = mine
        if key is None:
            return  # no symbol can reach a level in the rest of the bar
        ns, k = key
        m = touches[k] if opens[k] is None else -1
        for d in others:
            d.now_ns = ns
        for j, d in enumerate(walking):  # every symbol at its price of this time
            if j == k:
                continue
            if opens[j] is not None and (opens[j].ns, j) < key:
                # passed: it held nothing to check, and its minutes before this time have passed too
                opens[j] = None
                at[j] = _before(paths[j], spans[j], ns)
            elif touches[j] is not None and at[j] < touches[j]:
                # its minutes before this time have passed (none reached one)
                at[j] = max(at[j], min(_before(paths[j], spans[j], ns), touches[j]))
            _set_now(d, spans[j], at[j], ns)
        d = walking[k]
        if m < 0:
            opens[k].make(d, t)
            opens[k] = None
        else:
            _set_now(d, spans[k], m, ns)
            d.inside = paths[k].minute(d, t, m)
            at[k] = m + 1
        touches[k] = None


def _every_minute(walking: list, t: int, spans: list, at: list, opens: list) -> None:
    """Every remaining minute of every symbol, in time order, each worked from its own open at its own
    spread (``_set_now``: a fill at that open, a stop gapped through, converts its profit there, as the
    screened walk does; never at the close and spread of the minute before), and each opening still to
    come, before its symbol's own minute of that time. A minute of a symbol that moves
    the money of another's positions (GBPUSD for EURGBP's pounds: ``money_pairs``) moves their equity: the
    account's stop-out is checked at each of its four prices, MetaTrader's ticks of a 1-minute OHLC minute,
    those positions standing at their prices then (``pair_moves.stepped``). Only the stop-out: their own
    price has not moved, and where their minute of that time was worked already it reads as that minute's
    open again (``_set_now``), a price the minute has passed: a stop-limit order that became a limit later
    in that minute must not fill there. Their pending orders and stops are checked by their own minutes."""
    # The bar's own range does not bound these prices: a symbol stands at its close before the bar until its
    # first minute of the bar, so the account's screen of the bar (``Account.ruled_out``) is off meanwhile.
    walking[0].funds.screening = False
    moved = [moved_by(walking, p) for p in walking]
    rows = [np.array([(o.ns, k, -1) for k, o in enumerate(opens) if o is not None], dtype=np.int64)]
    rows[0] = rows[0].reshape(-1, 3)
    for k, d in enumerate(walking):
        path, (_, b) = d.price_path, spans[k]
        a = at[k]
        rows.append(np.column_stack((path.time_ns[a:b], np.full(b - a, k), np.arange(a, b))))
    order = np.concatenate(rows)
    order = order[np.lexsort((order[:, 2], order[:, 1], order[:, 0]))]
    nxt = list(at)
    others = [d for d in walking[0].funds.desks if d not in walking]  # no minutes in the walk: its clock too
    for ns, k, m in order.tolist():
        for w in others:
            w.now_ns = ns
        for j, w in enumerate(walking):  # one clock: a stop-out may close another symbol's position now
            if j != k or m >= 0:  # its own minute too: at its open and spread
                _set_now(w, spans[j], m if j == k else nxt[j], ns)
        d = walking[k]
        if m < 0:
            opens[k].make(d, t)
            continue
        d.inside = d.price_path.minute(d, t, m)
        nxt[k] = m + 1
        for desk in moved[k]:
            if desk.book.positions and desk.inside is not None:
                path = d.price_path
                spread = float(path.spread[m])
                stepped(d, path.points[m].tolist(), (spread,) * 4, desk, t, book=False)


def _stop_out_possible(walking: list, t: int, spans: list, at: list) -> bool:
    """Whether the account's margin level may reach the stop-out level in the rest of the bar (see the
    module docstring): every symbol at its worst over its remaining minutes at once."""

    def extremes(k: int, desk) -> tuple[float, float] | None:
        # Its minutes still to come and the one before them: until its next minute a symbol stands at that
        # one's close (or its open again at the same time, ``_set_now``), the main symbol too while the
        # minutes before the decision pass, whatever its price at the decision (a price still to come).
        a, b = at[k], spans[k][1]
        if a >= b and a == 0:
            return None
        rows = slice(max(a - 1, 0), b)
        path = desk.price_path
        return float(path.lows[rows].min()), float(path.highs[rows].max() + path.spread[rows].max())

    # No account screen: its bars do not bound the close before the bar a symbol stands at until its first
    # minute of the bar (``extremes`` does)
    return stop_out_possible(walking, t, extremes, screen=False)


def stop_out_possible(walking: list, t: int, extremes, screen: bool) -> bool:
    """The bound both merged walks (minutes here, ticks in ``merged_ticks``) rule the stop-out out with:
    the equity with every symbol holding positions at the worst of the prices it may still stand at in bar
    ``t`` (``extremes(k, desk)``: the lowest bid and highest ask of ``walking[k]``, None for its price now),
    longs at the lowest bid and shorts at the highest ask at once, above the stop-out level with a tenth to
    spare; ``screen``: the account's own screen of the bar may answer first (its bars bound the prices)."""
    first = walking[0]
    funds = first.funds
    if funds.stop_out_level <= 0 or not first.stop_out_on or not funds.any_open():
        return False
    if screen and funds.ruled_out(t):  # the account's own screen of the bar: every check in it says no
        return False
    margin = funds.used_margin()
    if margin <= 0:
        return False
    worst = funds.balance + funds.swap  # the accrued swap is in the equity
    for desk in funds.desks:
        if not desk.book.positions:
            continue
        bounds = extremes(walking.index(desk), desk) if desk in walking else None
        if bounds is None:
            bounds = (desk.price_points(-1), desk.price_points(+1))
        reach = _pair_reach(walking, extremes, desk)
        worst += desk.money.floating(desk.book.positions, *bounds, reach)
    return worst <= _SLACK * funds.stop_out_level / 100.0 * margin


def _pair_reach(walking: list, extremes, desk) -> tuple[float, float] | None:
    """The lowest bid and highest ask (points) of the pair moving ``desk``'s money (``money_pairs``) in
    the rest of the bar: its price now and the prices still to come (it moves while ``desk``'s loss grows);
    None where its money needs no other symbol. Its margin's pair has no part: the margin was charged at
    the deal (``backtests.pair_moves``)."""
    pairs = money_pairs(desk)
    if not pairs:
        return None
    (pair,) = pairs
    low, high = pair.price_points(-1), pair.price_points(+1)
    bounds = extremes(walking.index(pair), pair) if pair in walking else None
    if bounds is not None:
        low, high = min(low, bounds[0]), max(high, bounds[1])
    return low, high


def _before(path, span: tuple[int, int], ns: int) -> int:
    """The first minute of ``span`` at or after UTC ``ns`` (its minutes before ``ns`` have passed; the
    one of ``ns`` itself has only opened)."""
    a, b = span
    return min(max(int(path.time_ns.searchsorted(ns, side="left")), a), b)


def _set_now(desk, span: tuple[int, int], nxt: int, ns: int) -> None:
    """``desk``'s clock at ``ns`` and its price now, ``nxt`` being its first minute not yet worked: the open
    of its minute of time ``ns`` (to come, or already worked at this same time), else the close of its
    newest minute before ``nxt`` (of an earlier bar where none of this one has come yet; see the module
    docstring)."""
    desk.now_ns = ns
    a, b = span
    path = desk.price_path
    if nxt < b and path.time_ns[nxt] == ns:
        row, col = nxt, 0
    elif nxt - 1 >= a and path.time_ns[nxt - 1] == ns:
        row, col = nxt - 1, 0
    elif nxt > 0:
        row, col = nxt - 1, 3
    else:  # no minute of it yet: no quote
        desk.inside = NO_QUOTE
        return
    price = path.points[row, col]
    desk.inside = (price, price + path.spread[row])


def closed_at(desk, t: int) -> bool:
    """Whether ``desk``'s symbol has no bar at ``t`` (``Market.close_gaps``)."""
    closed = desk.market.closed
    return closed is not None and bool(closed[t])
