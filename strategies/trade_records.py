"""The records of the trade API, in MetaTrader's shapes: an open ``Position``, a working pending ``Order``,
the ``Account``, a ``Tick``, and the one table of order types (``ORDER_TYPES``, by name and by terminal
code) that the trade API, the backtest broker, the request checks and the terminal share.

They are plain immutable values with no behaviour of the trade itself; ``strategies.trade`` (where EAs and
the brokers import them from) holds the interface that hands them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import pandas as pd


@dataclass(frozen=True)
class Position:
    """An open position as the EA sees it (volume in lots, prices as filled)."""

    ticket: int
    side: int  # +1 long, -1 short
    lots: float
    price_open: float
    time_open: pd.Timestamp
    bar_open: int
    sl: float | None
    tp: float | None
    magic: int
    comment: str
    profit: float  # floating, deposit currency: at the last closed bar's close (ticks model: the tick)
    symbol: str = ""


@dataclass(frozen=True)
class Order:
    """A working pending order as the EA sees it (``kind`` e.g. "buy_limit", "sell_stop_limit")."""

    ticket: int
    kind: str
    side: int  # +1 buy, -1 sell
    lots: float
    price: float  # the limit or stop price
    stoplimit: float | None  # the limit price placed when a stop-limit order's stop price is reached
    sl: float | None
    tp: float | None
    expiration: pd.Timestamp | None  # None = good till cancelled
    time_setup: pd.Timestamp
    magic: int
    comment: str
    symbol: str = ""


@dataclass(frozen=True)
class OrderType:
    """One of MetaTrader's order types (``ENUM_ORDER_TYPE``): its name in the trade API, its code in a
    terminal request, its direction and how it is triggered.

    ``trigger``: "market" (a deal now), "limit" (at its price or better), "stop" (a market deal once its
    price is reached), "stop_limit" (places a limit order at its stop-limit price once its price is
    reached) or "close_by" (one position closed by an opposite one).
    """

    name: str
    code: int  # ORDER_TYPE_* of the MetaTrader5 API
    side: int  # +1 buy, -1 sell, 0 close-by
    trigger: str

    @property
    def pending(self) -> bool:
        return self.trigger in ("limit", "stop", "stop_limit")

    @property
    def above(self) -> bool:
        """Placed above the market and reached from below (buy stop, buy stop-limit, sell limit); the other
        pending orders lie below it and are reached from above."""
        return (self.trigger in ("stop", "stop_limit")) == (self.side > 0)

    @property
    def becomes(self) -> str | None:
        """The limit order a stop-limit order places when its price is reached (None for the others)."""
        return self.name.replace("stop_limit", "limit") if self.trigger == "stop_limit" else None


# The one table of order types: the trade API, the backtest broker, the request checks and the terminal.
ORDER_TYPES: dict[str, OrderType] = {
    t.name: t
    for t in (
        OrderType("buy", 0, +1, "market"),
        OrderType("sell", 1, -1, "market"),
        OrderType("buy_limit", 2, +1, "limit"),
        OrderType("sell_limit", 3, -1, "limit"),
        OrderType("buy_stop", 4, +1, "stop"),
        OrderType("sell_stop", 5, -1, "stop"),
        OrderType("buy_stop_limit", 6, +1, "stop_limit"),
        OrderType("sell_stop_limit", 7, -1, "stop_limit"),
        OrderType("close_by", 8, 0, "close_by"),
    )
}
PENDING_TYPES: dict[str, OrderType] = {name: t for name, t in ORDER_TYPES.items() if t.pending}
ORDER_TYPE_CODES: dict[int, OrderType] = {t.code: t for t in ORDER_TYPES.values()}

_NAN = float("nan")


class _TickFields(NamedTuple):
    time_ns: int  # UTC nanoseconds since the epoch
    bid: float
    ask: float
    last: float  # last trade price (NaN where the source has no trades)
    volume: float  # volume of the last trade (0 where none)


class Tick(_TickFields):
    """One price change as ``on_tick`` receives it (MetaTrader's ``MqlTick``): UTC time, bid and ask.

    ``Tick(time, bid, ask, last=nan, volume=0.0)``; ``last`` and ``volume`` are NaN / 0 where the source has
    none (FX quotes carry no trades). An immutable named tuple holding the time as UTC nanoseconds
    (``time_ns``): a backtest hands millions of these to ``on_tick``, and a tuple is built and read several
    times faster than a dataclass, while ``time`` makes the ``pd.Timestamp`` only when it is read.
    """

    __slots__ = ()

    def __new__(cls, time: Any, bid: float, ask: float, last: float = _NAN, volume: float = 0.0):
        stamp = pd.Timestamp(time)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        last = _NAN if last != last else float(last)  # one NaN object: equal ticks compare equal
        return tuple.__new__(cls, (int(stamp.value), float(bid), float(ask), last, float(volume)))

    @classmethod
    def at(cls, time_ns: int, bid: float, ask: float) -> Tick:
        """A tick from UTC nanoseconds, without converting anything (the backtest's hot path)."""
        return tuple.__new__(cls, (time_ns, bid, ask, _NAN, 0.0))

    @property
    def time(self) -> pd.Timestamp:
        return pd.Timestamp(self[0], tz="UTC")

    def __repr__(self) -> str:
        return f"Tick(time={self.time}, bid={self[1]}, ask={self[2]}, last={self[3]}, volume={self[4]})"


@dataclass(frozen=True)
class Account:
    """Account state at the current decision time (deposit currency)."""

    balance: float
    equity: float
    margin: float
    free_margin: float
    leverage: float
    currency: str
