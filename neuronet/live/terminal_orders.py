"""Pending orders on a terminal: place, change, delete (a mix-in of ``TerminalTrade``).

The checks are the backtest broker's (``backtests.checks``): the order price on the right side of the
market and at least the stops level away (10015), its SL/TP against the order price (10016), the
expiration after now (10022), a change that changes something (10025), the freeze level (10029).
Expirations are UTC times, sent in the broker's seconds; "today" is MetaTrader's ``ORDER_TIME_DAY``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from backtests import checks
from neuronet.live import retcodes
from neuronet.live.quotes import refused_at_bad_quote
from neuronet.live.terminal_requests import MODIFY, PENDING, REMOVE, Outcome, SymbolSpec
from strategies.trade import PENDING_TYPES

# The terminal's codes of the pending order types (the shared table's, ``strategies.trade.ORDER_TYPES``).
KINDS = {t.code: name for name, t in PENDING_TYPES.items()}
GTC, DAY, SPECIFIED = 0, 1, 2


class PendingOrders:
    """``pending``, ``cancel`` and ``modify_order`` of ``TerminalTrade`` (which supplies the rest)."""

    # -- pending orders -------------------------------------------------------------------------------------
    @refused_at_bad_quote("pending", None)
    def pending(
        self,
        kind: str,
        lots: float,
        price: float,
        stoplimit: float | None,
        sl: float | None,
        tp: float | None,
        expiration: str | pd.Timestamp | None,
        magic: int,
        comment: str,
    ) -> int | None:
        """Place a pending order (``kind``: a pending type of ``strategies.trade.ORDER_TYPES``); its ticket or
        None."""
        desc = {
            "kind": kind,
            "lots": lots,
            "price": price,
            "stoplimit": stoplimit,
            "sl": sl,
            "tp": tp,
            "expiration": None if expiration is None else str(expiration),
            "magic": magic,
        }
        if self._manual_magic("pending", magic, desc):
            return None
        side = PENDING_TYPES[kind].side if kind in PENDING_TYPES else 0
        if not side:
            return self._refuse("pending", checks.INVALID, f"unknown order type {kind!r}", **desc)
        spec = self.spec(refresh=True)
        sl, tp = checks.stop_value(sl), checks.stop_value(tp)
        volume, bad = self._volume(lots, spec)
        if bad:
            return self._refuse("pending", *bad, **desc)
        tick = self._tick()
        when, bad = self._expiration(expiration, int(tick.time))
        bad = (
            bad
            or self._mode_refusal(spec, side)
            or self._check_order(kind, price, stoplimit, sl, tp, tick, spec)
        )
        reason = None if bad else self._limit(volume)
        if bad or reason:
            return self._refuse("pending", *(bad or (retcodes.CLIENT_DISABLES_AT, reason)), **desc)
        request = {
            "action": PENDING,
            **self._base(magic, comment),
            "volume": volume,
            "type": PENDING_TYPES[kind].code,
            "price": float(price),
            "stoplimit": float(stoplimit or 0.0),
            "sl": sl or 0.0,
            "tp": tp or 0.0,
            "type_filling": spec.filling,
            **when,
        }
        self.magics.add(int(magic))
        out = self._submit(request)
        return out.order if out.ok else None

    def _check_order(self, kind, price, stoplimit, sl, tp, tick, spec: SymbolSpec) -> checks.Check:
        level = spec.stops_level * spec.point
        point = spec.point
        bad = checks.check_pending(kind, price, stoplimit, float(tick.bid), float(tick.ask), level, point)
        if bad:
            return bad
        entry = stoplimit if PENDING_TYPES[kind].trigger == "stop_limit" else price
        return checks.check_stops(PENDING_TYPES[kind].side, entry, sl, tp, level, "order price", point)

    def _expiration(self, expiration: Any, now_broker: int) -> tuple[dict, checks.Check]:
        """The request's ``type_time``/``expiration`` (broker seconds), or the 10022 refusal."""
        if isinstance(expiration, str) and expiration.lower() == "today":
            return {"type_time": DAY, "expiration": 0}, None
        now = self._utc(now_broker)
        try:
            when = checks.expiration_time(expiration, now, self.clock)
        except ValueError as exc:
            return {}, (checks.INVALID_EXPIRATION, str(exc))
        if when is None:
            return {"type_time": GTC, "expiration": 0}, None
        if when <= now:
            return {}, (checks.INVALID_EXPIRATION, f"expiration {when} is not after the current time {now}")
        broker = int(self.clock.to_broker_seconds(np.array([when.value // 10**9]))[0])
        return {"type_time": SPECIFIED, "expiration": broker}, None

    @refused_at_bad_quote("cancel", False)
    def cancel(self, ticket: int) -> bool:
        """Delete a pending order of this EA."""
        order = next((o for o in self.orders() if o.ticket == ticket), None)
        if order is None:
            return (
                self._refuse("cancel", checks.INVALID, f"no pending order #{ticket}", ticket=ticket)
                is not None
            )
        if self._frozen(self.spec(refresh=True), self.price(order.side), order.price):
            return (
                self._refuse(
                    "cancel", checks.FROZEN, f"order #{ticket} lies within the freeze level", ticket=ticket
                )
                is not None
            )
        request = {"action": REMOVE, **self._base(order.magic, ""), "order": ticket}

        def verify(req: dict, tag: str) -> Outcome | None:
            gone = all(o.ticket != ticket for o in self.orders())
            return Outcome(retcodes.DONE, "found deleted after a lost reply") if gone else None

        return self._submit(request, verify).ok

    @refused_at_bad_quote("modify_order", False)
    def modify_order(
        self,
        ticket: int,
        price: float | None,
        stoplimit: float | None,
        sl: float | None,
        tp: float | None,
        expiration: str | pd.Timestamp | None = "keep",
    ) -> bool:
        """New price, stop-limit price, SL/TP or expiration of a pending order (None keeps a value)."""
        order = next((o for o in self.orders() if o.ticket == ticket), None)
        if order is None:
            return (
                self._refuse("modify_order", checks.INVALID, f"no pending order #{ticket}", ticket=ticket)
                is not None
            )
        spec = self.spec(refresh=True)
        tick = self._tick()
        new = {
            "price": order.price if price is None else price,
            "stoplimit": order.stoplimit if stoplimit is None else stoplimit,
            "sl": order.sl if sl is None else checks.stop_value(sl),
            "tp": order.tp if tp is None else checks.stop_value(tp),
        }
        if expiration == "keep":
            when, bad = self._keep_expiration(ticket), None
        else:
            when, bad = self._expiration(expiration, int(tick.time))
        bad = bad or self._check_order(
            order.kind, new["price"], new["stoplimit"], new["sl"], new["tp"], tick, spec
        )
        old = {"price": order.price, "stoplimit": order.stoplimit, "sl": order.sl, "tp": order.tp}
        if not bad and new == old and expiration == "keep":
            bad = checks.NO_CHANGES, f"order #{ticket} already has these values"
        if not bad and self._frozen(spec, self.price(order.side), order.price):
            bad = checks.FROZEN, f"order #{ticket} lies within the freeze level"
        if bad:
            return self._refuse("modify_order", *bad, ticket=ticket, **new) is not None
        request = {
            "action": MODIFY,
            **self._base(order.magic, ""),
            "order": ticket,
            "price": float(new["price"]),
            "stoplimit": float(new["stoplimit"] or 0.0),
            "sl": new["sl"] or 0.0,
            "tp": new["tp"] or 0.0,
            **when,
        }

        def verify(req: dict, tag: str) -> Outcome | None:
            now = next((o for o in self.orders() if o.ticket == ticket), None)
            if now is None:
                return Outcome(checks.INVALID, f"order #{ticket} is gone (filled or deleted) meanwhile")
            same = (now.price, now.stoplimit or 0.0, now.sl or 0.0, now.tp or 0.0) == (
                req["price"],
                req["stoplimit"],
                req["sl"],
                req["tp"],
            )
            return Outcome(retcodes.DONE, "found changed after a lost reply") if same else None

        return self._submit(request, verify).ok

    def _keep_expiration(self, ticket: int) -> dict:
        (raw,) = self._read("orders_get", ticket=ticket)
        return {"type_time": int(raw.type_time), "expiration": int(raw.time_expiration)}
