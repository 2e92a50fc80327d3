"""How one trade request reaches the terminal: ``order_check``, then ``order_send``, requotes retried within
the deviation, and a lost reply looked up before anything is sent again (a mix-in of ``TerminalTrade``).

Idempotency: every request carries an id in its comment (``nn`` + 8 hex digits, then the EA's comment, cut
to the terminal's 31 characters). When ``order_send`` gives no answer (the bridge dropped, the call ran past
the link's timeout, the terminal answered ``None`` with an IPC error), the request may or may not have
executed, and it may still be executing: a terminal that answers after the timeout fills it then. The
positions, pending orders and the deals around the request's time are searched for that id (for a change
of stops or of an order, the state itself is compared with the one asked for), twice, ``lost_reply_wait``
seconds apart: found, it is reported as done. Not found, or the terminal cannot be asked, it is **never
sent again on our own** — that is how one ``buy(0.1)`` became two positions — but answered "request
canceled by timeout" (10012) with the id and kept in ``unresolved``: the limits count it as an open
position or order (``possibly_open``), and ``resolve()`` looks it up again at every poll until the
terminal shows it (journaled "recovered") or, the terminal answering all along, ``lost_reply_settle``
seconds have passed since it was sent without it appearing (journaled "not executed"). A server that drops
request comments is met by a second rule: an untagged market deal of the same magic, direction and volume
in the two minutes before the look counts as the request's (``_untagged_match``).

Requotes (10004) and "prices changed" (10020): the request is sent again at the new price as long as that
price lies within ``deviation`` points of the price the EA decided at, at most ``requote_retries`` times;
a price that ran further is refused with the terminal's retcode.

Every request and every result goes to ``record`` as one JSON-ready dict (the journal writes them), with
``event`` one of: "request" (``id``, ``action``, the ``request`` sent), "result" (``id``, ``retcode``,
``message``, ``reason``, ``order``, ``deal``, ``price``, ``volume``, ``position``, ``bid``, ``ask``),
"refused" (refused here, before the terminal: ``retcode``, ``message``, ``reason``, ``request``),
"requote" (``id``, ``retcode``, the new ``price``, ``points`` from the decision price), "unresolved" (a
lost reply: ``id``, ``reason``, the ``request`` and ``at``, the server time it was sent at, so a resumed
run looks it up again), "recovered" / "not executed" (its fate), "halted" (the daily loss limit reached:
``day_pnl``, ``day``).
Each carries ``symbol``; none carries a time (the journal stamps it). A refusal is also logged as a warning
with its one-line retcode message.
"""

from __future__ import annotations

import functools
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from datafeeds.terminal_errors import TerminalError, error_from_last_error
from neuronet.errors import NeuronetError
from neuronet.live import retcodes
from neuronet.live.journal import json_ready
from neuronet.live.quotes import QuoteError, quote_of

log = logging.getLogger(__name__)

DEAL, PENDING, SLTP, MODIFY, REMOVE, CLOSE_BY = 1, 5, 6, 7, 8, 10
ACTIONS = {1: "deal", 5: "pending", 6: "sltp", 7: "modify", 8: "remove", 10: "close_by"}
COMMENT_MAX = 31  # characters the terminal keeps of a request's comment
_TAG = re.compile(r"^nn[0-9a-f]{8}(?: |$)")
IPC_ERRORS = -10000  # last_error() codes at or below this are the link's, not the trade server's
RES_S_OK = 1  # last_error() after a call that found nothing


FOK, IOC, RETURN = 0, 1, 2  # ORDER_FILLING_*


@dataclass(frozen=True)
class SymbolSpec:
    """What a request needs from ``symbol_info()``."""

    point: float
    digits: int
    volume_min: float
    volume_max: float
    volume_step: float
    filling: int
    stops_level: int
    freeze_level: int
    trade_mode: int

    @classmethod
    def from_info(cls, info: Any) -> SymbolSpec:
        mask = int(info.filling_mode)
        filling = FOK if mask & 1 else IOC if mask & 2 else RETURN
        return cls(
            float(info.point),
            int(info.digits),
            float(info.volume_min),
            float(info.volume_max),
            float(info.volume_step),
            filling,
            int(info.trade_stops_level),
            int(info.trade_freeze_level),
            int(info.trade_mode),
        )


@dataclass(frozen=True)
class Outcome:
    """What became of one request: the retcode and reason, and what the terminal created or filled."""

    retcode: int
    reason: str
    order: int = 0
    deal: int = 0
    price: float = 0.0
    volume: float = 0.0
    position: int = 0  # the position the deal opened or changed, where known
    bid: float = 0.0  # the market the answer was given at (a requote's new prices)
    ask: float = 0.0

    @property
    def ok(self) -> bool:
        return self.retcode in retcodes.SUCCESS


Verify = Callable[[dict, str], "Outcome | None"]  # finds what became of a request (its id) on the terminal


@dataclass(frozen=True)
class Unresolved:
    """A request whose reply was lost and that the terminal has not shown yet: ``request`` as sent, ``at``
    the server time (broker seconds) it was sent at, where its deal is looked for (None: not known),
    ``since`` the local ``monotonic`` time it was sent at, and ``verify``, how it is looked up (None: by
    its id, ``_find_tagged``)."""

    request: dict
    at: int | None
    since: float
    verify: Verify | None = None

    @property
    def adds_risk(self) -> bool:
        """It may have opened a position (a market deal that closes none) or placed a pending order."""
        action = self.request.get("action")
        return action == PENDING or (action == DEAL and not self.request.get("position"))


def new_tag() -> str:
    return "nn" + secrets.token_hex(4)


def tagged(tag: str, comment: str) -> str:
    return f"{tag} {comment}"[:COMMENT_MAX].rstrip()


def user_comment(comment: str) -> str:
    """The EA's own comment, without the request id neuronet put in front of it."""
    return _TAG.sub("", comment, count=1)


class TradeSetupError(NeuronetError, ValueError):
    """A live trade context was given an unusable setting (magic number, deviation, symbol)."""


class TerminalRequests:
    """Sending requests and reading state for ``TerminalTrade`` (which supplies symbol, clock and link)."""

    link: Any
    symbol: str
    deviation: int
    last_retcode: int
    retries: int
    backoff: float
    requote_retries: int
    lost_reply_wait: float
    lost_reply_settle: float
    monotonic: Callable[[], float]
    unresolved: dict[str, Unresolved]
    _quote_time: int | None
    _record: Callable[[dict], None] | None

    # -- reading ---------------------------------------------------------------------------------------------
    def _read(self, name: str, *args: Any, none_ok: bool = False, **kwargs: Any) -> Any:
        """A read-only call, retried on a dropped link or a transient error (reading twice is harmless).

        ``None`` with ``last_error()`` "success" is an empty answer (None). ``None`` with an error raises
        the error it names, except that with ``none_ok`` a trade-server error ("not found") gives None:
        a position list that failed must never read as "no positions"."""
        for attempt in range(self.retries + 1):
            try:
                answer, error = self.link.call(name, *args, **kwargs)
                if error is None or error[0] == RES_S_OK:
                    return answer
                if not none_ok or error[0] <= IPC_ERRORS:
                    raise error_from_last_error(f"{name}()", *error)
                return None
            except TerminalError as exc:
                if not (exc.transient or exc.code is None) or attempt == self.retries:
                    raise
                wait = self.backoff * 2**attempt
                log.warning("%s; retry %d of %d in %.2f s", exc, attempt + 1, self.retries, wait)
                time.sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    # -- refusing and recording ------------------------------------------------------------------------------
    def _note(self, event: str, **fields: Any) -> None:
        """One record, JSON-ready as the journal writes it (NaN and infinities kept, so it reads back)."""
        if self._record is not None:
            self._record(json_ready({"event": event, "symbol": self.symbol, **fields}))

    def _refuse(self, action: str, retcode: int, reason: str, **request: Any) -> None:
        """A request refused before it reached the terminal (a check or a limit): noted, logged, None."""
        self.last_retcode = retcode
        self._note(
            "refused",
            action=action,
            retcode=retcode,
            message=retcodes.message(retcode),
            reason=reason,
            request=request,
        )
        log.warning("%s %s refused: %s (%s)", self.symbol, action, reason, retcodes.message(retcode))
        return None

    # -- sending ---------------------------------------------------------------------------------------------
    def _submit(self, request: dict, verify: Verify | None = None) -> Outcome:
        """``order_check`` then ``order_send`` (see the module docstring); sets ``last_retcode``."""
        tag = new_tag()
        request["comment"] = tagged(tag, request.get("comment", ""))
        action = ACTIONS.get(request["action"], str(request["action"]))
        self._note("request", id=tag, action=action, request=request)
        out = self._checked(request)
        if out is None:
            out = self._send(request, tag, verify, self._quote_time)
        self.last_retcode = out.retcode
        self._note("result", id=tag, action=action, message=retcodes.message(out.retcode), **asdict(out))
        if out.ok:
            log.info(
                "%s %s #%s: %s",
                self.symbol,
                action,
                out.order or request.get("position", ""),
                retcodes.message(out.retcode),
            )
        else:
            what = "outcome unknown" if tag in self.unresolved else "refused"
            log.warning(
                "%s %s %s: %s (%s)", self.symbol, action, what, out.reason, retcodes.message(out.retcode)
            )
        return out

    def _checked(self, request: dict) -> Outcome | None:
        """``order_check``'s refusal, or None when the request may be sent."""
        try:
            answer, error = self.link.call("order_check", request)
        except TerminalError as exc:
            return Outcome(retcodes.CONNECTION, f"order_check() failed, nothing sent: {exc}")
        if answer is None:
            code, message = error or (0, "no answer")
            return Outcome(
                retcodes.INVALID if code > IPC_ERRORS else retcodes.CONNECTION,
                f"order_check() answered None ({code} {message}), nothing sent",
            )
        if answer.retcode not in (retcodes.CHECK_OK, *retcodes.SUCCESS):
            return Outcome(int(answer.retcode), f"order_check: {answer.comment}")
        return None

    def _send(self, request: dict, tag: str, verify: Verify | None, at: int | None) -> Outcome:
        """Send, and again at a requote's new price within the deviation; a lost reply is never sent again
        (``_after_lost``)."""
        first = request.get("price") or 0.0
        point = self.point
        out = Outcome(retcodes.ERROR, "not sent")
        for attempt in range(self.requote_retries + 1):
            out = self._send_once(request, tag, verify, at)
            if out.retcode not in (retcodes.REQUOTE, retcodes.PRICE_CHANGED) or request["action"] != DEAL:
                return out
            new = out.ask if request["type"] == 0 else out.bid
            moved = abs(new - first) / point if new and first else float("inf")
            if moved > self.deviation + 1e-6:
                return Outcome(
                    out.retcode,
                    f"the price moved to {new:.10g}, {moved:.1f} points from "
                    f"{first:.10g}: beyond the deviation of {self.deviation} points",
                    bid=out.bid,
                    ask=out.ask,
                )
            self._note("requote", id=tag, retcode=out.retcode, price=new, points=moved)
            if attempt < self.requote_retries:
                log.info(
                    "%s: %s at %.10g, sent again (%.1f points from the decision price)",
                    self.symbol,
                    retcodes.message(out.retcode),
                    new,
                    moved,
                )
                request["price"] = new
        return out

    def _send_once(self, request: dict, tag: str, verify: Verify | None, at: int | None) -> Outcome:
        try:
            answer, error = self.link.call("order_send", request)
        except TerminalError as exc:
            return self._after_lost(request, tag, verify, at, str(exc))
        if answer is None:
            code, message = error or (0, "no answer")
            if code <= IPC_ERRORS:
                return self._after_lost(request, tag, verify, at, f"{code} {message}")
            return Outcome(retcodes.INVALID, f"order_send() answered None ({code} {message})")
        return Outcome(
            int(answer.retcode),
            str(answer.comment),
            int(answer.order),
            int(answer.deal),
            float(answer.price),
            float(answer.volume),
            bid=float(answer.bid),
            ask=float(answer.ask),
        )

    def _after_lost(
        self, request: dict, tag: str, verify: Verify | None, at: int | None, why: str
    ) -> Outcome:
        """What became of a request whose reply was lost: its outcome when the terminal shows it within two
        looks, else "request canceled by timeout" (10012) with the request kept in ``unresolved``. Never
        sent again: it may have executed, or be executing still (a terminal answering after the timeout)."""
        log.warning(
            "%s: no reply to request %s (%s); looking it up, it is not sent again",
            self.symbol,
            tag,
            why,
        )
        find = verify or functools.partial(self._find_tagged, at=at)
        for look in range(2):
            if look:
                time.sleep(self.lost_reply_wait)
            try:
                found = find(request, tag)
            except (TerminalError, QuoteError) as exc:  # not asked, or no server time to search by
                return self._keep_unresolved(
                    request, tag, verify, at, f"the terminal cannot be asked whether it executed ({exc})"
                )
            if found is not None:
                self._note("recovered", id=tag, retcode=found.retcode, order=found.order)
                return found
        return self._keep_unresolved(request, tag, verify, at, "the terminal does not show it (yet)")

    def _keep_unresolved(
        self, request: dict, tag: str, verify: Verify | None, at: int | None, why: str
    ) -> Outcome:
        self.unresolved[tag] = Unresolved(dict(request), at, self.monotonic(), verify)
        self._note("unresolved", id=tag, reason=why, request=request, at=at)
        return Outcome(
            retcodes.TIMEOUT,
            f"no reply to request {tag} and {why}; not sent again: it counts as open until the terminal "
            f"shows it, or shows nothing of it for {self.lost_reply_settle:g} s",
        )

    # -- finding a request by its id -------------------------------------------------------------------------
    def _find_tagged(self, request: dict, tag: str, at: int | None = None) -> Outcome | None:
        """The deal, position or pending order that carries ``tag`` in its comment (or, on a server that
        drops comments, the market deal ``_untagged_match`` finds); deals are searched a day either side
        of ``at``, the server time the request was sent at (default: the quote's time now)."""
        now = (
            at
            if at is not None
            else quote_of(self.symbol, self._read("symbol_info_tick", self.symbol, none_ok=True))[0]
        )
        deals = [
            d
            for d in self._read("history_deals_get", now - 86400, now + 86400) or ()
            if d.symbol == self.symbol
        ]
        deal = next((d for d in deals if d.comment.startswith(tag)), None) or _untagged_match(
            request, deals, now
        )
        if deal is not None:
            return Outcome(
                retcodes.DONE,
                "found after a lost reply",
                int(deal.order),
                int(deal.ticket),
                float(deal.price),
                float(deal.volume),
                int(deal.position_id),
            )
        for pos in self._read("positions_get", symbol=self.symbol) or ():
            if pos.comment.startswith(tag):
                return Outcome(
                    retcodes.DONE,
                    "found after a lost reply",
                    int(pos.ticket),
                    0,
                    float(pos.price_open),
                    float(pos.volume),
                    int(pos.ticket),
                )
        for order in self._read("orders_get", symbol=self.symbol) or ():
            if order.comment.startswith(tag):
                return Outcome(
                    retcodes.PLACED,
                    "found after a lost reply",
                    int(order.ticket),
                    0,
                    float(order.price_open),
                    float(order.volume_current),
                )
        return None

    def resolve(self) -> dict[str, Outcome | None]:
        """Look up again the requests whose reply was lost (``unresolved``; the runner calls this at every
        poll, the limits before every request that adds risk). One the terminal shows is recorded as
        "recovered"; one it still does not show ``lost_reply_settle`` seconds after it was sent is recorded
        as "not executed"; either leaves ``unresolved``, the others stay. Returns id -> outcome of those
        settled now (None: it did not execute). Raises ``TerminalError`` while the terminal cannot be asked
        (``QuoteError`` while its quote, the server's time, is garbage), keeping them for the next try."""
        out: dict[str, Outcome | None] = {}
        for tag, lost in list(self.unresolved.items()):
            find = lost.verify or functools.partial(self._find_tagged, at=lost.at)
            found = find(lost.request, tag)
            if found is None and self.monotonic() - lost.since < self.lost_reply_settle:
                continue  # it may still be executing: it stays counted as open
            out[tag] = found
            del self.unresolved[tag]
            if found is None:
                self._note("not executed", id=tag)
                log.warning(
                    "%s: request %s whose reply was lost is not on the terminal %g s after it was sent: "
                    "taken as not executed",
                    self.symbol,
                    tag,
                    self.lost_reply_settle,
                )
            else:
                self._note("recovered", id=tag, retcode=found.retcode, order=found.order)
                log.warning(
                    "%s: request %s whose reply was lost did execute (#%s)", self.symbol, tag, found.order
                )
        return out

    def possibly_open(self) -> int:
        """How many unresolved requests may have opened a position or placed an order: the limits count
        them as open (``Limits.check``) until they are settled."""
        return sum(lost.adds_risk for lost in self.unresolved.values())

    def restore_unresolved(self, lost: dict[str, dict]) -> None:
        """Requests a stopped run left unresolved (id -> the journal's "unresolved" record): looked up again
        from now on, their settling time counted afresh."""
        for tag, note in lost.items():
            request, at = dict(note.get("request") or {}), note.get("at")
            self.unresolved[tag] = Unresolved(request, None if at is None else int(at), self.monotonic())
            log.warning(
                "%s: request %s of the stopped run had no known outcome: looking it up", self.symbol, tag
            )


RECENT_S = 120  # how far back a lost market deal is looked for when the server dropped its comment


def _untagged_match(request: dict, deals: list, now: int):
    """The market deal a request made, on a server that keeps no comments: same magic, direction and
    volume (and position, for a close), without any request id, at most ``RECENT_S`` seconds before
    ``now`` (the time the request was sent) or after it. A false match can only hide a request (it is then
    not sent again), never duplicate one."""
    if request.get("action") != DEAL:
        return None
    closing = int(request.get("position", 0) or 0)
    for deal in reversed(deals):
        if (
            deal.time >= now - RECENT_S
            and not _TAG.match(deal.comment)
            and deal.magic == request.get("magic")
            and deal.type == request.get("type")
            and abs(deal.volume - float(request.get("volume") or 0.0)) < 1e-9
            and (not closing or deal.position_id == closing)
        ):
            return deal
    return None
