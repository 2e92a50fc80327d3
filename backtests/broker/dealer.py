"""The deals of one symbol's broker: a fill (netting reductions and reversals, hedging openings, the margin
check of the whole deal) and a close (profit, commission and the position's accrued swap booked to the
balance), each recorded in the ledger.

MetaTrader's trade server checks a deal as a whole before it executes any of it: when the free margin cannot
hold what the deal leaves open it is refused (10019) and nothing of it happens, not even the closing part of
a netting reversal (MQL5 reference, "Trade Server Return Codes"; "Netting and hedging position accounting").
A closing deal books the lots' share of the swap accrued on the position, as the terminal's history shows.

``Dealer`` holds the parts it books into (the book, the account, the ledger, the margin and money models);
the moment of a deal (bar ``t``, the tick or minute being worked) and the market's bid and ask are the
broker's, read from it when the deal is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backtests.broker.account import cents
from backtests.broker.book import OpenPosition

if TYPE_CHECKING:
    from backtests.broker.core import Broker


class Dealer:
    """Makes and books the deals of one broker (``Broker.fill`` and ``Broker.close_position`` call it)."""

    def __init__(self, broker: Broker):
        self.broker = broker  # the clock of the deal (``t``, ``now``, ``now_ns``), the quote, the refusals
        self.config = broker.config
        self.scale = broker.scale
        self.symbol = broker.symbol
        self.book = broker.book
        self.money = broker.money
        self.margin = broker.margin
        self.funds = broker.funds
        self.ledger = broker.ledger

    def fill(self, side, lots, price, sl, tp, magic, comment, ticket=None, reason="signal",
             quote: tuple[float, float] | None = None) -> int | None:  # fmt: skip
        """A deal of ``lots`` at ``price`` (points; SL/TP too): netting first reduces or reverses an opposite
        position, hedging opens its own. The deal is checked as a whole, as the trade server checks it:
        when the free margin cannot hold what it leaves open, it is refused (10019) and nothing of it is
        executed, not even the closing part of a reversal. Returns the position's ticket, or None
        (recorded). ``quote``: the bid and ask now (``bid_ask``), where the caller has them."""
        cfg, book, b = self.config, self.book, self.broker
        closes: list[tuple[OpenPosition, float]] = []  # the opposite positions it reduces, and by how much
        remaining = lots
        if not cfg.hedging and book.positions:
            for pos in [p for p in book.positions if p.side != side]:
                if remaining <= 1e-12:
                    break
                take = min(pos.lots, remaining)
                closes.append((pos, take))
                remaining = round(remaining - take, 8)
        bid, ask = b.bid_ask() if quote is None else quote
        opens = remaining > 1e-12
        charged = self.money.margin_price(side, price, bid, ask) if opens else None  # once: closes move none
        if opens and not self._margin_ok(side, remaining, price, closes, charged, bid, ask):
            return b.reject("deal", side, lots, 10019, "not enough free margin", price=price / self.scale)
        result = None
        for pos, take in closes:
            result = pos.ticket
            self.close_position(pos, take, price, reason, order=ticket, record_order=False)
        if not opens:
            return result  # the order only reduced or closed an opposite position
        same = [] if cfg.hedging or not book.positions else [p for p in book.positions if p.side == side]
        comm = cents(remaining * cfg.commission) if cfg.commission else 0.0
        if same:  # netting: the deal adds to the position
            pos = same[0]
            self._end_segment(pos)
            total = pos.lots + remaining
            if charged is not None or pos.margin_price is not None:  # the margin at both deals' prices
                held = self.margin.price_of(pos)
                now = price / self.scale if charged is None else charged
                pos.margin_price = (held * pos.lots + now * remaining) / total
            book.resize(pos, round(total, 8), (pos.price * pos.lots + price * remaining) / total)
            pos.commission += comm
            self.funds.charge(-comm, b.t)
            self._deal(ticket, pos, side, "in", remaining, price, 0.0 - comm, 0.0, 0.0)
            if sl is not None:
                pos.sl = sl
            if tp is not None:
                pos.tp = tp
            return pos.ticket
        if ticket is None:
            ticket = self.ledger.new_ticket()
        t = b.t
        pos = OpenPosition(ticket, side, remaining, price, t, sl, tp, magic, comment, comm, charged)
        pos.entry_ns = b.now[0] if b.now is not None else b.now_ns  # ``Broker.stamp``
        if comm:
            self.funds.charge(-comm, t)
        book.add(pos)
        b.revision += 1  # ``_deal``, inline: per position opened (0.0 - x: never -0.0)
        self.ledger.new_deal(t, pos.entry_ns, ticket, pos, side, "in", remaining, price / self.scale,
                             0.0 - comm, 0.0, 0.0, self.funds.balance, None, self.symbol)  # fmt: skip
        return ticket

    def close_position(
        self,
        pos: OpenPosition,
        lots: float,
        price: float,
        reason: str,
        order=None,
        record_order=True,
        entry="out",
    ) -> None:
        """Close ``lots`` of ``pos`` at ``price`` (points): the profit, the exit commission and the lots'
        share of the position's accrued swap hit the balance, a deal and a trade are recorded (and the
        broker's own closing order, unless ``record_order`` is False)."""
        cfg, k, ledger, b = self.config, self.scale, self.ledger, self.broker
        t = b.t
        if t > pos.seg:  # ``_end_segment``, inline: per close
            ledger.segment(pos.seg, t, pos.side, pos.lots, pos.price / k, pos.margin_price, self.symbol)
        pos.seg = t
        entry_comm = cents(pos.commission * (lots / pos.lots)) if pos.commission else 0.0  # the last part:
        swap = cents(pos.swap * (lots / pos.lots)) if pos.swap else 0.0  # what is left
        exit_comm = cents(lots * cfg.commission) if cfg.commission else 0.0
        profit = amount = pos.side * ((price - pos.price) / k) * lots * cfg.contract_size
        rate = 1.0
        if not self.money.profit.unity:  # converted at the rate of the fill: this symbol at its price
            spread = b.price_points(+1) - b.price_points(-1)
            bid, ask = (price, price + spread) if pos.side > 0 else (price - spread, price)
            profit = self.money.money(amount, bid, ask)
            rate = profit / amount if amount else self.money.money(1.0, bid, ask)
        profit = cents(profit)  # booked in whole cents of the deposit currency
        self.funds.charge(profit - exit_comm + swap, t, swap)  # the deal books its share of the swap
        when = b.now[0] if b.now is not None else b.now_ns  # ``Broker.stamp``, once for the three records
        if record_order:  # the broker's own closing order (SL, TP, stop-out, close request, end of test),
            order = ledger.new_ticket()  # numbered with the account's orders, as the trade server numbers it
            kind = "sell" if pos.side > 0 else "buy"
            b.revision += 1  # ``Broker.record_order``, inline
            ledger.new_order(t, when, order, kind, lots, price / k, None, None, "filled", pos.ticket,
                             pos.magic, reason, None, None, self.symbol)  # fmt: skip
        b.revision += 1  # ``_deal``, inline
        ledger.new_deal(t, when, order, pos, -pos.side, entry, lots, price / k, 0.0 - exit_comm, swap, profit,
                        self.funds.balance, reason, self.symbol)  # fmt: skip
        ledger.new_trade(pos, lots, t, when, price, reason, entry_comm, exit_comm, swap, profit, k,
                         self.symbol, rate)  # fmt: skip
        left = 0.0 if lots == pos.lots else round(pos.lots - lots, 8)  # round(0.0, 8): a whole close
        if left <= 1e-12:
            self.book.remove(pos)
        else:
            self.book.resize(pos, left, pos.price)
            pos.commission, pos.swap = pos.commission - entry_comm, pos.swap - swap

    def _margin_ok(self, side: int, lots: float, price: float, closes: list[tuple[OpenPosition, float]],
                   charged: float | None, bid: float, ask: float) -> bool:  # fmt: skip
        """Whether the free margin holds what a deal leaves open: ``lots`` opened at ``price`` (its margin
        at ``charged``, the market at ``bid``/``ask``) after the ``closes`` (positions and lots taken)."""
        cost = lots * self.config.commission
        positions = self.book.positions
        new = (side, lots, price / self.scale if charged is None else charged)
        if not positions and (self.funds.closed_form or not self.funds.any_open()):
            # the common case: nothing open on the account, nothing floating
            return self.funds.balance - cost - self.margin.of_legs([new]) >= -1e-9
        taken = {id(pos): take for pos, take in closes}
        price_of = self.margin.price_of
        legs = [(p.side, p.lots - taken.get(id(p), 0.0), price_of(p)) for p in positions]
        legs.append(new)
        return self.funds.margin_ok(legs, cost, bid, ask, self.broker)

    def _end_segment(self, pos: OpenPosition) -> None:
        """A position is about to change (volume, price, closed): close its floating-profit segment."""
        end = self.broker.t
        if end > pos.seg:
            price = pos.price / self.scale
            self.ledger.segment(pos.seg, end, pos.side, pos.lots, price, pos.margin_price, self.symbol)
        pos.seg = end

    def _deal(self, order, pos: OpenPosition, side: int, entry: str, lots, price, commission, swap, profit,
              comment: str | None = None) -> None:  # fmt: skip
        b = self.broker
        b.revision += 1
        ns = b.now[0] if b.now is not None else b.now_ns  # ``Broker.stamp``, inline: per deal
        self.ledger.new_deal(b.t, ns, order, pos, side, entry, lots, price / self.scale, commission, swap,
                             profit, self.funds.balance, comment, self.symbol)  # fmt: skip
