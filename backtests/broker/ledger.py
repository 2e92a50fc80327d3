"""The account's ledger: every trade, deal, order, refused request, balance change and floating segment, in
the order they happened, and the result tables and curves made from them once the run is over.

The ledger only records: the broker decides, and passes each record the bar index and the UTC ns of the
minute or tick it happened at (None at a bar's open); the frames turn those into times here, once. One
account may trade several symbols (``add``): every record names its symbol, the bars of all symbols lie on
one timeline (``backtests.alignment``), and the curves add up each symbol's floating profit and margin in
the deposit currency (``backtests.broker.convert``).
"""

from __future__ import annotations

import copy
import logging
import math
from itertools import starmap
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from backtests.broker.book import OpenPosition
from backtests.broker.columns import Columns, Events, field_names, rows_of
from backtests.broker.config import AccountConfig
from backtests.broker.convert import UNITY, convert_closes
from backtests.broker.held import Held, held_steps
from backtests.broker.margin import MarginModel
from backtests.broker.market import Market
from backtests.broker.records import (
    DEAL_COLUMNS,
    DEAL_TABLE_FIELDS,
    ORDER_COLUMNS,
    ORDER_TABLE_FIELDS,
    TRADE_COLUMNS,
    TRADE_TABLE_FIELDS,
    Deal,
    OrderRecord,
    Segment,
    Trade,
)
from backtests.curves import ClosedTrades, distinct, worst_floating

log = logging.getLogger("backtests.broker")

# Each kind of record: its built records, the rows recorded since, and its fields (the rows' order).
_KINDS = {
    "trades": ("_trades", "_trade_rows", field_names(Trade)),
    "deals": ("_deals", "_deal_rows", field_names(Deal)),
    "orders": ("_orders", "_order_rows", field_names(OrderRecord)),
}


def json_safe(value: object) -> object:
    """NaN and infinities as text, so a rejected request with such a value still makes valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class _Symbol(NamedTuple):
    """What the frames and curves read of one symbol: its bars, its contract size, its margin model and the
    rate its profit is converted at (``backtests.broker.convert``)."""

    market: Market
    contract_size: float
    margin: MarginModel
    rate: Any


class Ledger:
    """Records of one account (see the module docstring); ``market`` is the first symbol's bars, whose
    times date every record (all symbols share the timeline)."""

    def __init__(self, market: Market, config: AccountConfig, margin: MarginModel, symbol: str = ""):
        self.market = market
        self.config = config
        self.margin = margin
        self.symbol = symbol  # the first symbol: records that name none are its
        self.symbols: dict[str, _Symbol] = {}
        # The records as they are read (``trades``, ``deals``, ``orders``, ``segments``), and the rows of
        # plain values recorded since the last read: a replay appends a tuple per record, and each record is
        # built from its row, field for field, when the records are next read (by a user, a live account's
        # journal or a test: the report after the run reads the rows as columns, ``columns``)
        self._segments: dict[str, list[Segment]] = {}
        self._segment_rows: dict[str, list[tuple]] = {}
        self.add(symbol, market, config.contract_size, margin, UNITY)
        self._next_ticket = 1
        self._trades: list[Trade] = []
        self._trade_rows: list[tuple] = []
        self._deals: list[Deal] = []
        self._deal_rows: list[tuple] = []
        self._orders: list[OrderRecord] = []
        self._order_rows: list[tuple] = []  # market orders filled at once: nothing changes them later
        self.rejected: list[dict] = []
        # (bar, amount, deal) of every change of the balance; ``deal`` is the index in ``deals`` of the deal
        # it belongs to (recorded right after it): the balance moves only with deals
        self.balance_events: list[tuple[int, float, int | None]] = []
        # (bar, amount, deal, moment) of every change of the open positions' accrued swap: a rollover's
        # (``deal`` None; ``moment``: UTC ns of a midnight inside the bar, None at its open), and the share a
        # closing deal takes off to book it (negative, ``deal`` as above). It is in the equity, not the
        # balance, until then (MetaTrader's ``POSITION_SWAP``).
        self.swap_events: list[tuple[int, float, int | None, int | None]] = []
        self._made: tuple[tuple, tuple] | None = None  # the curves, for the records they were made from
        self._margin_made: tuple[tuple, tuple] | None = None  # the margin at each bar, likewise
        self._steps: dict[str, Held] = {}  # each symbol's legs as steps, made with the curves
        self._columns: dict[str, tuple[tuple, Columns]] = {}  # each kind's columns, for the rows they read
        self._events: dict[str, tuple[list, int, Events]] = {}  # the money events' columns (``events``)

    def add(self, symbol: str, market: Market, contract_size: float, margin: MarginModel, rate: Any) -> None:
        """Keep the records of ``symbol`` too (its bars on the ledger's timeline); ``rate`` converts its
        profit into the deposit currency."""
        self.symbols[symbol] = _Symbol(market, contract_size, margin, rate)
        self._segments.setdefault(symbol, [])
        self._segment_rows.setdefault(symbol, [])

    def convert(self, symbol: str, rate: Any) -> None:
        """``symbol``'s profit is converted into the deposit currency by ``rate`` (its curves read it)."""
        old = self.symbols[symbol]
        self.symbols[symbol] = _Symbol(old.market, old.contract_size, old.margin, rate)

    def new_ticket(self) -> int:
        """The next order or position ticket of the account (one numbering across its symbols)."""
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    def upcoming_ticket(self) -> int:
        return self._next_ticket

    # -- records, appended while the run goes --------------------------------------------------------------
    def reject(
        self, t: int, when: pd.Timestamp, action: str, side: int, lots, retcode: int, reason: str, **request
    ) -> None:
        """A refused request, with MetaTrader's retcode and the reason (its values JSON-safe)."""
        symbol = request.pop("symbol", None) or self.symbol
        self.rejected.append(
            {
                "time": str(when),
                "bar": t,
                "symbol": symbol,
                "action": action,
                "side": side,
                "lots": json_safe(lots),
                **{k: json_safe(v) for k, v in request.items()},
                "retcode": retcode,
                "reason": reason,
            }
        )
        log.info("request rejected at %s: %s (retcode %d)", when, reason, retcode)

    @property
    def trades(self) -> list[Trade]:
        """Closed trades in closing order."""
        return _built(self._trades, self._trade_rows, Trade)

    @property
    def deals(self) -> list[Deal]:
        """MetaTrader's deals in order."""
        return _built(self._deals, self._deal_rows, Deal)

    @property
    def orders(self) -> list[OrderRecord]:
        """MetaTrader's orders in the order they were placed or filled."""
        return _built(self._orders, self._order_rows, OrderRecord)

    @property
    def segments(self) -> dict[str, list[Segment]]:
        """Each symbol's floating segments in the order they ended."""
        for name, rows in self._segment_rows.items():
            _built(self._segments[name], rows, Segment)
        return self._segments

    def deal_count(self) -> int:
        """How many deals are recorded (MetaTrader's "Total Deals"), without building their records."""
        return len(self._deals) + len(self._deal_rows)

    def order(self, record: OrderRecord) -> OrderRecord:
        record.symbol = record.symbol or self.symbol
        self.orders.append(record)
        return record

    def deal(self, record: Deal) -> None:
        record.symbol = record.symbol or self.symbol
        self.deals.append(record)

    def trade(self, record: Trade) -> None:
        record.symbol = record.symbol or self.symbol
        self.trades.append(record)

    def new_order(self, t: int, ns: int | None, ticket, kind, lots, price, sl, tp, state, position, magic,
                  comment, stoplimit=None, expiration=None,
                  symbol: str = "") -> OrderRecord | None:  # fmt: skip
        """An order placed (a pending order) or filled (a market order) in bar ``t`` at UTC ``ns``; returns
        the placed order's record (which follows the order: filled, cancelled, expired), None for a fill."""
        if state == "filled":  # final as it is made: its row, built into a record when read (``orders``)
            self._order_rows.append((ticket, t, ns, kind, lots, price, stoplimit, sl, tp, expiration, t,
                                     ns, price, state, position, magic, comment,
                                     symbol or self.symbol))  # fmt: skip
            return None
        record = OrderRecord(ticket, t, ns, kind, lots, price, stoplimit, sl, tp, expiration, None, None,
                             None, state, position, magic, comment, symbol or self.symbol)  # fmt: skip
        self.orders.append(record)  # after the rows before it: the records stay in their order
        return record

    def new_deal(self, t: int, ns: int | None, order, pos: OpenPosition, side: int, entry: str, lots, price,
                 commission, swap, profit, balance, comment: str | None = None,
                 symbol: str = "") -> None:  # fmt: skip
        """A deal of position ``pos`` in bar ``t`` at UTC ``ns``; ``balance`` is the balance after it."""
        rows = self._deal_rows  # numbered after every deal before it (``deal_count``, inline: per deal)
        rows.append((len(self._deals) + len(rows) + 1, t, ns, order, pos.ticket,
                     "buy" if side > 0 else "sell", entry, lots, price, commission, swap, profit, balance,
                     pos.magic, pos.comment if comment is None else comment,
                     symbol or self.symbol))  # fmt: skip

    def new_trade(self, pos: OpenPosition, lots, t: int, ns: int | None, price, reason, entry_comm, exit_comm,
                  swap, profit, scale: int, symbol: str = "", rate: float = 1.0) -> None:  # fmt: skip
        """``lots`` of ``pos`` closed at ``price`` in bar ``t`` (UTC ``ns``): a trade, its commission the
        entry's share and the exit's (the position's prices and ``price`` in points, ``scale`` to a unit;
        ``rate``: the deposit currency per unit of profit currency its profit was converted at)."""
        self._trade_rows.append(
            (
                pos.ticket,
                "buy" if pos.side > 0 else "sell",
                lots,
                pos.entry_ns,  # UTC ns or None (the bar's time): the frames turn both into times
                pos.price / scale,
                ns,
                price / scale,
                None if pos.sl is None else pos.sl / scale,
                None if pos.tp is None else pos.tp / scale,
                reason,
                0.0 - (entry_comm + exit_comm),
                swap,
                profit,
                profit - entry_comm - exit_comm + swap,
                pos.bar,
                t,
                pos.magic,
                pos.comment,
                symbol or self.symbol,
                rate,
                pos.margin_price,
            )
        )

    def balance(self, t: int, amount: float) -> None:
        """The balance changed by ``amount`` in bar ``t``, by the deal recorded next."""
        self.balance_events.append((t, amount, len(self._deals) + len(self._deal_rows)))  # ``deal_count``

    def swap(self, t: int, amount: float, booked: bool = False, ns: int | None = None) -> None:
        """The open positions' accrued swap changed by ``amount`` in bar ``t``: a rollover's swap (at UTC
        ``ns``, a midnight inside the bar; None: the bar's open), or (``booked``) the share the deal recorded
        next books to the balance."""
        self.swap_events.append((t, amount, self.deal_count() if booked else None, ns))

    def segment(self, start: int, end: int, side: int, lots: float, price: float,
                margin_price: float | None = None, symbol: str = "") -> None:  # fmt: skip
        """A position state ended: it floated over bars ``[start, end)`` (``margin_price``: the price its
        margin was charged at, default its price)."""
        mp = price if margin_price is None else margin_price
        self._segment_rows[symbol or self.symbol].append((start, end, side, lots, price, mp))

    # -- result tables -------------------------------------------------------------------------------------
    def snapshot(self) -> Ledger:
        """The ledger as it is now, for tables built later (``Result.orders``): its lists of records and
        of rows copied, so a request made after the run (through an EA kept with its result) adds nothing to
        them; the records built so far are shared (a finished run has no pending order left to change), and
        the rows (plain values) are built into records only if the copy's record lists are read."""
        frozen = copy.copy(self)
        for name in ("_trades", "_deals", "_orders", "_trade_rows", "_deal_rows", "_order_rows", "rejected",
                     "balance_events", "swap_events"):  # fmt: skip
            setattr(frozen, name, list(getattr(self, name)))
        frozen._segments = {k: list(v) for k, v in self._segments.items()}
        frozen._segment_rows = {k: list(v) for k, v in self._segment_rows.items()}
        frozen.symbols = dict(self.symbols)
        frozen._columns, frozen._events = {}, {}
        return frozen

    def columns(self, kind: str) -> Columns:
        """Every trade's, deal's or order's fields (``kind``: "trades", "deals", "orders") as columns, read
        from the rows without building a record (``backtests.broker.columns``); kept while nothing is
        recorded and no record is built (a built record is read through its fields every time)."""
        records, rows, names = _KINDS[kind]
        records, rows = getattr(self, records), getattr(self, rows)
        key = (id(rows), len(rows))
        kept = self._columns.get(kind)
        if kept is not None and kept[0] == key and not records:
            return kept[1]
        made = Columns(rows_of(records, rows, names), names)
        if not records:
            self._columns[kind] = (key, made)
        return made

    def events(self, name: str) -> Events:
        """The money events ``name`` ("balance_events" or "swap_events") as columns, read once while
        nothing is added (the curves, the balance path and the equity path's events all read them)."""
        events = getattr(self, name)
        kept = self._events.get(name)
        if kept is not None and kept[0] is events and kept[1] == len(events):
            return kept[2]
        made = Events.of(events)
        self._events[name] = (events, len(events), made)
        return made

    def _segment_list(self, name: str) -> list[tuple]:
        """``name``'s floating segments in the order they ended, as ``Segment`` tuples or rows alike."""
        built, rows = self._segments[name], self._segment_rows[name]
        return [*built, *rows] if built else rows

    def trades_frame(self) -> pd.DataFrame:
        """Closed trades in closing order, with MAE/MFE: the worst and best floating profit while open.

        Excursions use the high/low of the bars from entry up to (not including) the exit bar, longs at the
        bid and shorts at the ask, plus the exit price: in the exit bar the stop or take-profit is taken to
        come first (the pessimistic rule), so that bar's range beyond the exit level does not count. They
        are in the deposit currency at the rate the trade's profit was converted at.
        """
        trades = self.columns("trades")
        df = pd.DataFrame(trades.table(TRADE_TABLE_FIELDS), columns=list(TRADE_COLUMNS))
        # The stamps from the rows, not the frame: a column of ints and Nones would turn them into floats.
        df["entry_time"] = self.times(df["entry_bar"], trades.values("entry_ns"))
        df["exit_time"] = self.times(df["exit_bar"], trades.values("exit_ns"))
        mae, mfe = np.zeros(len(df)), np.zeros(len(df))
        names = df["symbol"].to_numpy()
        rates = trades.numbers("rate")
        for name, sym in self.symbols.items():
            mine = names == name
            if not mine.any():
                continue
            m = sym.market
            lows, highs, spread = m.lows, m.highs, m.spread
            wanted = ("type", "lots", "entry_price", "exit_price", "entry_bar", "exit_bar")
            col = {c: df[c].to_numpy()[mine] for c in wanted}
            rate = rates[mine]
            buy = col["type"] == "buy"
            a, b = col["entry_bar"].astype(np.int64), col["exit_bar"].astype(np.int64)
            exit_ = col["exit_price"].astype(np.float64)
            # Longs at the bid, shorts at the ask; each side's extremes over bars a..b-1, then the exit price.
            low = _range_extreme(np.minimum, lows, lows + spread, buy, a, b, exit_)
            high = _range_extreme(np.maximum, highs, highs + spread, buy, a, b, exit_)
            sign = np.where(buy, 1.0, -1.0)
            best, worst = np.where(buy, high, low), np.where(buy, low, high)
            cs = np.where(rate == 1.0, sym.contract_size, sym.contract_size * rate)
            lots, entry = col["lots"].astype(np.float64), col["entry_price"].astype(np.float64)
            up = sign * (best - entry) * lots * cs
            down = sign * (worst - entry) * lots * cs
            mfe[mine] = np.where(up > 0.0, up, 0.0)
            mae[mine] = np.where(down < 0.0, down, 0.0)
        df["mae"], df["mfe"] = mae, mfe
        return df

    def curves(self, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Balance, equity (with the open positions' accrued swap) and used margin at each bar's close from
        bar ``first`` on (after the run)."""
        balance, equity = self._curves()
        return balance[first:], equity[first:], self._margins()[1][first:]

    def closing_curves(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """``curves``' balance and equity without the margin (the report's curve reads no used margin)."""
        balance, equity = self._curves()
        return balance[first:], equity[first:]

    def worst_curves(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """Equity at each bar's worst prices and the margin held then, from bar ``first`` on
        (``backtests.curves.worst_floating`` says how; every symbol at its worst at once)."""
        balance, equity = self._curves()
        trades = self.columns("trades")  # the closed trades' own fields, not the table's (a user may edit it)
        names = trades.texts("symbol")
        margin_price = trades.texts("margin_price").copy()
        unset = np.equal(margin_price, None)
        margin_price[unset] = trades.numbers("entry_price")[unset]  # None: charged at its entry price
        columns = ClosedTrades(
            trades.texts("type") == "buy",
            trades.numbers("lots"),
            trades.numbers("entry_price"),
            trades.numbers("exit_price"),
            trades.numbers("exit_bar", np.int64),
            np.isin(trades.texts("exit_reason"), ["sl", "stop out"]),
            margin_price.astype(np.float64),
        )
        floating, (counted, margin), changed = None, self._margins(), {}
        for name, sym in self.symbols.items():
            mine = names == name
            if not (mine.any() or self._steps[name].legs.any()):  # (every step is held over some bar)
                continue
            m = sym.market
            k = m.scale
            own = ClosedTrades(*(column[mine] for column in columns))
            at = own.exit_bar  # every bar's low bid and high ask, a chunk at a time; the rest at exit bars
            # the ask at the open at the opening spread (a close there is at the open: no excursion after
            # it), the highest at the widest spread of the bar's minutes or ticks (``Market.s_wide``)
            bars = (m.o[at] / k, m.lo[at] / k, (m.o[at] + m.s_open[at]) / k, (m.h[at] + m.s_wide[at]) / k)
            steps = self._steps[name]
            lows = steps.floating(
                lambda a, b, m=m, k=k: m.lo[a:b] / k,
                lambda a, b, m=m, k=k: (m.h[a:b] + m.s_wide[a:b]) / k,
                sym.contract_size,
            )
            worst, changed[name] = worst_floating(lows, steps.at, own, bars, sym.contract_size)
            floating = _added(floating, convert_closes(sym.rate.closes(m), worst))
        moved = distinct(np.concatenate([c.bars for c in changed.values()] or [np.zeros(0, np.int64)]))
        if moved.size:  # the close's margin, but where a trade closed inside a bar counts
            margin = margin.copy()
            margin[moved] = 0.0
            for name in (n for n in self.symbols if n in counted or n in changed):  # in the close's order
                legs = self._steps[name].at(moved)
                if name in changed and changed[name].bars.size:
                    legs[:, np.searchsorted(moved, changed[name].bars)] = changed[name].legs
                margin[moved] += self.symbols[name].margin.of_sums(legs[0], legs[4], legs[2], legs[5])
        worst = self._equity(balance, floating)
        return np.minimum(worst, equity, out=worst)[first:], margin[first:]

    def release(self) -> None:
        """Let the curves and the columns made from the records go once the report has its own (after a
        run; its tables are read from a ``snapshot``): they are made again, the same, if asked for later."""
        self._made = self._margin_made = None
        self._steps, self._columns, self._events = {}, {}, {}

    def _curves(self) -> tuple[np.ndarray, np.ndarray]:
        """(balance, equity) at every bar's close, made once for the records as they are, with each
        symbol's legs held as steps (``Held``)."""
        key = self._key()
        if self._made is not None and self._made[0] == key:
            return self._made[1]
        n = len(self.market.o)
        balance = _running(self.events("balance_events"), n)
        balance += self.config.deposit
        floating, self._steps = None, {}
        for name, sym in self.symbols.items():
            self._steps[name] = steps = held_steps(self._segment_list(name), n)
            if not steps.legs.any():
                continue
            m = sym.market
            k = m.scale
            pc = steps.floating(
                lambda a, b, m=m, k=k: m.c[a:b] / k,  # the close's bid and ask, a chunk at a time
                lambda a, b, m=m, k=k: (m.c[a:b] + m.s_close[a:b]) / k,
                sym.contract_size,
            )
            floating = _added(floating, convert_closes(sym.rate.closes(m), pc))
        made = (balance, self._equity(balance, floating))
        self._made = (key, made)
        return made

    def _margins(self) -> tuple[list[str], np.ndarray]:
        """The symbols that hold margin at some bar and the margin of the positions open over each bar, at
        every bar (made once for the records as they are: the close's and the worst prices' share it)."""
        key = self._key()
        if self._margin_made is not None and self._margin_made[0] == key:
            return self._margin_made[1]
        self._curves()
        margin, counted = None, []
        for name, sym in self.symbols.items():
            steps = self._steps[name]
            legs = steps.legs
            if legs.any():  # a function of the legs alone: once a step
                counted.append(name)
                margin = _added(margin, steps.spread(sym.margin.of_sums(legs[0], legs[4], legs[2], legs[5])))
        if margin is None:
            margin = np.zeros(len(self.market.o))
        self._margin_made = (key, (counted, margin))
        return counted, margin

    def _key(self) -> tuple[int, int, int, int]:
        """What the curves are made from, counted: new records make them again."""
        return (
            len(self.market.o),
            sum(len(self._segments[k]) + len(v) for k, v in self._segment_rows.items()),
            len(self.balance_events),
            len(self.swap_events),
        )

    def _equity(self, balance: np.ndarray, floating: np.ndarray | None) -> np.ndarray:
        """``balance`` plus the open positions' accrued swap (in the equity, not the balance) plus the
        ``floating`` profit (None: nothing floats) at each bar, added in that order into a new array or
        ``floating``'s own. Without a swap the accrued swap is no addend: its 0.0 added to the balance
        changes no bit (the deposit is positive, so no balance is -0.0)."""
        swaps = self.events("swap_events")
        if len(swaps.bars):
            equity = _running(swaps, len(balance))
            np.add(balance, equity, out=equity)
            return equity if floating is None else np.add(equity, floating, out=equity)
        return balance.copy() if floating is None else np.add(balance, floating, out=floating)

    def orders_frame(self) -> pd.DataFrame:
        """Every accepted order, as MetaTrader's report lists them: market orders (the EA's and the closing
        orders of SL, TP, stop-out and end of test) and pending orders with their final state."""
        orders = self.columns("orders")
        df = pd.DataFrame(orders.table(ORDER_TABLE_FIELDS), columns=list(ORDER_COLUMNS))
        for col, at, stamps in (
            ("time_setup", orders.values("bar_setup"), orders.values("setup_ns")),
            ("time_done", orders.values("bar_done"), orders.values("done_ns")),
        ):
            bars = np.array([-1 if b is None else b for b in at], dtype=np.int64)  # the records' own bars
            df[col] = self.times(np.maximum(bars, 0), stamps).where(bars >= 0)
        for col in ("ticket", "position"):
            df[col] = df[col].astype("Int64")
        return df

    def deals_frame(self) -> pd.DataFrame:
        """Every deal in order: entries ("in"), exits ("out"; "out_by" for close-by), balance after each."""
        deals = self.columns("deals")
        df = pd.DataFrame(deals.table(DEAL_TABLE_FIELDS), columns=list(DEAL_COLUMNS))
        df["time"] = self.times(df["time"], deals.values("ns"))
        for col in ("order", "position"):
            df[col] = df[col].astype("Int64")
        return df

    def times(self, bars, stamps) -> pd.DatetimeIndex:
        """Record times: the UTC ns of the minute or tick that made them where one was recorded, else the
        opening time of their bar (a decision at the open, or the open-prices model)."""
        at_bar = self.market.time[np.asarray(bars, dtype=np.int64)]
        stamps = stamps if isinstance(stamps, list) else list(stamps)
        if stamps.count(None) == len(stamps):  # none recorded (open prices): one C pass, no array
            return at_bar
        ns = np.array([-1 if v is None else v for v in stamps], dtype=np.int64)
        inside = ns >= 0
        if not inside.any():
            return at_bar
        out = at_bar.as_unit("ns").asi8.copy()
        out[inside] = ns[inside]
        return pd.DatetimeIndex(pd.to_datetime(out, utc=True), name=at_bar.name)


def _running(events: Events, n: int) -> np.ndarray:
    """The running sum of ``events``' amounts at each of ``n`` bars' closes (summed in place: one array)."""
    changes = np.zeros(n + 1)
    if len(events.bars):
        np.add.at(changes, events.bars, events.amounts)
    running = changes[:n]
    return np.cumsum(running, out=running)


def _added(total: np.ndarray | None, values: np.ndarray) -> np.ndarray:
    """``total + values`` into ``total``'s array; for None (the first symbol's), ``0.0 + values`` into
    ``values``' own (an array the caller made): the symbols' sums from an array of zeros, the same bits
    (-0.0 turned +0.0), without that array."""
    if total is None:
        values += 0.0
        return values
    total += values
    return total


def _range_extreme(
    pick: np.ufunc,
    bid: np.ndarray,
    ask: np.ndarray,
    buy: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    last: np.ndarray,
) -> np.ndarray:
    """``pick`` (``np.minimum``/``np.maximum``) of each trade's bars ``a..b-1`` (the bid's for a buy, the
    ask's for a sell) and of its ``last`` price: one ``reduceat`` over every trade's pair of bounds (the
    reductions between one trade's end and the next one's start are dropped)."""
    out = last.copy()
    full = b > a
    for values, side in ((bid, buy), (ask, ~buy)):
        rows = np.flatnonzero(full & side)
        if rows.size:
            bounds = np.empty(2 * rows.size, dtype=np.int64)
            bounds[0::2], bounds[1::2] = a[rows], b[rows]
            # ``reduceat``'s bounds lie inside its array, and a trade's end may be one past the last bar
            padded = np.append(values, 0.0)
            out[rows] = pick(pick.reduceat(padded, bounds)[0::2], last[rows])
    return out


def _built(records: list, rows: list[tuple], record: type) -> list:
    """``records`` with the rows recorded since the last read built into ``record`` objects, in order, and
    ``rows`` emptied (a replay records rows; see ``Ledger.__init__``)."""
    if rows:
        records.extend(starmap(record, rows))
        rows.clear()
    return records
