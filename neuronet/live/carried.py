"""Positions carried into a live run and closed during it: whose they are and how they opened.

A position of the run's magic numbers may be open before the run's first live bar (held over a restart
with a new journal, or found on the terminal) and closed during the run: by the EA, by its SL or TP, by
hand (the closing deal carries magic 0) or by another EA (its number). Its closing deal falls in the run's
span and its money is the run's: MetaTrader's history report over a period shows a closing deal's profit
in the period it was made, wherever the position's entry lies. Its opening deal lies before the span, so
it is read on its own (``history_deals_get(position=...)``) or, where the terminal no longer holds it,
from the journal's "owned" notes (``owned``: the run saw the position open). On a netting account the run
may add to it: an "in" deal in the span whose order is not the position's opening one (a position's
identifier is its opening order's ticket, ``DEAL_POSITION_ID``) leaves it carried, with the lots it held
at the start, which its close is split by.

A closing deal in the span whose position opened before it and whose owner neither the terminal's
history nor the journal can tell is refused by name: left out, a loss of the run's would vanish from its
report; taken in, another's money would be counted as the run's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from neuronet.live.errors import JournalError
from neuronet.live.owned import Owned

IN, INOUT = 0, 2  # DEAL_ENTRY_IN, DEAL_ENTRY_INOUT


@dataclass(frozen=True)
class Carried:
    """A position opened before the run: its side (+1 buy, -1 sell), opening price (the volume-weighted
    price of its entries since the last reversal, as a netting position averages), opening time (broker
    seconds, and milliseconds where the terminal gives them), magic number and comment."""

    side: int
    price: float
    time: int
    time_msc: int | None
    magic: int
    comment: str
    volume: float | None = None  # lots held at the run's start; None where its deals before it are not read


def _volume_before(history: Iterable[Any], lo: int, side: int) -> float | None:
    """The lots a position held at ``lo`` (broker seconds): its deals before it, a buy adding and a sell
    taking away (a netting reversal included), whatever their entry; None where they do not leave it
    open on its ``side`` (deals missing)."""
    held = round(
        sum(float(d.volume) * (1 if int(d.type) == 0 else -1) for d in history if int(d.time) < lo), 8
    )
    return abs(held) if held * side > 0 else None


def _from_entries(entries: list[Any]) -> Carried:
    """From its entry deals before the run, oldest first."""
    last = max(i for i, d in enumerate(entries) if i == 0 or int(d.entry) == INOUT)
    since = entries[last:]
    volume = sum(float(d.volume) for d in since)
    price = sum(float(d.price) * float(d.volume) for d in since) / volume if volume > 0 else 0.0
    began = since[0]  # its opening, or its last reversal on a netting account
    side = 1 if int(began.type) == 0 else -1
    msc = getattr(began, "time_msc", None)
    magic = int(entries[0].magic)  # a position keeps the number of the order that opened it
    return Carried(side, price, int(began.time), None if not msc else int(msc), magic, str(began.comment))


def _from_owned(owned: Owned, volume: float | None) -> Carried:
    """From the journal's note of it (its comment is not noted)."""
    return Carried(owned.side, owned.price_open, owned.time, None, owned.magic, "", volume)


def _volume_since(now: float | None, history: list[Any], rows: list[Any], lo: int, side: int) -> float | None:
    """The lots a position held at ``lo`` whose deals before it are not served: its signed volume ``now``
    (open on the terminal; 0 when closed) less each served deal since ``lo`` (a buy adds, a sell takes
    away). None where that cannot be told: ``now`` unread, a deal of the span (``rows``) not served, or
    a volume not on the position's ``side``."""
    served = {int(d.ticket) for d in history}
    if now is None or not all(int(d.ticket) in served for d in rows):
        return None
    held = now - sum(float(d.volume) * (1 if int(d.type) == 0 else -1) for d in history if int(d.time) >= lo)
    held = round(held, 8)
    return abs(held) if held * side > 0 else None


def carried_positions(
    read: Callable[..., Any],
    magics: Iterable[int],
    rows: list[Any],
    owned: dict[int, Owned],
    lo: int,
    path: str,
    held: Callable[[int], float | None] | None = None,
) -> dict[int, Carried]:
    """The run's positions among ``rows`` (one symbol's buy and sell deals in the run's span) that opened
    before the span (``lo``, broker seconds), each with how it opened, whether or not a netting account's
    "in" deal added to it in the span (``Carried.volume``, the lots it held at the start, is then known or
    the position refused); a position opened in the span (by anyone) is not carried. ``read(position)``:
    the terminal's deals of a position (None where it cannot say); ``held(position)``: its signed lots
    open on the terminal now (0 when closed, None where it cannot say), for the volume of one known from
    the journal only."""
    magics = set(magics)
    out: dict[int, Carried] = {}
    # Opened in the span, by anyone: a position's identifier is the ticket of the order that opened it
    # (``DEAL_POSITION_ID``), so an "in" deal of another order only adds to it (a netting account).
    entered = {int(d.position_id) for d in rows if int(d.entry) == IN and int(d.order) == int(d.position_id)}
    for pid in sorted({int(d.position_id) for d in rows} - entered):
        deals = [d for d in rows if int(d.position_id) == pid]
        added = any(int(d.entry) == IN for d in deals)  # a netting account's "in" deal added to it
        mine = any(int(d.magic) in magics for d in deals)
        history = read(pid) or ()
        entries = sorted(
            (d for d in history if int(d.entry) in (IN, INOUT) and int(d.time) < lo),
            key=lambda d: (int(d.time), int(d.ticket)),
        )
        if entries:
            carried = _from_entries(entries)
            carried = replace(carried, volume=_volume_before(history, lo, carried.side))
        elif pid in owned:
            now = None if held is None else held(pid)
            carried = _from_owned(owned[pid], _volume_since(now, list(history), deals, lo, owned[pid].side))
        else:
            first = min(deals, key=lambda d: (int(d.time), int(d.ticket)))
            whose = "of the run's magic number" if mine else f"closed by magic {int(first.magic)}"
            raise JournalError(
                f"journal {path}: position #{pid} ({whose}, deal #{int(first.ticket)} "
                "in the run's span) opened before the run, and neither the terminal's deal history nor the "
                "journal holds its opening deal: whose it is and its entry cannot be told (load more of "
                "the history in the terminal's History tab)"
            )
        if added and carried.volume is None:
            raise JournalError(
                f"journal {path}: position #{pid} opened before the run and was added to during it, and the "
                "lots it held at the start cannot be told from the terminal's deals (load more of the "
                "history in the terminal's History tab): its close cannot be split between the lots "
                "carried in and the run's"
            )
        if carried.magic in magics:
            out[pid] = carried
    return out
