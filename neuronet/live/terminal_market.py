"""Market orders, closes and changes of an open position's SL/TP on a terminal (a mix-in of
``TerminalTrade``).

The checks are the backtest broker's (``backtests.checks``): the volume (10014), stops on the wrong side or
nearer than the symbol's stops level (10016), no change (10025), the freeze level (10029), an unknown
position (10036), a close volume above the position's (10038), a close by that is not of two opposite
positions on a hedging account; for a market order also the symbol's trade mode and then the ``Limits``
(``TerminalTrade._limit``), unless it only reduces a netting position (``TerminalTrade._only_reduces``).
"""

from __future__ import annotations

from backtests import checks
from neuronet.live import retcodes
from neuronet.live.quotes import refused_at_bad_quote
from neuronet.live.terminal_orders import GTC
from neuronet.live.terminal_requests import CLOSE_BY, DEAL, SLTP, Outcome, SymbolSpec

HEDGING = 2  # account_info().margin_mode of a hedging account


class MarketOrders:
    """``order``, ``close``, ``close_by`` and ``modify`` of ``TerminalTrade`` (which supplies the rest)."""

    @refused_at_bad_quote("deal", None)
    def order(
        self, side: int, lots: float, sl: float | None, tp: float | None, magic: int, comment: str
    ) -> int | None:
        """A market order now; the ticket of the position it opened or changed, None when refused."""
        spec = self.spec(refresh=True)
        sl, tp = checks.stop_value(sl), checks.stop_value(tp)
        desc = {"side": side, "lots": lots, "sl": sl, "tp": tp, "magic": magic}
        if self._manual_magic("deal", magic, desc):
            return None
        volume, bad = self._volume(lots, spec)
        if bad:
            return self._refuse("deal", *bad, **desc)
        tick = self._tick()
        ref, what = (float(tick.bid), "bid") if side > 0 else (float(tick.ask), "ask")
        bad = self._mode_refusal(spec, side) or checks.check_stops(
            side, ref, sl, tp, spec.stops_level * spec.point, what
        )
        reason = None if bad or self._only_reduces(side, volume) else self._limit(volume)
        if bad or reason:
            return self._refuse("deal", *(bad or (retcodes.CLIENT_DISABLES_AT, reason)), **desc)
        request = {
            "action": DEAL,
            **self._base(magic, comment),
            "volume": volume,
            "type": 0 if side > 0 else 1,
            "price": float(tick.ask if side > 0 else tick.bid),
            "sl": sl or 0.0,
            "tp": tp or 0.0,
            "type_time": GTC,
            "type_filling": spec.filling,
        }
        self.magics.add(int(magic))
        out = self._submit(request)
        return self._position_of(out) if out.ok else None

    def _position_of(self, out: Outcome) -> int:
        """The position a filled deal opened or changed (on a netting account not the order's ticket)."""
        if out.position:
            return out.position
        deals = self._read("history_deals_get", ticket=out.deal, none_ok=True) if out.deal else ()
        return int(deals[0].position_id) if deals else out.order

    @refused_at_bad_quote("close", 0)
    def close(
        self, ticket: int | None, magic: int | None, lots: float | None = None, reason: str = "signal"
    ) -> int:
        """Close this EA's positions by ticket and/or magic (``lots``: part of one); how many were closed."""
        todo = [
            p
            for p in self.positions()
            if (ticket is None or p.ticket == ticket) and (magic is None or p.magic == magic)
        ]
        if ticket is not None and not todo:
            self._refuse("close", checks.POSITION_CLOSED, f"no open position #{ticket}", ticket=ticket)
            return 0
        if lots is not None and ticket is None:
            self._refuse("close", checks.INVALID, "a partial close needs a position ticket", lots=lots)
            return 0
        spec = self.spec(refresh=True)
        done = 0
        for pos in todo:
            volume, bad = (pos.lots, None) if lots is None else self._volume(lots, spec)
            if not bad and volume > pos.lots + 1e-9:
                why = f"close volume {lots} for position #{pos.ticket} of {pos.lots} lots"
                bad = checks.INVALID_CLOSE_VOLUME, why
            if bad:
                self._refuse("close", *bad, ticket=pos.ticket, lots=lots)
                continue
            request = {
                "action": DEAL,
                **self._base(pos.magic, reason),
                "volume": volume,
                "type": 1 if pos.side > 0 else 0,
                "position": pos.ticket,
                "price": self.price(-pos.side),
                "type_time": GTC,
                "type_filling": spec.filling,
            }
            done += self._submit(request).ok
        return done

    @refused_at_bad_quote("close_by", False)
    def close_by(self, ticket: int, opposite: int) -> bool:
        """Close position ``ticket`` by the opposite position ``opposite`` (hedging accounts only)."""
        found = {p.ticket: p for p in self.positions()}
        hedging = int(self._read("account_info").margin_mode) == HEDGING
        bad = checks.check_close_by({t: p.side for t, p in found.items()}, ticket, opposite, hedging)
        if bad:
            return self._refuse("close_by", *bad, ticket=ticket, opposite=opposite) is not None
        request = {
            "action": CLOSE_BY,
            **self._base(found[ticket].magic, f"close #{ticket} by #{opposite}"),
            "position": ticket,
            "position_by": opposite,
        }

        def verify(req: dict, tag: str) -> Outcome | None:
            alive = {p.ticket for p in self.positions()}
            if ticket not in alive or opposite not in alive:
                return Outcome(retcodes.DONE, "found closed after a lost reply")
            return self.lost.find_tagged(req, tag)

        return self._submit(request, verify).ok

    @refused_at_bad_quote("modify", False)
    def modify(self, ticket: int, sl: float | None, tp: float | None) -> bool:
        """New SL/TP of an open position (None keeps a level, 0 removes it)."""
        pos = next((p for p in self.positions() if p.ticket == ticket), None)
        if pos is None:
            return (
                self._refuse("modify", checks.POSITION_CLOSED, f"no open position #{ticket}", ticket=ticket)
                is not None
            )
        spec = self.spec(refresh=True)
        new_sl = pos.sl if sl is None else checks.stop_value(sl)
        new_tp = pos.tp if tp is None else checks.stop_value(tp)
        ref = self.price(-pos.side)
        what = "bid" if pos.side > 0 else "ask"
        bad = checks.check_stops(
            pos.side,
            ref,
            new_sl if new_sl != pos.sl else None,
            new_tp if new_tp != pos.tp else None,
            spec.stops_level * spec.point,
            what,
        )
        if not bad and (new_sl, new_tp) == (pos.sl, pos.tp):
            bad = checks.NO_CHANGES, f"position #{ticket} already has sl={pos.sl} tp={pos.tp}"
        if not bad and self._frozen(spec, ref, pos.sl, pos.tp):
            bad = checks.FROZEN, f"position #{ticket}'s stops lie within the freeze level of the {what} {ref}"
        if bad:
            return self._refuse("modify", *bad, ticket=ticket, sl=sl, tp=tp) is not None
        request = {
            "action": SLTP,
            **self._base(pos.magic, ""),
            "position": ticket,
            "sl": new_sl or 0.0,
            "tp": new_tp or 0.0,
        }

        def verify(req: dict, tag: str) -> Outcome | None:
            now = next((p for p in self.positions() if p.ticket == ticket), None)
            if now is None:
                return Outcome(checks.POSITION_CLOSED, f"position #{ticket} closed meanwhile")
            return (
                Outcome(retcodes.DONE, "found changed after a lost reply")
                if (now.sl, now.tp) == (new_sl, new_tp)
                else None
            )

        return self._submit(request, verify).ok

    @staticmethod
    def _frozen(spec: SymbolSpec, ref: float, *levels: float | None) -> bool:
        freeze = spec.freeze_level * spec.point
        return freeze > 0 and any(v is not None and abs(ref - v) <= freeze for v in levels)
