"""The P&L of one server day on one symbol, as the daily loss limit and the status line count it.

A prop firm's daily loss counts from the start of the broker's server day: what the account held at
00:00 server time is valued at that moment, and only what happened after counts as today's. So:

- deals closed today count whole, with their commission, swap and fee (``history_deals_get``);
- a position opened today counts its whole floating profit and swap;
- a position carried over midnight counts only its profit now minus its profit at the day's start. Its
  price at the start is the first M1 bar of the day (``copy_rates_range`` on ``TIMEFRAME_M1``): its open
  is the bid, the open plus its spread the ask; a buy is valued at the bid and a sell at the ask, as
  MetaTrader values positions (``price_current``). The change is converted into the deposit currency as
  the terminal converts the position's profit now: by the profit per unit of price the position shows
  (``profit / (price_current - price_open)``), or, with the price back at its open, the symbol's
  ``trade_tick_value / trade_tick_size``. Of its swap only a charge counts (the rollover at the day's
  start is a cost of the day; a credit is not counted as a gain).

What cannot be known (no bar at the day's start, no conversion) is named in ``DayPnl.unknown``: the limits
refuse new risk while it is not empty, rather than count a loss they cannot see as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

TIMEFRAME_M1 = 1
DAY = 86400


@dataclass(frozen=True)
class DayPnl:
    """A server day's P&L in the deposit currency, and what of it could not be known (one line each)."""

    value: float
    unknown: tuple[str, ...] = ()

    def __add__(self, other: DayPnl) -> DayPnl:
        return DayPnl(self.value + other.value, self.unknown + other.unknown)


@dataclass(frozen=True)
class DayOpen:
    """The bid and the ask at the start of a server day (the first M1 bar's open and its spread)."""

    bid: float
    ask: float


class DayPnlReader:
    """``read(name, *args, **kwargs)``: a terminal call (``TerminalRequests._read``). The day's opening
    prices never change once the day's first bar is there, so they are read once per day."""

    def __init__(self, read: Callable[..., Any], symbol: str):
        self._read, self.symbol = read, symbol
        self._opens: dict[int, DayOpen] = {}

    def day_open(self, day: int) -> DayOpen | None:
        """The bid and ask at the start of server ``day`` (days since 1970 in broker time), or None."""
        if day not in self._opens:
            start = int(day) * DAY
            end = start + DAY - 1
            rates = self._read("copy_rates_range", self.symbol, TIMEFRAME_M1, start, end, none_ok=True)
            if rates is None or not len(rates):
                return None
            bid, spread = float(rates["open"][0]), int(rates["spread"][0])
            if not (np.isfinite(bid) and bid > 0 and int(rates["time"][0]) < end):
                return None
            point = float(self._read("symbol_info", self.symbol).point)
            self._opens[day] = DayOpen(bid, bid + spread * point)
        return self._opens[day]

    def of(self, day: int, magics: Iterable[int]) -> DayPnl:
        """This symbol's P&L of server ``day`` for the positions and deals of ``magics``."""
        magics = set(magics)
        start = int(day) * DAY
        done = sum(
            float(d.profit) + float(d.commission) + float(d.swap) + float(d.fee)
            for d in self._read("history_deals_get", start, start + DAY - 1) or ()
            if d.symbol == self.symbol and d.magic in magics and start <= int(d.time) < start + DAY
        )
        total = DayPnl(done)
        for p in self._read("positions_get", symbol=self.symbol) or ():
            if p.symbol == self.symbol and p.magic in magics:
                total = total + self._position(p, day)
        return total

    def _position(self, p: Any, day: int) -> DayPnl:
        profit, swap = float(p.profit), float(p.swap)
        if int(p.time) >= int(day) * DAY:  # opened today: all of it is today's
            return DayPnl(profit + swap)
        opened = self.day_open(day)
        if opened is None:
            why = f"{self.symbol}: no M1 bar at the start of the server day to value position #{p.ticket} at"
            return DayPnl(min(profit, 0.0) + min(swap, 0.0), (why,))
        per_price = self._per_price(p)
        if per_price is None:
            why = f"{self.symbol}: no conversion into the deposit currency for position #{p.ticket}"
            return DayPnl(min(profit, 0.0) + min(swap, 0.0), (why,))
        start_price = opened.bid if int(p.type) == 0 else opened.ask
        return DayPnl(per_price * (float(p.price_current) - start_price) + min(swap, 0.0))

    def _per_price(self, p: Any) -> float | None:
        """The position's profit in the deposit currency per unit of price (signed: negative for a sell)."""
        moved = float(p.price_current) - float(p.price_open)
        info = self._read("symbol_info", self.symbol)
        if abs(moved) >= float(info.point) / 2 and float(p.profit) != 0.0:
            return float(p.profit) / moved
        value, size = float(info.trade_tick_value), float(info.trade_tick_size)
        if not (np.isfinite(value) and value > 0 and np.isfinite(size) and size > 0):
            return None
        return (1 if int(p.type) == 0 else -1) * float(p.volume) * value / size
