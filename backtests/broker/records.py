"""The broker's records, one named field each: closed trades, MetaTrader's deals and orders, and the
floating segments of positions that the curves are rebuilt from. Each record names its symbol (one account
may trade several); money is in the deposit currency.

Times are kept as the index of the bar they fell in plus, where a minute or tick made them, its UTC
nanoseconds (``None`` at a bar's open); ``Ledger`` turns both into timestamps once, in its frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

import pandas as pd

TRADE_COLUMNS = (
    "ticket",
    "symbol",
    "type",
    "lots",
    "entry_time",
    "entry_price",
    "exit_time",
    "exit_price",
    "sl",
    "tp",
    "exit_reason",
    "commission",
    "swap",
    "profit",
    "net_profit",
    "entry_bar",
    "exit_bar",
    "magic",
    "comment",
)

ORDER_COLUMNS = (
    "ticket",
    "time_setup",
    "symbol",
    "type",
    "lots",
    "price",
    "stoplimit",
    "sl",
    "tp",
    "expiration",
    "time_done",
    "fill_price",
    "state",
    "position",
    "magic",
    "comment",
)

DEAL_COLUMNS = (
    "deal",
    "time",
    "symbol",
    "order",
    "position",
    "type",
    "entry",
    "lots",
    "price",
    "commission",
    "swap",
    "profit",
    "balance",
    "magic",
    "comment",
)


@dataclass(slots=True)
class Trade:
    """A closed trade (a position's exit, or part of one): money in the deposit currency, commission and
    swap signed as they hit the balance."""

    ticket: int
    type: str  # "buy" or "sell": the position's direction
    lots: float
    entry_ns: int | None
    entry_price: float
    exit_ns: int | None
    exit_price: float
    sl: float | None
    tp: float | None
    exit_reason: str
    commission: float
    swap: float
    profit: float
    net_profit: float
    entry_bar: int
    exit_bar: int
    magic: int
    comment: str
    symbol: str = ""
    rate: float = 1.0  # deposit currency per unit of the profit currency at the exit (MAE/MFE use it)
    margin_price: float | None = None  # the price its margin was charged at; None: its entry price

    def row(self) -> tuple:
        """The trade in ``TRADE_COLUMNS`` order (the times still as UTC ns or None)."""
        return _TRADE_ROW(self)


@dataclass(slots=True)
class Deal:
    """One of MetaTrader's deals: an entry ("in"), an exit ("out"; "out_by" for a close-by) or a netting
    reversal, with the balance after it."""

    deal: int
    bar: int
    ns: int | None
    order: int | None
    position: int
    type: str
    entry: str
    lots: float
    price: float
    commission: float
    swap: float
    profit: float
    balance: float
    magic: int
    comment: str
    symbol: str = ""

    def row(self) -> tuple:
        """The deal in ``DEAL_COLUMNS`` order (its time still as a bar index)."""
        return _DEAL_ROW(self)


@dataclass(slots=True)
class OrderRecord:
    """One of MetaTrader's orders as the report lists it; a pending order's record follows it (changed,
    filled, cancelled, expired)."""

    ticket: int | None
    bar_setup: int
    setup_ns: int | None
    type: str
    lots: float
    price: float | None
    stoplimit: float | None
    sl: float | None
    tp: float | None
    expiration: pd.Timestamp | None
    bar_done: int | None
    done_ns: int | None
    fill_price: float | None
    state: str
    position: int | None
    magic: int
    comment: str
    symbol: str = ""

    def row(self) -> tuple:
        """The order in ``ORDER_COLUMNS`` order (its times still as bar indices)."""
        return _ORDER_ROW(self)


class Segment(NamedTuple):
    """A position state floating over bars ``[start, end)``: its direction, volume and average price, and
    the price its margin is charged at (deposit currency per unit of the margin formula's base: see
    ``backtests.broker.margin``)."""

    start: int
    end: int
    side: int
    lots: float
    price: float
    margin_price: float


# Each record's fields in its table's column order (the times as the fields they are made from).
TRADE_TABLE_FIELDS = tuple(c.replace("_time", "_ns") for c in TRADE_COLUMNS)
DEAL_TABLE_FIELDS = tuple(c if c != "time" else "bar" for c in DEAL_COLUMNS)
ORDER_TABLE_FIELDS = tuple(
    {"time_setup": "bar_setup", "time_done": "bar_done"}.get(c, c) for c in ORDER_COLUMNS
)
# (``operator.attrgetter``: one C call a row)
_TRADE_ROW = attrgetter(*TRADE_TABLE_FIELDS)
_DEAL_ROW = attrgetter(*DEAL_TABLE_FIELDS)
_ORDER_ROW = attrgetter(*ORDER_TABLE_FIELDS)
