"""The trade requests of ``strategies.trade.TradeContext`` as the backtest broker serves them.

Every request is checked first (``backtests.checks``); a refused one changes nothing, returns None/False/0,
sets the broker's ``last_retcode`` and is recorded in its ledger with the retcode and reason. Prices of the
moment are the broker's: the current bar's open (bid) and open + spread (ask), or the tick being worked.

An EA's prices (SL, TP, a pending order's price) are put on the symbol's grid first, to the nearest point
(MQL5's ``NormalizeDouble`` to the symbol's digits): ``bid - 200 * point`` computed in floats is the price
200 points below the bid, not a hair above it. The checks count distances in whole points and the book
keeps the prices as points (``backtests.broker.market``).

Modifications: ``None`` keeps a value, 0 removes a stop (MQL5's convention). A modification that changes
nothing is refused with 10025 (no changes), as the server does. The freeze level blocks changing or
cancelling a pending order whose price, and changing a position whose SL or TP, lies within that many
points of the market (10029). Close-by (hedging accounts) closes the common volume of two opposite
positions at the price of the second one's opening: one spread is saved, as in MetaTrader.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from backtests import checks
from backtests.broker.book import Pending
from strategies.errors import EAError
from strategies.trade import PENDING_TYPES, Position

if TYPE_CHECKING:
    from backtests.broker.core import Broker

KEEP = "keep"  # modify_order's expiration: leave it as it is
_VOLUMES_KEPT = 1024  # volumes remembered as checked (``TradeRequests._volume``)


class TradeRequests:
    """Market and pending orders, closes and modifications of one ``broker`` (which does the fills)."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.config = broker.config
        # Each float volume that passed ``check_volume``, to its volume on the lot step: both depend on the
        # volume and the account's fixed lot terms alone, and an EA trades the same few volumes again
        self._volumes: dict[float, float] = {}

    def _volume(self, lots: float) -> tuple[checks.Check, float]:
        """``check_volume``'s answer for ``lots`` and, where it passes, the volume put on the lot step."""
        norm = self._volumes.get(lots) if type(lots) is float else None
        if norm is not None:
            return None, norm
        cfg = self.config
        bad = checks.check_volume(lots, cfg.lot_min, cfg.lot_max, cfg.lot_step)
        if bad:
            return bad, lots
        norm = round(round(lots / cfg.lot_step) * cfg.lot_step, 8)
        if type(lots) is float and len(self._volumes) < _VOLUMES_KEPT:
            self._volumes[lots] = norm
        return None, norm

    def own(self, symbol: str | None) -> None:
        """Refuse a request naming another symbol than this broker's (an EA's bug: ``EAError``)."""
        mine = self.broker.symbol
        if symbol is not None and symbol != mine:
            what = f"the symbol {mine}" if mine else "one symbol"
            raise EAError(
                f"symbol {symbol!r}: this account trades {what}; declare the symbols an EA trades in its "
                "class attribute symbols (or --symbols)"
            )

    def _open(self, side: int, reduces: bool, lots: float | None = None) -> checks.Check:
        """Whether the market is open for a deal of ``side`` now: the symbol has a bar at this time, and its
        trade mode allows it (``reduces``: the deal only reduces a position; with ``lots`` given, whether
        a deal of that volume does, asked only where the trade mode is not "full")."""
        closed = self._closed()
        if closed:
            return closed
        mode = self.broker.terms.trade_mode
        if mode == "full":
            return None
        if lots is not None:
            reduces = self._reduces(side, lots)
        return checks.check_trade_mode(mode, side, reduces)

    def _closed(self) -> checks.Check:
        """10018 where the symbol has no bar now (an account's other symbols trade, this one does not)."""
        b = self.broker
        closed = b.market.closed
        if closed is not None and closed[b.t]:
            return checks.MARKET_CLOSED, f"market closed: {b.symbol} has no bar at {b.market.time[b.t]}"
        return None

    def _reduces(self, side: int, lots: float) -> bool:
        """Whether a deal only reduces the symbol's position (netting: an opposite position holds as much)."""
        if self.config.hedging:
            return False
        opposite = sum(p.lots for p in self.broker.book.positions if p.side != side)
        return opposite >= lots - 1e-9

    # -- positions -----------------------------------------------------------------------------------------
    def order(self, side: int, lots: float, sl, tp, magic: int, comment: str, symbol: str | None = None):
        """Market order now; returns the ticket of the position opened or changed, None when refused."""
        if symbol is not None:
            self.own(symbol)
        b, cfg = self.broker, self.config
        bad, norm = self._volume(lots)
        if not bad and (b.market.closed is not None or b.terms.trade_mode != "full"):
            bad = self._open(side, False, lots)  # the market always open and every deal allowed: no check
        if sl is not None or tp is not None:
            sl, tp = self._grid(checks.stop_value(sl)), self._grid(checks.stop_value(tp))
        if not bad and (sl is not None or tp is not None):
            ref = b.price(-1) if side > 0 else b.price(+1)  # where the position will close
            what = "bid" if side > 0 else "ask"
            bad = checks.check_stops(side, ref, sl, tp, self._level(cfg.stops_level), what, b.point)
        if bad:
            return b.reject("deal", side, lots, *bad, sl=sl, tp=tp)
        bid, ask = b.bid_ask()
        price = ask if side > 0 else bid
        ledger = b.ledger
        new = ledger.upcoming_ticket()
        stops = (None, None) if sl is None and tp is None else (self._points(sl), self._points(tp))
        ticket = b.fill(side, norm, price, *stops, magic, comment, quote=(bid, ask))
        if ticket is None:
            return None
        b.last_retcode = checks.DONE
        opened = ticket == new and ledger.upcoming_ticket() == new + 1
        kind = "buy" if side > 0 else "sell"
        b.revision += 1  # ``Broker.record_order``, inline: per order
        now = b.now
        ledger.new_order(b.t, now[0] if now is not None else b.now_ns, new if opened else None, kind, norm,
                         price / b.scale, sl, tp, "filled", ticket, magic, comment, None, None,
                         b.symbol)  # fmt: skip
        return ticket

    def close(
        self, ticket: int | None, magic: int | None, lots: float | None = None, reason: str = "signal",
        symbol: str | None = None,
    ) -> int:  # fmt: skip
        """Close positions by ticket and/or magic (``lots``: part of one position); returns how many.

        ``reason`` is the exit reason the trade records (e.g. "time" for a holding-time exit)."""
        if symbol is not None:
            self.own(symbol)
        b = self.broker
        if ticket is None and magic is None and lots is None:  # every position: the common close
            positions = b.book.positions
            if not positions:
                return 0
            market_checked = b.market.closed is not None or b.terms.trade_mode != "full"
            bad = self._open(0, True) if market_checked else None
            if bad:
                b.reject("close", 0, lots, *bad, ticket=ticket)
                return 0
            todo = list(positions)
            for pos in todo:
                b.close_position(pos, pos.lots, b.price_points(-pos.side), reason)
            b.last_retcode = checks.DONE
            return len(todo)
        todo = [
            p
            for p in b.book.positions
            if (ticket is None or p.ticket == ticket) and (magic is None or p.magic == magic)
        ]
        if ticket is not None and not todo:
            b.reject("close", 0, lots, checks.POSITION_CLOSED, f"no open position #{ticket}", ticket=ticket)
            return 0
        if todo:
            bad = self._open(0, True)
            if bad:
                b.reject("close", 0, lots, *bad, ticket=ticket)
                return 0
        if lots is not None:
            if ticket is None:
                b.reject("close", 0, lots, checks.INVALID, "a partial close needs a position ticket")
                return 0
            pos, cfg = todo[0], self.config
            bad = checks.check_volume(lots, cfg.lot_min, cfg.lot_max, cfg.lot_step)
            if not bad and lots > pos.lots + 1e-9:
                bad = (
                    checks.INVALID_CLOSE_VOLUME,
                    f"close volume {lots} exceeds position #{ticket}'s {pos.lots}",
                )
            if bad:
                b.reject("close", -pos.side, lots, *bad, ticket=ticket)
                return 0
            part = min(pos.lots, round(round(lots / cfg.lot_step) * cfg.lot_step, 8))
            b.close_position(pos, part, b.price_points(-pos.side), reason)
            b.last_retcode = checks.DONE
            return 1
        for pos in todo:
            b.close_position(pos, pos.lots, b.price_points(-pos.side), reason)
        if todo:
            b.last_retcode = checks.DONE
        return len(todo)

    def close_by(self, ticket: int, opposite: int) -> bool:
        """Close position ``ticket`` by the opposite position ``opposite`` (hedging accounts)."""
        b = self.broker
        found = {p.ticket: p for p in b.book.positions}
        sides = {t: p.side for t, p in found.items()}
        bad = checks.check_close_by(sides, ticket, opposite, self.config.hedging)
        if bad:
            return b.reject("close_by", 0, None, *bad, ticket=ticket, opposite=opposite) is not None
        a, c = found[ticket], found[opposite]
        lots, price = min(a.lots, c.lots), c.price
        comment = f"close #{ticket} by #{opposite}"
        b.record_order(
            None, "close_by", lots, price / b.scale, None, None, "filled", ticket, a.magic, comment
        )
        b.close_position(a, lots, price, "close by", record_order=False, entry="out_by")
        b.close_position(c, lots, price, "close by", record_order=False, entry="out_by")
        b.last_retcode = checks.DONE
        return True

    def modify(self, ticket: int, sl: float | None, tp: float | None) -> bool:
        """New SL/TP of an open position (None keeps, 0 removes)."""
        b = self.broker
        pos = b.book.position(ticket)
        if pos is None:
            return self._refuse(
                "modify", checks.POSITION_CLOSED, f"no open position #{ticket}", ticket, sl, tp
            )
        cur_sl, cur_tp = self._price(pos.sl), self._price(pos.tp)
        new_sl = cur_sl if sl is None else self._grid(checks.stop_value(sl))
        new_tp = cur_tp if tp is None else self._grid(checks.stop_value(tp))
        ref = b.price(-pos.side)
        what = "bid" if pos.side > 0 else "ask"
        changed_sl = new_sl if new_sl != cur_sl else None
        changed_tp = new_tp if new_tp != cur_tp else None
        level = self._level(self.config.stops_level)
        bad = self._closed() or checks.check_stops(
            pos.side, ref, changed_sl, changed_tp, level, what, b.point
        )
        if not bad and (new_sl, new_tp) == (cur_sl, cur_tp):
            bad = checks.NO_CHANGES, f"position #{ticket} already has sl={cur_sl} tp={cur_tp}"
        if not bad and self._frozen(ref, cur_sl, cur_tp):
            bad = checks.FROZEN, f"position #{ticket}'s stops lie within the freeze level of the {what} {ref}"
        if bad:
            return self._refuse("modify", *bad, ticket, sl, tp)
        pos.sl, pos.tp = self._points(new_sl), self._points(new_tp)
        b.revision += 1
        b.last_retcode = checks.DONE
        return True

    def positions(self, symbol: str | None = None) -> list[Position]:
        """Open positions, valued at the last closed bar's close, or at the current tick (ticks model); their
        profit in the deposit currency."""
        self.own(symbol)
        b = self.broker
        t, now, m, k = b.t, b.now, b.market, b.scale
        if now is not None:
            bid, ask = b.to_points(now[1]), b.to_points(now[2])
        else:
            bid = m.c[t - 1] if t > 0 else m.o[t]
            ask = bid + (m.s_close[t - 1] if t > 0 else m.s_open[t])
        cs = self.config.contract_size
        out = []
        for p in b.book.positions:
            exit_price = bid if p.side > 0 else ask
            if p.opened is None:  # made once: an EA may ask on every tick
                p.opened = m.time[p.bar] if p.entry_ns is None else pd.Timestamp(p.entry_ns, tz="UTC")
            profit = p.side * ((exit_price - p.price) / k) * p.lots * cs
            if not b.money.profit.unity:
                profit = b.money.money(profit, bid, ask)
            sl, tp = None if p.sl is None else p.sl / k, None if p.tp is None else p.tp / k
            out.append(Position(p.ticket, p.side, p.lots, p.price / k, p.opened, p.bar, sl, tp, p.magic,
                                p.comment, profit, b.symbol))  # fmt: skip
        return out

    # -- pending orders ------------------------------------------------------------------------------------
    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol=None):
        """Place a pending order (``kind``: a pending type of ``strategies.trade.ORDER_TYPES``); its ticket
        or None."""
        self.own(symbol)
        b = self.broker
        side = PENDING_TYPES[kind].side if kind in PENDING_TYPES else 0
        sl, tp = self._grid(checks.stop_value(sl)), self._grid(checks.stop_value(tp))
        price, stoplimit = self._grid(price), self._grid(stoplimit)
        request = {"kind": kind, "price": price, "stoplimit": stoplimit, "sl": sl, "tp": tp}
        if not side:
            return b.reject("pending", 0, lots, checks.INVALID, f"unknown order type {kind!r}", **request)
        bad, norm = self._volume(lots)
        if not bad:
            bad = self._open(side, False)
        when = None
        if not bad:
            when, bad = self._expiration(expiration)
        if not bad:
            bad = self._check_order(kind, price, stoplimit, sl, tp)
        if bad:
            return b.reject("pending", side, lots, *bad, **request, expiration=str(expiration))
        ticket = b.new_ticket()
        record = b.record_order(ticket, kind, norm, price, sl, tp, "placed", None, magic, comment,
                                stoplimit=stoplimit, expiration=when)  # fmt: skip
        points = [self._points(v) for v in (price, stoplimit, sl, tp)]
        b.book.orders.append(Pending(ticket, kind, norm, *points, when, magic, comment, b.t, record))
        b.last_retcode = checks.PLACED
        return ticket

    def cancel(self, ticket: int) -> bool:
        b = self.broker
        order = b.book.order(ticket)
        if order is None:
            return self._refuse("cancel", checks.INVALID, f"no pending order #{ticket}", ticket)
        closed = self._closed()
        if closed:
            return self._refuse("cancel", *closed, ticket)
        if self._frozen(b.price(order.side), self._price(order.price)):
            return self._refuse(
                "cancel", checks.FROZEN, f"order #{ticket} lies within the freeze level", ticket
            )
        b.retire(order, "canceled")
        b.last_retcode = checks.DONE
        return True

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration=KEEP) -> bool:
        """New price, stop-limit price, SL/TP or expiration of a pending order (None keeps a value)."""
        b = self.broker
        order = b.book.order(ticket)
        if order is None:
            return self._refuse("modify_order", checks.INVALID, f"no pending order #{ticket}", ticket, sl, tp)
        old = {key: self._price(getattr(order, key)) for key in ("price", "stoplimit", "sl", "tp")}
        new = {
            "price": old["price"] if price is None else self._grid(price),
            "stoplimit": old["stoplimit"] if stoplimit is None else self._grid(stoplimit),
            "sl": old["sl"] if sl is None else self._grid(checks.stop_value(sl)),
            "tp": old["tp"] if tp is None else self._grid(checks.stop_value(tp)),
        }
        when, bad = (order.expiration, None) if expiration == KEEP else self._expiration(expiration)
        bad = bad or self._closed()
        if not bad:
            bad = self._check_order(order.kind, new["price"], new["stoplimit"], new["sl"], new["tp"])
        if not bad and new == old and when == order.expiration:
            bad = checks.NO_CHANGES, f"order #{ticket} already has these values"
        if not bad and self._frozen(b.price(order.side), old["price"]):
            bad = checks.FROZEN, f"order #{ticket} lies within the freeze level"
        if bad:
            return self._refuse("modify_order", *bad, ticket, sl, tp)
        for key, value in new.items():
            setattr(order, key, self._points(value))
            setattr(order.record, key, value)
        order.expiration = order.record.expiration = when
        b.revision += 1
        b.last_retcode = checks.DONE
        return True

    # -- prices and checks ---------------------------------------------------------------------------------
    def _grid(self, price: float | None) -> float | None:
        """An EA's price on the symbol's grid (the nearest point); None and non-finite values as they are
        (the checks refuse the latter with a reason)."""
        if price is None or not math.isfinite(price):
            return price
        k = self.broker.scale
        return round(price * k) / k

    def _points(self, price: float | None) -> float | None:
        """A price on the grid in whole points (None stays None)."""
        return None if price is None else self.broker.to_points(price)

    def _price(self, points: float | None) -> float | None:
        """Whole points as a price (None stays None)."""
        return None if points is None else points / self.broker.scale

    def _level(self, points: int) -> float:
        return points * self.broker.point

    def _frozen(self, ref: float, *levels: float | None) -> bool:
        """Whether a level lies within the freeze level of ``ref`` (whole points)."""
        freeze, point = self.config.freeze_level, self.broker.point
        return freeze > 0 and any(v is not None and round(abs(ref - v) / point) <= freeze for v in levels)

    def _expiration(self, expiration):
        now = self.broker.time_now()
        try:
            when = checks.expiration_time(expiration, now, self.broker.clock)
        except ValueError as exc:
            return None, (checks.INVALID_EXPIRATION, str(exc))
        if when is not None and when <= now:
            return None, (checks.INVALID_EXPIRATION, f"expiration {when} is not after the current time {now}")
        return when, None

    def _check_order(self, kind, price, stoplimit, sl, tp) -> checks.Check:
        b = self.broker
        level = self._level(self.config.stops_level)
        bad = checks.check_pending(kind, price, stoplimit, b.price(-1), b.price(+1), level, b.point)
        if bad:
            return bad
        order = PENDING_TYPES[kind]
        entry = stoplimit if order.trigger == "stop_limit" else price
        return checks.check_stops(order.side, entry, sl, tp, level, "order price", b.point)

    def _refuse(self, action: str, retcode: int, reason: str, ticket, sl=None, tp=None) -> bool:
        self.broker.reject(action, 0, None, retcode, reason, ticket=ticket, sl=sl, tp=tp)
        return False
