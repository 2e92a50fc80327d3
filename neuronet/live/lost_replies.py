"""Requests whose reply was lost: found on the terminal, or kept unresolved — never sent again.

When ``order_send`` gives no answer (the bridge dropped, the call ran past the link's timeout, the terminal
answered ``None`` with an IPC error), the request may or may not have executed, and it may still be
executing: a terminal that answers after the timeout fills it then. Every request carries an id in its
comment (``terminal_requests.new_tag``), so the positions, pending orders and the deals around the
request's time are searched for that id (for a change of stops or of an order, the state itself is
compared with the one asked for: the request's own ``verify``), twice, ``wait`` seconds apart. Found, it is
reported as done ("recovered"). Not found, or the terminal cannot be asked, it is **never sent again on our
own** — that is how one ``buy(0.1)`` became two positions — but answered "request canceled by timeout"
(10012) and kept in ``unresolved``: the limits count it as an open position or order (``possibly_open``),
and ``resolve`` looks it up again (the runner at every poll, the limits before every request that adds
risk) until the terminal shows it ("recovered") or, the terminal answering all along, ``settle`` seconds
have passed since it was sent without it appearing ("not executed"). A resumed run takes over those its
journal left unresolved (``restore``).

A server that drops request comments is met by a second rule: an untagged market deal of the same magic,
direction and volume from two minutes before the request on counts as the request's (``_untagged_match``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datafeeds.terminal_errors import TerminalError
from neuronet.live import retcodes
from neuronet.live.quotes import QuoteError, quote_of
from neuronet.live.terminal_requests import DEAL, PENDING, TAG, Outcome

log = logging.getLogger(__name__)

Verify = Callable[[dict, str], Outcome | None]  # finds what became of a request (its id) on the terminal
RECENT_S = 120  # how far before the request a deal is looked for when the server dropped its comment


@dataclass(frozen=True)
class Unresolved:
    """A request whose reply was lost and that the terminal has not shown yet: ``request`` as sent, ``at``
    the server time (broker seconds) it was sent at, where its deal is looked for (None: not known),
    ``since`` the local ``monotonic`` time it was sent at, and ``verify``, how it is looked up (None: by
    its id, ``LostReplies.find_tagged``)."""

    request: dict
    at: int | None
    since: float
    verify: Verify | None = None

    @property
    def adds_risk(self) -> bool:
        """It may have opened a position (a market deal that closes none) or placed a pending order."""
        action = self.request.get("action")
        return action == PENDING or (action == DEAL and not self.request.get("position"))


class LostReplies:
    """The requests of one symbol whose reply was lost (module docstring).

    ``read(name, *args, none_ok=False, **kwargs)`` is a terminal read (retried on a dropped link; raises
    ``TerminalError``); ``note(event, **fields)`` records an event (the journal's); ``wait``: seconds
    between the two first looks; ``settle``: seconds after which a request the terminal never showed is
    taken as not executed; ``monotonic``: the clock that counts them.
    """

    def __init__(
        self,
        symbol: str,
        read: Callable[..., Any],
        note: Callable[..., None],
        *,
        wait: float = 1.0,
        settle: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.symbol, self.read, self.note = symbol, read, note
        self.wait, self.settle, self.monotonic = float(wait), float(settle), monotonic
        self.unresolved: dict[str, Unresolved] = {}  # request id -> request whose outcome is not known yet

    def after_lost(self, request: dict, tag: str, verify: Verify | None, at: int | None, why: str) -> Outcome:
        """What became of a request whose reply was lost: its outcome when the terminal shows it within two
        looks, else "request canceled by timeout" (10012) with the request kept in ``unresolved``."""
        log.warning(
            "%s: no reply to request %s (%s); looking it up, it is not sent again", self.symbol, tag, why
        )
        find = verify or functools.partial(self.find_tagged, at=at)
        for look in range(2):
            if look:
                time.sleep(self.wait)
            try:
                found = find(request, tag)
            except (TerminalError, QuoteError) as exc:  # not asked, or no server time to search by
                why = f"the terminal cannot be asked whether it executed ({exc})"
                return self.keep(request, tag, verify, at, why)
            if found is not None:
                self.note("recovered", id=tag, retcode=found.retcode, order=found.order)
                return found
        return self.keep(request, tag, verify, at, "the terminal does not show it (yet)")

    def keep(self, request: dict, tag: str, verify: Verify | None, at: int | None, why: str) -> Outcome:
        """Hold ``request`` as unresolved (noted with ``why``): also what a run stopped while ``order_send``
        was in flight does, since the terminal may fill it after the stop."""
        self.unresolved[tag] = Unresolved(dict(request), at, self.monotonic(), verify)
        self.note("unresolved", id=tag, reason=why, request=request, at=at)
        return Outcome(
            retcodes.TIMEOUT,
            f"no reply to request {tag} and {why}; not sent again: it counts as open until the terminal "
            f"shows it, or shows nothing of it for {self.settle:g} s",
        )

    def resolve(self) -> dict[str, Outcome | None]:
        """Look up the ``unresolved`` requests again. One the terminal shows is recorded as "recovered"; one
        it still does not show ``settle`` seconds after it was sent as "not executed"; either leaves
        ``unresolved``, the others stay. Returns id -> outcome of those settled now (None: it did not
        execute). Raises ``TerminalError`` while the terminal cannot be asked (``QuoteError`` while its
        quote, the server's time, is garbage), keeping them for the next try."""
        out: dict[str, Outcome | None] = {}
        for tag, lost in list(self.unresolved.items()):
            find = lost.verify or functools.partial(self.find_tagged, at=lost.at)
            found = find(lost.request, tag)
            if found is None and self.monotonic() - lost.since < self.settle:
                continue  # it may still be executing: it stays counted as open
            out[tag] = found
            del self.unresolved[tag]
            if found is None:
                self.note("not executed", id=tag)
                log.warning(
                    "%s: request %s whose reply was lost is not on the terminal %g s after it was "
                    "sent: taken as not executed",
                    self.symbol,
                    tag,
                    self.settle,
                )
            else:
                self.note("recovered", id=tag, retcode=found.retcode, order=found.order)
                log.warning(
                    "%s: request %s whose reply was lost did execute (#%s)", self.symbol, tag, found.order
                )
        return out

    def possibly_open(self) -> int:
        """How many unresolved requests may have opened a position or placed an order: the limits count
        them as open (``Limits.check``) until they are settled."""
        return sum(lost.adds_risk for lost in self.unresolved.values())

    def restore(self, lost: dict[str, dict]) -> None:
        """Requests a stopped run left unresolved (id -> the journal's "unresolved" record): looked up again
        from now on, their settling time counted afresh."""
        for tag, note in lost.items():
            at = note.get("at")
            self.unresolved[tag] = Unresolved(
                dict(note.get("request") or {}), None if at is None else int(at), self.monotonic()
            )
            log.warning(
                "%s: request %s of the stopped run has no known outcome: looking it up", self.symbol, tag
            )

    def find_tagged(self, request: dict, tag: str, at: int | None = None) -> Outcome | None:
        """The deal, position or pending order that carries ``tag`` in its comment (or, on a server that
        drops comments, the market deal ``_untagged_match`` finds); deals are searched a day either side
        of ``at``, the server time the request was sent at (default: the quote's time now)."""
        now = at
        if now is None:
            now = quote_of(self.symbol, self.read("symbol_info_tick", self.symbol, none_ok=True))[0]
        deals = [
            d
            for d in self.read("history_deals_get", now - 86400, now + 86400) or ()
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
        for pos in self.read("positions_get", symbol=self.symbol) or ():
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
        for order in self.read("orders_get", symbol=self.symbol) or ():
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
            and not TAG.match(deal.comment)
            and deal.magic == request.get("magic")
            and deal.type == request.get("type")
            and abs(deal.volume - float(request.get("volume") or 0.0)) < 1e-9
            and (not closing or deal.position_id == closing)
        ):
            return deal
    return None
