"""The positions a live run holds, as the journal knows them: who owns a position, without the terminal's
history.

Which EA a position belongs to is the magic number of the order that opened it (MetaTrader gives a
position its opening order's ``magic``; ``POSITION_MAGIC``). A deal that closes it by hand carries magic 0,
another EA's close carries that EA's number: only the position's opening deal tells it was the run's, and
a terminal answers ``history_deals_get(position=...)`` only over the history it still holds (a long-held
position's opening deal can be gone: the History tab's range, a terminal reinstalled or moved).

So each position of the run's magic numbers is journaled once, when the run first sees it open on the
terminal (``positions_get``): an "owned" note of the trade context (``TerminalTrade``) with its ticket
(``POSITION_TICKET``, its ``DEAL_POSITION_ID``), magic number, side, opening time (broker seconds) and
opening price. A resumed run reads them back (``rebuild``, ``multi_resume``), and so does ``neuronet live
report``: a position the journal owns is the run's whatever the terminal's history still holds, and its
side and opening time are known to value a close by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from typing import Any

from neuronet.live.errors import JournalError

EVENT = "owned"


@dataclass(frozen=True)
class Owned:
    """A position of the run seen open: ``side`` +1 buy, -1 sell; ``time`` its opening in broker seconds
    (``POSITION_TIME``); ``price_open`` as the terminal showed it then."""

    ticket: int
    magic: int
    side: int
    time: int
    price_open: float
    symbol: str = ""

    @classmethod
    def of_position(cls, p: Any) -> Owned:
        """From a ``positions_get`` row (``TradePosition``)."""
        side = 1 if int(p.type) == 0 else -1
        return cls(int(p.ticket), int(p.magic), side, int(p.time), float(p.price_open), str(p.symbol))

    def note(self) -> dict:
        """The trade context's note fields (its ``_note(EVENT, **fields)``; the symbol is the context's)."""
        return {
            "position": self.ticket,
            "magic": self.magic,
            "side": self.side,
            "time": self.time,
            "price_open": self.price_open,
        }


def owned_of(note: Any, where: str = "the journal") -> Owned | None:
    """The ``Owned`` of an "owned" note of the journal, None for any other note; an "owned" note whose
    fields are not a position's is a ``JournalError`` naming ``where`` (the journal and its line): taken
    as no note, a position of the run would pass for another's."""
    if not isinstance(note, dict) or note.get("event") != EVENT:
        return None
    try:
        owned = Owned(
            int(note["position"]),
            int(note["magic"]),
            int(note["side"]),
            int(note["time"]),
            float(note["price_open"]),
            str(note.get("symbol") or ""),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise JournalError(f"{where}: an owned note cannot be read ({exc})") from None
    if owned.ticket <= 0 or owned.side not in (1, -1):
        raise JournalError(
            f"{where}: an owned note cannot be read (position {owned.ticket}, side {owned.side})"
        )
    return owned


def owned_in(records: Iterable[dict], path: str | PathLike) -> dict[int, Owned]:
    """Every position the journal's "owned" notes name (ticket -> ``Owned``), the last note of each."""
    out: dict[int, Owned] = {}
    for rec in records:
        if rec.get("source") != "terminal":
            continue
        if (owned := owned_of(rec.get("terminal"), f"journal {path} line {rec.get('_line')}")) is not None:
            out[owned.ticket] = owned
    return out
