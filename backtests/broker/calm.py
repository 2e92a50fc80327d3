"""Quiet bars: where nothing an order book holds can be reached, so the open-prices replay skips its checks.

With positions open and no pending order, a bar of "open prices only" changes nothing unless its open or
range reaches a stop-loss, a take-profit or the stop-out level (``backtests.broker.book`` and
``Account.level_crossed`` say how each is reached). Each is a bound on the bid or on the ask: a long's SL
on the lowest bid, its TP on the highest, a short's SL on the highest ask, its TP on the lowest; the
stop-out on one of them too (``Account.calm_bounds``). Gathered once per state of the book, the balance and
the bars, the four bounds are first compared with the extremes of all the bars left at once
(``Extremes.tails``: a stop-out level or a stop far beyond the rest of the history rules every bar out), then
with every bar's extremes (``Market.extremes``) a block of bars at a time in NumPy, which gives the first
bar that may reach one; each bar before it then costs one comparison.

The screen only ever rules checks out: a bar it does not pass is checked as before, so a take-profit that
counts from a later bar (``tp_from``) or a bound met by the slack alone costs a check and nothing else.
Pending orders and a price path (ohlc1m, ticks) are never screened: they are checked at every bar as before.
The open-prices replay asks for the quiet bars ahead once a bar is checked (``Calm.span``) and, while nothing
changes, passes them without the broker's bar events at all; a swap's rollover ends such a span.

The stop-out of several symbols or of a converted profit (the general form, where the level depends on every
symbol's price at once) has no bound on one symbol's prices: there a bar is quiet only where its own stops
are out of reach and the account's screen of the bar (``Account.ruled_out``: every symbol at the worst of its
bar at once, with a tenth of the level to spare) rules the stop-out out. That screen is asked once per bar
and account whatever the number of symbols (its answer is kept until a book or the balance changes), so a
multi-symbol bar far from its stops costs a comparison per symbol instead of every check of every symbol.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from backtests.broker.market import TAIL

if TYPE_CHECKING:
    from backtests.broker.core import Broker

_PROBES = 8  # bars looked at one by one after a change: a state that lasts a few bars costs no search
_FIRST_BLOCK = 16  # bars searched after them; each quiet block is followed by a larger one
_LARGEST_BLOCK = 4096


class Span(NamedTuple):
    """The bars after a checked one that need no check while the broker's ``state`` stays as it is: up to
    (not including) bar ``end``."""

    end: int
    state: int


class Calm:
    """The bars of one broker where its checks can be skipped (see the module docstring)."""

    __slots__ = ("_block", "_book", "_bounds", "_funds", "_general", "_key", "_loud", "_market", "_probes",
                 "_start", "_until", "broker")  # fmt: skip

    def __init__(self, broker: Broker):
        self.broker = broker
        self._book, self._funds, self._market = broker.book, broker.funds, broker.market
        # The state the bounds hold for: the sum of the counters of every change of the book, the orders and
        # stops, the balance (in the closed form, whose bounds it moves) and the bars (each only grows, so
        # the sum moves whenever one does)
        self._key = -1
        self._bounds: tuple[float, float, float, float] | None = None  # None: never quiet in this state
        self._general = False  # the stop-out in the general form: each bar also needs the account's screen
        self._start = 0  # the first bar the bounds were screened from
        self._until = 0  # the bars from ``_start`` up to here are quiet in this state
        self._loud = -1  # the bar the last search stopped at: it may reach a bound
        self._block = _FIRST_BLOCK
        self._probes = _PROBES

    def holds(self, t: int) -> bool:
        """Whether bar ``t`` (open and range) reaches nothing of the book as it stands."""
        funds = self._funds
        key = self._book.changes + self.broker.revision + self._market.changes
        if funds.closed_form:  # the stop-out's bounds move with the balance; the general form asks per bar
            key += funds.changes
        if key == self._key and self._start <= t < self._until:
            # a quiet bar of the state screened already, asked at its open and at its range (in the general
            # form the account's screen still rules the stop-out out bar by bar)
            return not self._general or funds.ruled_out(t)
        if key != self._key or t < self._start:
            self._key, self._start, self._until, self._loud = key, t, t, -1
            self._block, self._probes = _FIRST_BLOCK, _PROBES
            self._bounds = self._gather()
            if self._bounds is not None:
                self._reach(t)
        if self._general and not funds.ruled_out(t):
            return False
        if t < self._until:
            return True
        if self._bounds is None or t == self._loud:
            return False
        return self._screen(t)

    def state(self) -> int:
        """A number that moves whenever the book, the orders and stops, the balance or the bars change (the
        sum of their counters, each of which only grows): ``span``'s quiet bars hold while it stays."""
        b = self.broker
        return b.book.changes + b.revision + self._market.changes + self._funds.changes

    def span(self, t: int) -> Span:
        """The ``Span`` after bar ``t``'s checks: while ``state()`` stays ``state``, the open and range
        of every bar after ``t`` and before ``end`` need no check at all (``bar_open`` and ``bar_range``
        would only move the clock), so the replay moves the clock itself. ``end`` is ``t`` where that
        cannot be told: a price path, bars with gaps (``Market.closed``), the general form of the stop-out
        (asked bar by bar), a bar not screened quiet in this state. A swap's rollover ends the span: its
        bar's open books the swap."""
        b, market, book, funds = self.broker, self._market, self._book, self._funds
        key = book.changes + b.revision + market.changes + funds.changes  # ``state``, inline: per change
        if b.price_path is not None or market.closed is not None or b.now is not None or b.now_ns is not None:
            return Span(t, key)
        if not (book.positions or book.orders):  # nothing to check until something is opened or placed
            return Span(len(market.day), key)
        mine = key if funds.closed_form else key - funds.changes
        if mine != self._key or self._bounds is None or self._general or not self._start <= t < self._until:
            return Span(t, key)
        end = self._until
        if b.swaps.active:  # the first bar of the next server day opens with a rollover
            day = market.day
            end = min(end, int(np.searchsorted(day, day[t], side="right")))
        return Span(end, key)

    def _gather(self) -> tuple[float, float, float, float] | None:
        """``(bid_low, bid_high, ask_low, ask_high)``: a bar is quiet while its bids stay strictly between
        the first two and its asks between the last two; None where the screen does not apply."""
        b, book = self.broker, self._book
        self._general = False
        if book.orders or b.price_path is not None:
            return None
        inf = math.inf
        bid_low, bid_high, ask_low, ask_high = -inf, inf, -inf, inf
        positions = book.positions
        for p in positions:
            sl, tp = p.sl, p.tp
            if p.side > 0:  # a long leaves at the bid: its SL below, its TP above
                if sl is not None and sl > bid_low:
                    bid_low = sl
                if tp is not None and tp < bid_high:
                    bid_high = tp
            else:  # a short leaves at the ask: its SL above, its TP below
                if sl is not None and sl < ask_high:
                    ask_high = sl
                if tp is not None and tp > ask_low:
                    ask_low = tp
        if b.stop_out_on and positions:
            funds = self._funds
            if not funds.closed_form:
                self._general = True  # the account's screen rules the stop-out out bar by bar (``holds``)
                return bid_low, bid_high, ask_low, ask_high
            bounds = funds.calm_bounds(self._market.extremes().widest)
            if bounds is None:
                return None
            low, high, ask = bounds  # the nearer of each pair (``max``/``min``, without their calls)
            if low > bid_low:
                bid_low = low
            if high < bid_high:
                bid_high = high
            if ask < ask_high:
                ask_high = ask
        return bid_low, bid_high, ask_low, ask_high

    def _reach(self, t: int) -> None:
        """Every bar from ``t`` to the last is quiet where the extremes of all of them at once reach no bound
        (``Extremes.tails``): the levels lie beyond anything the rest of the history reaches."""
        ext = self._market.extremes()
        step = t // TAIL
        if step < len(ext.tails):
            bid_low, bid_high, ask_low, ask_high = self._bounds
            lowest, highest, lowest_ask, highest_ask = ext.tails[step]
            if lowest > bid_low and highest < bid_high and lowest_ask > ask_low and highest_ask < ask_high:
                self._until = len(ext.bid_low)

    def _screen(self, t: int) -> bool:
        """Search the next block of bars from ``t`` for the first one that may reach a bound (the first few
        bars of a state one at a time)."""
        ext = self._market.extremes()
        if self._probes and t < len(ext.bid_low):
            self._probes -= 1
            bid_low, bid_high, ask_low, ask_high = self._bounds
            if (
                ext.bid_low[t] > bid_low
                and ext.bid_high[t] < bid_high
                and ext.ask_low[t] > ask_low
                and ext.ask_high[t] < ask_high
            ):
                self._until = t + 1
                return True
            self._loud = t
            return False
        n = len(ext.bid_low)
        end = min(n, t + self._block)
        if end <= t:
            return False
        bid_low, bid_high, ask_low, ask_high = self._bounds
        loud = None
        for values, bound, below in (
            (ext.bid_low, bid_low, True),
            (ext.bid_high, bid_high, False),
            (ext.ask_low, ask_low, True),
            (ext.ask_high, ask_high, False),
        ):
            if math.isinf(bound):
                continue
            part = values[t:end]
            hit = part <= bound if below else part >= bound
            loud = hit if loud is None else loud | hit
        if loud is None:  # no bound at all: quiet to the last bar
            self._until = n
            return True
        first = int(np.argmax(loud)) if loud.any() else end - t
        self._until = t + first
        if first == end - t:
            self._block = min(_LARGEST_BLOCK, 4 * self._block)
        else:
            self._loud, self._block = t + first, _FIRST_BLOCK
        return first > 0
