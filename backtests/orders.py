"""Pending orders of the "open prices only" model: when a bar triggers them and at what price.

Prices in bars are bids; buy orders compare the ask (bid + the bar's spread), sell orders the bid.

Trigger rules, checked first against the bar's open, then against its range:
- stop orders (buy stop above the ask, sell stop below the bid) turn into market orders when the price
  reaches them: inside a bar they fill at their price; when the open gaps through the price they fill at
  the open, the worse price, as a market order would (MetaTrader fills a triggered stop at the market,
  with slippage on a gap);
- limit orders (buy limit below the ask, sell limit above the bid) fill at their price or better: inside a
  bar at their price; when the open gaps beyond it, at the open, the better price (MetaTrader executes a
  limit "at the price or better"; backtesting.py fills ``min(open, limit)`` for a buy in the same way);
- stop-limit orders place a limit order at their stop-limit price when the stop price is reached. Inside
  a bar the order of prices is unknown, so the new limit order is checked from the next bar on (an open
  gap through the stop price places it at the open, and that bar's range then counts);
- an order expires at the first bar opening at or after its expiration time ("today" = the next server
  midnight); it can still trigger inside the bars opening before that time.

The same bar's range is checked for an order placed at that bar's open (the decision is taken at the
open, before the range). The position a fill opens inside a bar has its SL checked in that bar too (for a
limit, the price went through the fill to reach the SL; for a stop it is the pessimistic assumption), and
its TP too after a stop fill (the price moved through the fill towards the TP), but not after a limit fill:
the bar's extreme on the TP side may have come before the fill, so the TP counts from the next bar.
"""

from __future__ import annotations

import pandas as pd

from strategies.trade import Order


class Pending:
    """A working pending order (mutable; the EA sees frozen ``Order`` copies)."""

    __slots__ = (
        "active_from",
        "comment",
        "expiration",
        "kind",
        "lots",
        "magic",
        "price",
        "record",
        "sl",
        "stoplimit",
        "ticket",
        "time_setup",
        "tp",
    )

    def __init__(self, ticket, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, t, record):
        self.ticket = ticket
        self.kind = kind
        self.lots = lots
        self.price = price
        self.stoplimit = stoplimit
        self.sl = sl
        self.tp = tp
        self.expiration = expiration
        self.magic = magic
        self.comment = comment
        self.time_setup = t
        self.active_from = t  # first bar whose prices may trigger it
        self.record = record  # its row of the orders table, updated when it is filled, cancelled or expires

    @property
    def side(self) -> int:
        return +1 if self.kind.startswith("buy") else -1

    def public(self, time: pd.DatetimeIndex) -> Order:
        ns = self.record.get("setup_ns")  # placed at a tick: its time, else the bar's
        return Order(
            self.ticket,
            self.kind,
            self.side,
            self.lots,
            self.price,
            self.stoplimit,
            self.sl,
            self.tp,
            self.expiration,
            time[self.time_setup] if ns is None else pd.Timestamp(ns, tz="UTC"),
            self.magic,
            self.comment,
        )

    def trigger(
        self, bid_open: float, bid_high: float, bid_low: float, spread: float, at_open: bool
    ) -> float | None:
        """The price this order's stop or limit is reached at in this bar (open or range), or None."""
        side, p = self.side, self.price
        o, h, lo = (
            (bid_open + spread, bid_high + spread, bid_low + spread)
            if side > 0
            else (bid_open, bid_high, bid_low)
        )
        stop = "stop" in self.kind
        if stop == (side > 0):  # buy stop (and buy stop-limit), sell limit: reached from below
            if at_open:
                return o if o >= p else None
            return p if h >= p else None
        if at_open:  # sell stop (and sell stop-limit), buy limit: reached from above
            return o if o <= p else None
        return p if lo <= p else None


class PendingRules:
    """Expiry and triggering of the broker's pending orders (a mix-in of ``Broker``)."""

    def expire(self, t: int, now: pd.Timestamp | None = None) -> None:
        now = self.time[t] if now is None else now
        for order in [o for o in self.pending_orders if o.expiration is not None and o.expiration <= now]:
            self._retire(order, "expired")

    def _trigger(self, t: int, at_open: bool) -> None:
        o, h, lo, spr = self.quote
        for order in list(self.pending_orders):
            if order.active_from > t:
                continue
            price = order.trigger(o, h, lo, spr, at_open)
            if price is None:
                continue
            if order.kind.endswith("stop_limit"):  # becomes a limit order at its stop-limit price
                order.kind = order.kind.replace("stop_limit", "limit")
                order.price, order.stoplimit = order.stoplimit, None
                order.active_from = t if at_open or self.walking else t + 1
                self.revision += 1
                continue
            self.pending_orders.remove(order)
            ticket = self._fill(
                order.side,
                order.lots,
                price,
                order.sl,
                order.tp,
                order.magic,
                order.comment,
                ticket=order.ticket,
                reason=order.kind,
            )
            if not (at_open or self.walking) and "limit" in order.kind and ticket is not None:
                # A limit reached inside the bar: the bar's extreme on the TP side may have come before the
                # fill, so its TP counts from the next bar (its SL, beyond the fill, was reached after it).
                for pos in self.open_positions:
                    if pos.ticket == ticket:
                        pos.tp_from = t + 1
            order.record.update(time_done=t, done_ns=self.stamp(), fill_price=price)
            order.record["state"] = "filled" if ticket is not None else "rejected"
            order.record["position"] = ticket

    def _retire(self, order, state: str) -> None:
        self.pending_orders.remove(order)
        self.revision += 1
        order.record.update(state=state, time_done=self.t, done_ns=self.stamp())

