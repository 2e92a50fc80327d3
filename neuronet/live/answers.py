"""A bar decided again after a stop in the middle of ``on_bar``: the requests it had made are answered from
the journal, in order, instead of being sent again; one past them is new and sent; one that differs ends
what the bar sends (``JournalAnswers``).

Why: a run killed or stopped while ``on_bar`` was making its requests has sent some of them. Resumed in the
same bar, it decides that bar again (the EA's decision was cut short, so what it had not asked yet would
otherwise be lost): each request already journaled for it gets its journaled answer, so only what was not
sent is sent. On a live account a request journaled without its answer was cut off either before the
terminal heard of it (no terminal request journaled after it: never sent, so it is sent now) or while it
was being sent (answered 10012, "request canceled by timeout", as a lost reply is: looked up on the
terminal, never sent again). On paper every journaled request was booked again when the account was
rebuilt, so all are answered.
"""

from __future__ import annotations

import logging
from typing import Any

from neuronet.live.journal import json_ready
from neuronet.live.retcodes import CLIENT_DISABLES_AT, TIMEOUT

log = logging.getLogger(__name__)


def answered(made: list[dict], *, live: bool) -> list[dict]:
    """The answers a bar decided again takes, from the requests journaled for it (``call``, ``symbol``,
    ``args``, ``value``, ``retcode`` where its result was journaled, ``sent``: a terminal request followed
    it), per the module docstring."""
    out = []
    for entry in made:
        if live and "retcode" not in entry:
            if not entry.get("sent"):
                break  # cut off before it reached the terminal: it and what follows are sent now
            entry = {**entry, "retcode": TIMEOUT}
        out.append({k: v for k, v in entry.items() if k not in ("made", "sent")})
    return out


# What a request refused here answers the EA (as ``TerminalTrade`` and the paper broker answer a refusal).
REFUSED: dict[str, Any] = {
    "order": None,
    "pending": None,
    "close": 0,
    "close_by": False,
    "modify": False,
    "cancel": False,
    "modify_order": False,
}


class JournalAnswers:
    """The answers still to give (``replay``, set by ``start``) and the retcode of the last one given.

    A bar decided again that asks something other than the next request journaled for it has decided
    otherwise than before the stop (its EA reads positions that the requests already sent have changed: a
    reversal cut after its close sees no position and would buy where it had decided to sell). From that
    request to the end of the bar nothing is sent: each is refused with 10027 and a warning, and the EA
    decides again at its next bar on what the account then holds."""

    def __init__(self) -> None:
        self.replay: list[dict] = []
        self.retcode: int | None = None  # of the request last answered here (None: it was sent)
        self.diverged = False

    def start(self, again: list[dict]) -> None:
        """The bar about to be decided again, with the answers of the requests journaled for it."""
        self.replay, self.diverged = list(again), False

    def done(self) -> None:
        """The bar decided again is over: requests are sent again from now on."""
        self.replay, self.diverged = [], False

    def take(self, name: str, args: list, target: str | None) -> tuple[bool, Any, str | None]:
        """``(True, answer, None)`` when this request is the next one journaled for the bar decided again;
        ``(True, refused, why)`` once the bar has asked otherwise (the class docstring); else
        ``(False, None, None)``: a request past the journaled ones, to be sent."""
        self.retcode = None
        if self.replay:
            head = self.replay[0]
            same = json_ready(args) == json_ready(head["args"])
            if head["call"] == name and head.get("symbol") == target and same:
                self.replay.pop(0)
                self.retcode = int(head.get("retcode") or 0)
                return True, head.get("value"), None
            self.replay, self.diverged = [], True
        if not self.diverged:
            return False, None, None
        self.retcode = CLIENT_DISABLES_AT
        why = (
            f"{name} {target or ''} not sent: the bar decided again after the stop asks otherwise than "
            "it did before the stop (the requests it had sent changed what it reads)"
        ).replace("  ", " ")
        log.warning(why)
        return True, REFUSED.get(name), why
