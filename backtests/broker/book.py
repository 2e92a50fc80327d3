"""One symbol's order book: its open positions and working pending orders, and what a price reaches of them.

Every price here is in whole points (``backtests.broker.market``), so a touch is an exact comparison of
integers; a netting position's average price alone may fall between points. Prices in bars are bids; buy
orders compare the ask (bid + spread), sell orders the bid. A long position closes at the bid, a short one
at the ask. What a quote (``open, high, low, spread`` of a bar or of one
stretch of a path) reaches:

- pending orders, checked first against the open, then against the range: stop orders (buy stop above the
  ask, sell stop below the bid) turn into market orders when the price reaches them: inside a range they
  fill at their price; when the open gaps through the price they fill at the open, the worse price, as a
  market order would (MetaTrader fills a triggered stop at the market, with slippage on a gap). Limit orders
  (buy limit below the ask, sell limit above the bid) fill at their price or better: inside a range at
  their price; when the open gaps beyond it, at the open, the better price (MetaTrader executes a limit "at
  the price or better"; backtesting.py fills ``min(open, limit)`` for a buy in the same way). Stop-limit
  orders place a limit order at their stop-limit price when the stop price is reached;
- stop-losses and take-profits: at the open a gap through the level fills at the open; inside the range a
  touch fills at the level, the stop-loss first when both lie inside one bar (pessimistic, as MetaTrader's
  tester and backtesting.py assume). A take-profit counts from ``tp_from`` on (a limit filled inside a bar
  may have seen the bar's extreme on the TP side before its fill).

The broker fills what these report; the book only knows its orders and positions.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from backtests.broker.records import OrderRecord
from strategies.trade import PENDING_TYPES, Order, OrderType, net_volume

Quote = tuple[float, float, float, float]  # (open, high, low, spread) of a bar or of one stretch of a path


class OpenPosition:
    """The broker's record of one open position (mutable: stops move, partial closes shrink it); the EA sees
    frozen ``strategies.trade.Position`` copies. Public so that a live account's ledger can hand the broker
    the positions a terminal still holds at the end of a report."""

    __slots__ = (
        "bar",
        "comment",
        "commission",
        "entry_ns",
        "lots",
        "magic",
        "margin_price",
        "night",
        "opened",
        "price",
        "seg",
        "side",
        "sl",
        "swap",
        "ticket",
        "tp",
        "tp_from",
    )

    def __init__(self, ticket, side, lots, price, bar, sl, tp, magic, comment, commission, margin_price=None):
        self.ticket = ticket
        self.side = side
        self.lots = lots
        self.price = price
        self.bar = bar
        self.sl = sl
        self.tp = tp
        self.magic = magic
        self.comment = comment
        self.commission = commission  # entry commission not yet attributed to a closed trade
        self.swap = 0.0
        self.seg = bar  # bar where the current floating segment began
        self.tp_from = bar  # first bar whose range may reach the TP (see the module docstring)
        self.entry_ns = None  # UTC ns of the minute or tick that filled it, None = the bar's open
        self.opened = None  # its opening time as a pd.Timestamp, made when an EA first asks
        # The server day whose midnight it has been charged up to (``Broker.held_since``): None until first
        # asked, then the day it was opened on; it owes the nights after it only
        self.night: int | None = None
        # The price its margin is charged at (``backtests.broker.margin``); None: its opening price
        self.margin_price = margin_price


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
        "type",
    )

    def __init__(self, ticket, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, t, record):
        self.ticket = ticket
        self.kind = kind
        self.type: OrderType = PENDING_TYPES[kind]
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
        self.record: OrderRecord = record  # its row of the orders table, kept up to date

    @property
    def side(self) -> int:
        return self.type.side

    def become_limit(self, active_from: int) -> None:
        """A stop-limit order's stop price was reached: it is now a limit order at its stop-limit price."""
        self.type = PENDING_TYPES[self.type.becomes]
        self.kind = self.type.name
        self.price, self.stoplimit = self.stoplimit, None
        self.active_from = active_from

    def public(self, time: pd.DatetimeIndex, scale: int, symbol: str = "") -> Order:
        """The EA's copy, prices in price units (``scale`` points to a unit)."""
        ns = self.record.setup_ns  # placed at a tick: its time, else the bar's
        return Order(
            self.ticket,
            self.kind,
            self.side,
            self.lots,
            self.price / scale,
            None if self.stoplimit is None else self.stoplimit / scale,
            None if self.sl is None else self.sl / scale,
            None if self.tp is None else self.tp / scale,
            self.expiration,
            time[self.time_setup] if ns is None else pd.Timestamp(ns, tz="UTC"),
            self.magic,
            self.comment,
            symbol,
        )

    def trigger(
        self, bid_open: float, bid_high: float, bid_low: float, spread: float, at_open: bool
    ) -> float | None:
        """The price this order's stop or limit is reached at in this bar (open or range), or None."""
        side, p = self.type.side, self.price
        o, h, lo = (
            (bid_open + spread, bid_high + spread, bid_low + spread)
            if side > 0
            else (bid_open, bid_high, bid_low)
        )
        if self.type.above:  # buy stop (and buy stop-limit), sell limit: reached from below
            if at_open:
                return o if o >= p else None
            return p if h >= p else None
        if at_open:  # sell stop (and sell stop-limit), buy limit: reached from above
            return o if o <= p else None
        return p if lo <= p else None


class OrderBook:
    """The open positions and working pending orders of one symbol (see the module docstring).

    ``changes`` counts every change of the positions' volumes and prices, so what is computed from them
    (the exposure, the margin) is cached until the next one; the account the book belongs to counts them
    too (``account``, set by ``Account.attach``: its ``revision``), so a screen of the whole account is
    known current with one comparison. The positions are indexed by ticket.
    """

    def __init__(self) -> None:
        self.positions: list[OpenPosition] = []
        self.orders: list[Pending] = []
        self.changes = 0
        self.account = None  # backtests.broker.account.Account, told of every change (its ``revision``)
        self._tickets: dict[int, OpenPosition] = {}
        self._exposure: tuple[int, tuple[float, float, float, float]] | None = None
        self._net: tuple[int, float] = (0, 0)  # (changes, net lots): no position, 0 as ``sum`` of none

    def __bool__(self) -> bool:
        """Whether anything is working: an open position or a pending order."""
        return bool(self.positions or self.orders)

    # -- positions -----------------------------------------------------------------------------------------
    def position(self, ticket: int) -> OpenPosition | None:
        return self._tickets.get(ticket)

    def add(self, pos: OpenPosition) -> None:
        cached = self._exposure
        self.positions.append(pos)
        self._tickets[pos.ticket] = pos  # an account numbers its positions once (``Ledger.new_ticket``)
        self.changes += 1  # ``_changed``, inline: per deal
        if self.account is not None:
            self.account.revision += 1
        if cached is not None and cached[0] == self.changes - 1:
            # The sums of the book as it was plus the new last position: the very additions ``exposure``
            # makes in position order, so the same floats, without going over the others again
            self._exposure = (self.changes, _plus(cached[1], pos))

    def remove(self, pos: OpenPosition) -> None:
        self.positions.remove(pos)
        del self._tickets[pos.ticket]
        self.changes += 1  # ``_changed``, inline: per deal
        if self.account is not None:
            self.account.revision += 1
        if not self.positions:  # nothing left: the sums of no position (a reversal's close)
            self._exposure = (self.changes, (0, 0, 0, 0))

    def resize(self, pos: OpenPosition, lots: float, price: float) -> None:
        """A position's volume and average price changed (a netting deal added to it, a partial close)."""
        pos.lots, pos.price = lots, price
        self._changed()

    def _changed(self) -> None:
        self.changes += 1
        if self.account is not None:
            self.account.revision += 1

    def net_lots(self) -> float:
        """The positions' net volume in lots (``strategies.trade.net_volume``: the same float as the sum over
        the EA's position records), kept until the positions change."""
        if self._net[0] != self.changes:
            self._net = (self.changes, net_volume(self.positions))
        return self._net[1]

    def exposure(self) -> tuple[float, float, float, float]:
        """Long lots, sum of long lots x price, the same for shorts (cached until the positions change)."""
        if self._exposure is None or self._exposure[0] != self.changes:
            sums = (0, 0, 0, 0)  # summed in position order, as ``sum``
            for p in self.positions:
                sums = _plus(sums, p)
            self._exposure = (self.changes, sums)
        return self._exposure[1]

    def reached_stops(self, quote: Quote, t: int, gap_only: bool) -> list[tuple[OpenPosition, float, str]]:
        """``(position, price, reason)`` of each SL or TP the quote reaches, in position order: at the open
        (``gap_only``) a gap through the level fills at the open, inside the range at the level."""
        o, h, lo, spr = quote
        out = []
        for pos in self.positions:
            sl, tp = pos.sl, pos.tp
            if sl is None and tp is None:
                continue
            if pos.side > 0:  # long: exits at the bid
                if gap_only:
                    if sl is not None and o <= sl:
                        out.append((pos, o, "sl"))
                    elif tp is not None and o >= tp:
                        out.append((pos, o, "tp"))
                elif sl is not None and lo <= sl:
                    out.append((pos, sl, "sl"))
                elif tp is not None and h >= tp and t >= pos.tp_from:
                    out.append((pos, tp, "tp"))
            else:  # short: exits at the ask
                ao, ah, alo = o + spr, h + spr, lo + spr
                if gap_only:
                    if sl is not None and ao >= sl:
                        out.append((pos, ao, "sl"))
                    elif tp is not None and ao <= tp:
                        out.append((pos, ao, "tp"))
                elif sl is not None and ah >= sl:
                    out.append((pos, sl, "sl"))
                elif tp is not None and alo <= tp and t >= pos.tp_from:
                    out.append((pos, tp, "tp"))
        return out

    # -- pending orders --------------------------------------------------------------------------------------
    def order(self, ticket: int) -> Pending | None:
        return next((o for o in self.orders if o.ticket == ticket), None)

    def reached_orders(self, quote: Quote, t: int, at_open: bool) -> Iterator[tuple[Pending, float]]:
        """``(order, price)`` of each working order the quote reaches, in the order they were placed."""
        o, h, lo, spr = quote
        for order in list(self.orders):
            if order.active_from > t:
                continue
            price = order.trigger(o, h, lo, spr, at_open)
            if price is not None:
                yield order, price

    def expired(self, now: pd.Timestamp) -> list[Pending]:
        """The orders whose expiration is at or before ``now``."""
        return [o for o in self.orders if o.expiration is not None and o.expiration <= now]

    def first_expiry(self) -> pd.Timestamp | None:
        return min((o.expiration for o in self.orders if o.expiration is not None), default=None)

    def levels(self) -> list[float]:
        """Every price something here waits for: pending prices, SLs and TPs."""
        out = [o.price for o in self.orders]
        for p in self.positions:
            out.extend(v for v in (p.sl, p.tp) if v is not None)
        return out


def _plus(sums: tuple, pos: OpenPosition) -> tuple:
    """``sums`` (long lots, long lots x price, short lots, short lots x price) with ``pos`` added: the one
    addition both the whole book's sums and a new position's update make, so their floats agree."""
    long_lots, long_value, short_lots, short_value = sums
    if pos.side > 0:
        return long_lots + pos.lots, long_value + pos.lots * pos.price, short_lots, short_value
    if pos.side < 0:
        return long_lots, long_value, short_lots + pos.lots, short_value + pos.lots * pos.price
    return sums
