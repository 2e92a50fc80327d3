"""The P&L of one server day on one symbol, as the daily loss limit and the status line count it.

A prop firm's daily loss counts from the start of the broker's server day: what the account held at
00:00 server time is valued at that moment, and only what happened after counts as today's. So:

- the run's deals are those of its magic numbers and every deal of a position they opened, whoever made it
  (a position closed by hand: MetaTrader gives that closing deal magic 0, and its loss is the run's);
- deals of today count their commission, swap and fee (``history_deals_get``), and their profit whole,
  except a deal closing a position opened before the day, which counts what the closed volume made since
  the day's start (valued as below, at the deal's price);
- a position opened today counts its whole floating profit and swap;
- volume added today to a carried netting position counts from its fill price;
- a position carried over midnight counts only its profit now minus its profit at the day's start. Its
  price at the start is the last one quoted before 00:00, the close of the last M1 bar before it
  (``copy_rates_from`` on ``TIMEFRAME_M1``; when the terminal holds none, the open of the day's first bar;
  when it fails to answer, unknown): the bid, and that plus the bar's spread the ask; a buy is valued at
  the bid and a sell at the ask, as MetaTrader values positions (``price_current``). The change is
  converted into the deposit currency as the terminal converts the position's profit now: by the profit
  per unit of price the position shows (``profit / (price_current - price_open)``), or, with the price
  back at its open, the symbol's ``trade_tick_value / trade_tick_size``. Of its swap only a charge counts
  (the rollover at the day's start is a cost of the day; a credit is not counted as a gain): the terminal
  keeps no swap per day.

The owner of a position and when it opened are read from its opening deal, or, where the terminal no
longer holds that deal (its History tab's range, a terminal that lost it), from the run's own sight of it
(``owned``: each position of the run journaled when first seen open, read back on a resume): a close of it
then counts its whole profit if it opened today, else what the closed volume made since the day's start,
converted by the symbol's tick value.

What cannot be known (no bar at the day's start, no conversion, a position closed today whose opening
deal neither the terminal nor the run knows) is named in ``DayPnl.unknown``: the limits refuse new risk
while it is not empty, rather than count a loss they cannot see as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronet.live.owned import Owned

TIMEFRAME_M1 = 1
DAY = 86400
ENTRY_IN, ENTRY_INOUT = 0, 2  # deal.entry (DEAL_ENTRY_OUT 1 and OUT_BY 3 close)


@dataclass(frozen=True)
class DayPnl:
    """A server day's P&L in the deposit currency, and what of it could not be known (one line each)."""

    value: float
    unknown: tuple[str, ...] = ()

    def __add__(self, other: DayPnl) -> DayPnl:
        return DayPnl(self.value + other.value, self.unknown + other.unknown)

    def shown(self) -> str:
        """As the status lines show it: signed, two decimals, then "?" while a part cannot be known."""
        return f"{self.value:+.2f}{'?' if self.unknown else ''}"


@dataclass(frozen=True)
class DayOpen:
    """The bid and the ask at the start of a server day: the last M1 close before 00:00 (else the day's
    first M1 open) and that plus the bar's spread (``DayPnlReader.day_open``)."""

    bid: float
    ask: float


@dataclass(frozen=True)
class Holding:
    """What is valued: ``volume`` lots of position ``ticket`` on ``side`` (+1 buy, -1 sell), opened at
    ``price_open``, now (or when closed) at ``price`` with ``profit`` in the deposit currency."""

    ticket: int
    side: int
    volume: float
    price_open: float
    price: float
    profit: float


_LOTS_EPS = 1e-9  # volumes closer than this are equal (lots are sums of 0.01-step floats)


def _signed(kind: Any, volume: Any) -> float:
    """A deal's or a position's volume, signed: + for a buy (type 0), - for a sell."""
    return float(volume) if int(kind) == 0 else -float(volume)


class DayPnlReader:
    """``read(name, *args, **kwargs)``: a terminal call (``TerminalRequests._read``). The prices at a
    day's start never change once known, so they are read once per day."""

    def __init__(self, read: Callable[..., Any], symbol: str, seen: Callable[[Owned], None] | None = None):
        self._read, self.symbol, self._seen = read, symbol, seen
        self._opens: dict[int, DayOpen] = {}
        self._owners: dict[int, int] = {}  # position -> the magic number of the request that opened it
        self._owned: dict[int, Owned] = {}  # the run's positions seen open (``owned``), journaled by ``seen``

    def restore(self, owned: Iterable[Owned]) -> None:
        """The run's positions a journal names (``owned.owned_in``): known after a restart as before it."""
        for o in owned:
            self._owned[o.ticket] = o
            self._owners[o.ticket] = o.magic

    def _see(self, held: Iterable[Any], magics: set[int]) -> None:
        """Each position of ``magics`` open now, the first time it is seen: kept and handed to ``seen``
        (the journal), so that its owner and opening are known once the terminal's history lacks them."""
        for p in held:
            if p.magic in magics and int(p.ticket) not in self._owned:
                owned = self._owned[int(p.ticket)] = Owned.of_position(p)
                self._owners[owned.ticket] = owned.magic
                if self._seen is not None:
                    self._seen(owned)

    def day_open(self, day: int) -> DayOpen | None:
        """The bid and ask at the start of server ``day`` (days since 1970 in broker time), or None: the
        close of the last M1 bar before 00:00 (so a weekend's or a holiday's gap is the new day's, as an
        equity taken at midnight counts it), else, when the terminal answers that it holds no bar before,
        the open of the day's first. A read that fails is None, not the day's first price: that already
        carries a weekend's gap and would hide it. None is not kept, so the next read asks again."""
        if day not in self._opens:
            start = int(day) * DAY
            last = self._read("copy_rates_from", self.symbol, TIMEFRAME_M1, start - 1, 1, none_ok=True)
            if last is None:  # not answered (its history still synchronizing): not "no bar before"
                return None
            if len(last) and int(last["time"][-1]) < start:
                bid, spread = float(last["close"][-1]), int(last["spread"][-1])
            else:
                end = start + DAY - 1
                first = self._read("copy_rates_range", self.symbol, TIMEFRAME_M1, start, end, none_ok=True)
                if first is None or not len(first) or not start <= int(first["time"][0]) <= end:
                    return None
                bid, spread = float(first["open"][0]), int(first["spread"][0])
            if not (np.isfinite(bid) and bid > 0 and spread >= 0):
                return None
            point = float(self._read("symbol_info", self.symbol).point)
            self._opens[day] = DayOpen(bid, bid + spread * point)
        return self._opens[day]

    def of(self, day: int, magics: Iterable[int]) -> DayPnl:
        """This symbol's P&L of server ``day`` for the positions of ``magics`` and their deals, whoever
        made them: a deal is the run's where its magic number is, or where the position it belongs to
        (``DEAL_POSITION_ID``) is one of the run's (``_ours``: closed by hand, the deal carries magic 0,
        or by another EA with its own number; its loss is the run's all the same)."""
        magics = set(magics)
        start = int(day) * DAY
        today = [
            d
            for d in self._read("history_deals_get", start, start + DAY - 1) or ()
            if d.symbol == self.symbol and start <= int(d.time) < start + DAY
        ]
        held = [p for p in self._read("positions_get", symbol=self.symbol) or () if p.symbol == self.symbol]
        self._see(held, magics)
        known = {int(p.ticket) for p in held if p.magic in magics}
        known.update(int(d.position_id) for d in today if d.magic in magics)
        total = DayPnl(0.0)
        deals = []
        for d in today:
            if d.magic in magics or int(d.position_id) in known:
                deals.append(d)
            elif int(d.entry) != ENTRY_IN:  # another's close: of one of the run's positions?
                ours = self._ours(int(d.position_id), magics)
                if ours is None:
                    pid, ticket = int(d.position_id), int(d.ticket)
                    why = f"{self.symbol}: the deals of position #{pid} (closed by #{ticket}) cannot be read"
                    total = total + DayPnl(min(float(d.profit), 0.0), (why,))
                elif ours:
                    deals.append(d)
        for d in deals:
            total = total + self._deal(d, day)
        for p in held:
            if p.magic in magics:
                added = [
                    d
                    for d in deals
                    if int(d.entry) in (ENTRY_IN, ENTRY_INOUT) and int(d.position_id) == int(p.ticket)
                ]
                total = total + self._position(p, day, added)
        return total

    def _ours(self, position: int, magics: set[int]) -> bool | None:
        """Whether ``position`` was opened by a request of ``magics``: known from the run's own sight of it
        (``owned``), else from its first entry deal's magic number (MetaTrader gives a position the number
        of the order that opened it); None where neither knows (its deals cannot be read). Known once, it
        never changes."""
        if position not in self._owners:
            history = self._read("history_deals_get", position=position, none_ok=True)
            entries = sorted(
                (d for d in history or () if int(d.entry) == ENTRY_IN),
                key=lambda d: (int(d.time), int(d.ticket)),
            )
            if not entries:
                return None
            self._owners[position] = int(entries[0].magic)
        return self._owners[position] in magics

    def _deal(self, d: Any, day: int) -> DayPnl:
        """A deal of the day: its costs, and its profit, of which a deal closing a position opened before
        the day counts only what the closed volume made since the day's start."""
        costs = float(d.commission) + float(d.swap) + float(d.fee)
        if int(d.entry) == ENTRY_IN:
            return DayPnl(costs + float(d.profit))
        pid, side = int(d.position_id), -1 if int(d.type) == 0 else 1  # a buy deal closes a sell
        history = self._read("history_deals_get", position=pid, none_ok=True) or ()
        if not any(int(h.entry) in (ENTRY_IN, ENTRY_INOUT) for h in history):
            # Its opening deal is not among them (a read that failed, or a history cut short after it):
            # not a position of today, whose opening deal the terminal would still hold.
            return DayPnl(costs) + self._unread(d, day, side)
        start = int(day) * DAY
        opened = self._open_price(history, start)
        owned = self._owned.get(pid)
        # Held at 00:00: by its entries before it, or seen open before the day where none is served (the
        # history cut at or after the day's start: a netting position's "in" or "in/out" of today is not
        # its opening then).
        carried = opened is not None or (owned is not None and owned.time < start)
        if carried and any(int(h.entry) in (ENTRY_IN, ENTRY_INOUT) and int(h.time) >= start for h in history):
            return DayPnl(costs) + self._walk(d, history, day)  # a netting position changed today
        if opened is None:  # the position was opened today: the whole profit is today's
            return DayPnl(costs + float(d.profit))
        held = Holding(pid, side, float(d.volume), opened, float(d.price), float(d.profit))
        return DayPnl(costs) + self._since_start(held, day, float(d.volume))

    def _unread(self, d: Any, day: int, side: int) -> DayPnl:
        """The profit of today of closing deal ``d`` of a position whose deals the terminal cannot give.
        The run saw it open (``owned``): opened today, its whole profit is today's; opened before, what the
        closed volume made since the day's start, converted by the symbol's tick value (its opening price
        is not needed: ``_per_price`` with the price at its open). Not seen: unknown, and its loss since
        it opened (if any) stands in the figure."""
        pid, profit = int(d.position_id), float(d.profit)
        owned = self._owned.get(pid)
        if owned is None:
            why = f"{self.symbol}: the deals of position #{pid} cannot be read"
            return DayPnl(min(profit, 0.0), (why,))
        if owned.time >= int(day) * DAY:
            return DayPnl(profit)
        price = float(d.price)
        return self._since_start(
            Holding(pid, side, float(d.volume), price, price, profit), day, float(d.volume)
        )

    def _walk(self, d: Any, history: Iterable[Any], day: int) -> DayPnl:
        """Today's profit of closing deal ``d`` of a position held at the start of ``day`` and added to or
        reversed since (a netting account; ``history``: its deals, from the day's start on at least). Its
        profit is from its average price, so neither it nor a price move from its first fill tells what the
        day made. The volume it held at 00:00 is its volume now less each deal of today (a buy adds, a sell
        takes away); from there today's deals are walked
        as a netting position averages: that volume at the price at 00:00 (the bid for a buy, the ask for
        a sell), each addition at its fill, a reversal at its price, and ``d`` closes its volume at that
        basis, converted by the symbol's tick value. Held nothing at 00:00 by those volumes, its whole profit
        is today's; unknown (its loss, if any, standing) where the day's start cannot be priced."""
        pid, start, profit = int(d.position_id), int(day) * DAY, float(d.profit)
        today = sorted(
            (h for h in history if int(h.time) >= start), key=lambda h: (int(h.time), int(h.ticket))
        )
        held = self._read("positions_get", symbol=self.symbol) or ()
        volume = sum(_signed(p.type, p.volume) for p in held if int(p.ticket) == pid)
        for h in today:
            volume -= _signed(h.type, h.volume)
        opened = self.day_open(day)
        info = self._read("symbol_info", self.symbol)
        value, size = float(info.trade_tick_value), float(info.trade_tick_size)
        if abs(volume) < _LOTS_EPS:  # by its own volumes it held nothing at 00:00 (a ticket noted before)
            return DayPnl(profit)
        if opened is None or not (value > 0 and size > 0):
            why = f"{self.symbol}: no price at the start of the server day to value position #{pid} at"
            return DayPnl(min(profit, 0.0), (why,))
        basis = opened.bid if volume > 0 else opened.ask
        for h in today:
            change, price = _signed(h.type, h.volume), float(h.price)
            if abs(volume) < _LOTS_EPS or (change > 0) == (volume > 0):  # opens or adds: at its fill
                basis = (abs(volume) * basis + abs(change) * price) / (abs(volume) + abs(change))
                volume += change
                continue
            closed = min(abs(change), abs(volume))
            made = (1.0 if volume > 0 else -1.0) * closed * (price - basis) * value / size
            if int(h.ticket) == int(d.ticket):
                return DayPnl(made)
            after = volume + change
            basis = price if abs(after) > _LOTS_EPS and (after > 0) != (volume > 0) else basis
            volume = after
        why = f"{self.symbol}: deal #{int(d.ticket)} of position #{pid} is not among its deals"
        return DayPnl(min(profit, 0.0), (why,))

    @staticmethod
    def _open_price(history: Iterable[Any], start: int) -> float | None:
        """The open price at ``start`` of the position whose deals are ``history``, or None when it opened
        after it (the volume-weighted price of its entries since the last reversal, as a netting position
        averages)."""
        entries = sorted(
            (d for d in history if int(d.time) < start and int(d.entry) in (ENTRY_IN, ENTRY_INOUT)),
            key=lambda d: (int(d.time), int(d.ticket)),
        )
        if not entries:
            return None
        last = max(i for i, d in enumerate(entries) if i == 0 or int(d.entry) == ENTRY_INOUT)
        since = entries[last:]
        volume = sum(float(d.volume) for d in since)
        return sum(float(d.price) * float(d.volume) for d in since) / volume if volume > 0 else None

    def _position(self, p: Any, day: int, added: list[Any]) -> DayPnl:
        """An open position: opened (or reversed) today, its whole profit and swap; carried over midnight,
        what its volume held at the start made since then plus what each entry of today (``added``, its
        deals of the day) made since its fill."""
        profit, swap = float(p.profit), float(p.swap)
        reversed_today = any(int(d.entry) == ENTRY_INOUT for d in added)
        if int(p.time) >= int(day) * DAY or reversed_today:  # it holds nothing from before the day
            return DayPnl(profit + swap)
        added = [d for d in added if int(d.entry) == ENTRY_IN]
        side = 1 if int(p.type) == 0 else -1
        held = Holding(
            int(p.ticket), side, float(p.volume), float(p.price_open), float(p.price_current), profit
        )
        today = sum(float(d.volume) for d in added)
        carried = self._since_start(held, day, max(0.0, held.volume - today))
        per_lot = self._per_price(held)
        if per_lot is None or not added:
            return carried + DayPnl(min(swap, 0.0))
        fills = sum(float(d.volume) * (held.price - float(d.price)) for d in added) * per_lot / held.volume
        return carried + DayPnl(fills + min(swap, 0.0))

    def _since_start(self, held: Holding, day: int, volume: float) -> DayPnl:
        """What ``volume`` lots of ``held`` made from the start of ``day`` to ``held.price``; where it
        cannot be known, its loss since it opened (if any) and the reason."""
        opened = self.day_open(day)
        per_price = self._per_price(held)
        if opened is None or per_price is None:
            why = (
                f"{self.symbol}: no M1 bar at the start of the server day to value position #{held.ticket} at"
                if opened is None
                else f"{self.symbol}: no conversion into the deposit currency for position #{held.ticket}"
            )
            return DayPnl(min(held.profit, 0.0), (why,))
        start_price = opened.bid if held.side > 0 else opened.ask
        return DayPnl(per_price * volume / held.volume * (held.price - start_price))

    def _per_price(self, held: Holding) -> float | None:
        """``held``'s profit in the deposit currency per unit of price (negative for a sell): the
        terminal's own conversion of its profit now, or the symbol's tick value with the price at its
        open."""
        moved = held.price - held.price_open
        info = self._read("symbol_info", self.symbol)
        if abs(moved) >= float(info.point) / 2 and held.profit != 0.0:
            return held.profit / moved
        value, size = float(info.trade_tick_value), float(info.trade_tick_size)
        if not (np.isfinite(value) and value > 0 and np.isfinite(size) and size > 0):
            return None
        return held.side * held.volume * value / size
