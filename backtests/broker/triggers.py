"""Pending orders reached by a quote, filled as the trade server fills them (the broker's ``quote``: a bar's
open, its range, or a stretch of a price path).

A stop-limit order becomes its limit order where its stop price is reached; any other order is filled at
the price its trigger gives (``Pending.trigger``) with the free margin valued at the market of that moment,
and its record follows it (filled, or rejected where the margin refuses the deal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backtests.broker.core import Broker


def fill_reached(broker: Broker, t: int, at_open: bool) -> None:
    """Fill the pending orders the quote reaches (a stop-limit order becomes its limit order)."""
    for order, price in broker.book.reached_orders(broker.quote, t, at_open):
        if order.type.trigger == "stop_limit":  # becomes a limit order at its stop-limit price
            order.become_limit(t if at_open or broker.walking else t + 1)
            broker.revision += 1
            continue
        broker.book.orders.remove(order)
        # The market at the fill, which its free margin check values the open positions at: the price
        # jumped to at an open, else the order's own price inside the range (never the bar's open).
        bid = broker.quote[0] if at_open else price - broker.quote[3] if order.side > 0 else price
        outside, broker.inside = broker.inside, (bid, bid + broker.quote[3])
        try:
            ticket = broker.fill(order.side, order.lots, price, order.sl, order.tp, order.magic,
                               order.comment, ticket=order.ticket, reason=order.kind)  # fmt: skip
        finally:
            broker.inside = outside
        if not (at_open or broker.walking) and order.type.trigger == "limit" and ticket is not None:
            # A limit reached inside the bar: the bar's extreme on the TP side may have come before the
            # fill, so its TP counts from the next bar (its SL, beyond the fill, was reached after it).
            for pos in broker.book.positions:
                if pos.ticket == ticket:
                    pos.tp_from = t + 1
        if ticket is not None and not at_open:
            _passed_at_fill(broker, ticket, price, order.side)
        record = order.record
        record.bar_done, record.done_ns, record.fill_price = t, broker.stamp(), price / broker.scale
        record.state = "filled" if ticket is not None else "rejected"
        record.position = ticket


def _passed_at_fill(broker: Broker, ticket: int, price: float, side: int) -> None:
    """A position filled inside a stretch of prices whose stop-loss (or take-profit) the market had
    already passed at the fill (a sell limit whose SL lies nearer than the spread: the ask is beyond it
    the moment the bid reaches the limit) closes there at once at the market, as a triggered stop
    does, never at its level, which the market passed before the position existed."""
    pos = broker.book.position(ticket)
    if pos is None:
        return
    spread = broker.quote[3]
    bid = price - spread if side > 0 else price
    for hit, at, reason in broker.book.reached_stops((bid, bid, bid, spread), broker.t, gap_only=True):
        if hit is pos:
            broker.close_position(pos, pos.lots, at, reason)
