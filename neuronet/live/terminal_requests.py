"""How one trade request reaches the terminal: ``order_check``, then ``order_send``, requotes retried within
the deviation, and a lost reply handed to ``lost_replies`` (a mix-in of ``TerminalTrade``).

Idempotency: every request carries an id in its comment (``nn`` + 8 hex digits, then the EA's comment, cut
to the terminal's 31 characters) and is sent once. When ``order_send`` gives no answer, or answers 10012
("request canceled by timeout": whether the trade server filled it is as unknown), the request's fate is
``lost_replies``' to find out: found on the terminal, or kept unresolved (10012) — never sent again.

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
``day_pnl``, ``day``), "unknown day pnl" (a part of today's P&L cannot be known, so new orders are refused:
``reason``, ``day``; once per reason and server day).
Each carries ``symbol``; none carries a time (the journal stamps it). A refusal is also logged as a warning
with its one-line retcode message.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from datafeeds.terminal_errors import TerminalError, error_from_last_error
from neuronet.errors import NeuronetError
from neuronet.live import retcodes
from neuronet.live.journal import json_ready

if TYPE_CHECKING:
    from neuronet.live.lost_replies import LostReplies, Verify

log = logging.getLogger(__name__)

DEAL, PENDING, SLTP, MODIFY, REMOVE, CLOSE_BY = 1, 5, 6, 7, 8, 10
ACTIONS = {1: "deal", 5: "pending", 6: "sltp", 7: "modify", 8: "remove", 10: "close_by"}
COMMENT_MAX = 31  # characters the terminal keeps of a request's comment
TAG = re.compile(r"^nn[0-9a-f]{8}(?: |$)")
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


def new_tag() -> str:
    return "nn" + secrets.token_hex(4)


def tagged(tag: str, comment: str) -> str:
    return f"{tag} {comment}"[:COMMENT_MAX].rstrip()


def user_comment(comment: str) -> str:
    """The EA's own comment, without the request id neuronet put in front of it."""
    return TAG.sub("", comment, count=1)


def sent_magic(note: Any) -> int | None:
    """The magic number of a request this run sent to the terminal (a "request" note), or None for any
    other note: a request refused before the terminal (a limit, magic 0 of the trades placed by hand) made
    no position or order of its number, so that number is not the run's."""
    if not isinstance(note, dict) or note.get("event") != "request":
        return None
    request = note.get("request")
    magic = request.get("magic") if isinstance(request, dict) else None
    return int(magic) if isinstance(magic, int) and not isinstance(magic, bool) and magic > 0 else None


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
    lost: LostReplies
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
            try:
                out = self._send(request, tag, verify, self._quote_time)
            except BaseException:  # Ctrl-C (or a crash) while the terminal may be executing it
                self.lost.keep(request, tag, verify, self._quote_time, "the run stopped while it was sent")
                raise
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
            what = "outcome unknown" if tag in self.lost.unresolved else "refused"
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
            return self.lost.after_lost(request, tag, verify, at, str(exc))
        if answer is None:
            code, message = error or (0, "no answer")
            if code <= IPC_ERRORS:
                return self.lost.after_lost(request, tag, verify, at, f"{code} {message}")
            return Outcome(retcodes.INVALID, f"order_send() answered None ({code} {message})")
        if int(answer.retcode) == retcodes.TIMEOUT:  # "canceled by timeout": the server may have filled it
            return self.lost.after_lost(request, tag, verify, at, f"10012 {answer.comment}")
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
