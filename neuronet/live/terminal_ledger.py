"""A live account's figures in the backtest's own tables: the terminal's deals and orders booked into the
backtest broker's ledger (``backtests.broker.ledger``) over the journal's bars.

``TerminalLedger`` holds a ``backtests.broker.Broker`` over the run's bars that never fills anything: its
trades, deals, orders, balance changes and position segments come from the terminal's history
(``history_deals_get``/``history_orders_get``), booked through the ledger's and the account's public
methods, so the curves (``Ledger.curves``, ``curves.worst_equity``) and the statistics (``metrics``) are
computed by the backtest's code, not derived again here. The terminal's orders become rows of the
orders table by ``terminal_order_rows``.

Money is the terminal's: each deal's profit, commission (plus fee) and swap as it reports them, booked to
the balance at the bar the deal falls in (a deal after the last closed bar, such as a close at the stop,
to the last bar). A trade is a position's exit deal with its share of the entry commission; its SL and TP
are those in force at its exit: the opening order's, changed by each successful ``sltp`` request made
before the exit (``book``'s ``stops``, read from the journal: a change of stops is not in the deal
history). Positions the terminal still holds at the end are handed to the broker (``Broker.adopt``) and
closed by ``finish`` at the last bar's close, in the report only, by the backtest broker's own "end of
test" exit (longs at the bid, shorts at the ask), so their floating profit is in the net profit as a
backtest's or a paper run's is. A position of the run opened before its span (``carried``) and closed in
it makes a trade at each exit with its own entry and the exit's money only, never valued while open
(``_carried_in``); where the run adds to it (a netting account), its carried lots and the run's make a
trade each at every exit, the deal shared between them as the netting average charges it (``_split``).

Several symbols on one account: one ``TerminalLedger`` per symbol over that symbol's broker of the account
(``backtests.broker.portfolio.open_brokers``: one balance, one ledger), each booking its symbol's deals;
every record names its symbol. A deal's profit is the terminal's, already in the account currency as it
booked it; only the floating profit of the open positions at each bar's close, and the trade's MAE/MFE, are
valued by the backtest's conversion (for a trade, at the rate its own profit implies).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig, Broker, OpenPosition
from backtests.broker.records import Deal, Trade
from backtests.broker.terms import SymbolTerms
from datafeeds.candles import CandleMeta
from datafeeds.clock import BrokerClock
from neuronet.live.carried import Carried
from neuronet.live.terminal_order_rows import order_row
from neuronet.live.terminal_requests import user_comment

log = logging.getLogger(__name__)

IN, OUT, INOUT, OUT_BY = 0, 1, 2, 3  # DEAL_ENTRY_*
_ENTRY = {IN: "in", OUT: "out", INOUT: "in/out", OUT_BY: "out_by"}
_REASON = {4: "sl", 5: "tp", 6: "stop out"}  # DEAL_REASON_SL, _TP, _SO


@dataclass
class _Open:
    """A position of the terminal while its deals are booked."""

    side: int
    lots: float
    price: float
    bar: int
    entry_ns: int
    commission: float  # entry commission not yet attributed to a closed trade
    magic: int
    comment: str
    sl: float | None
    tp: float | None
    seg: int  # bar where its current floating segment began
    margin_price: float | None = None  # the price its margin is charged at (None: its own opening price)


@dataclass(frozen=True)
class _Exit:
    """An exit deal of the terminal as a trade books it: its price, UTC ns and bar, its commission and fee
    (``money``), swap and profit in the deposit currency, MetaTrader's deal reason and the user's comment."""

    price: float
    ns: int
    bar: int
    money: float
    swap: float
    profit: float
    reason: int
    comment: str


@dataclass(frozen=True)
class StopChange:
    """A successful change of a position's SL/TP (an ``sltp`` request), at the UTC ns of the EA's call."""

    ns: int
    position: int
    sl: float | None
    tp: float | None


class TerminalLedger:
    """The backtest's ledger of ``broker`` (one symbol's, over the journal's closed bars), filled from the
    terminal's history of that symbol by ``book`` (see the module docstring); ``broker`` holds it and is
    scored as a backtest's broker is. ``over`` makes one over the bars of a one-symbol run."""

    def __init__(self, broker: Broker, clock: BrokerClock):
        self.broker = broker
        self.symbol = broker.symbol
        self.ledger = broker.ledger
        self.clock = clock
        self._ns = self.broker.time.asi8
        self._open: dict[int, _Open] = {}
        self._changes: list[StopChange] = []
        self._carried: dict[int, Carried] = {}  # the run's positions opened before it (``carry``)
        self._carried_left: dict[int, float | None] = {}  # the lots of each still held (None: unknown)
        self._prior: dict[int, _Open] = {}  # the carried lots of a position the run added to (``_split``)
        self.held_at_end = 0  # positions the terminal still held, closed by ``finish`` in the report only

    @classmethod
    def over(
        cls, bars: pd.DataFrame, point: float, config: AccountConfig, clock: BrokerClock
    ) -> TerminalLedger:
        """A ledger over ``bars`` (a candle frame, UTC, the journal's closed bars) on its own account."""
        cols = (bars[c].to_numpy(dtype=np.float64) for c in ("open", "high", "low", "close", "spread"))
        meta = bars.attrs.get("candles")
        terms = SymbolTerms(meta.symbol) if isinstance(meta, CandleMeta) else None  # records name the symbol
        return cls(Broker(*cols, bars.index.as_unit("ns"), point, config, clock, terms=terms), clock)

    def utc_ns(self, broker_seconds: int, broker_msc: int | None = None) -> int:
        """A terminal time (broker seconds, or milliseconds where given) as UTC nanoseconds."""
        seconds = int(self.clock.to_utc_seconds(np.array([int(broker_seconds)]))[0])
        ms = 0 if not broker_msc else int(broker_msc) - int(broker_seconds) * 1000
        return seconds * 1_000_000_000 + max(0, ms) * 1_000_000

    def bar_at(self, ns: int, first: int) -> int:
        """The bar a time falls in, kept within ``first``..the last bar."""
        bar = int(np.searchsorted(self._ns, ns, side="right")) - 1
        return min(max(bar, first), len(self._ns) - 1)

    def carry(self, carried: dict[int, Carried]) -> None:
        """The run's positions opened before its span whose deals are among those booked next
        (``carried.carried_positions``): each exit of one is a trade of the run (module docstring)."""
        self._carried = dict(carried)
        self._carried_left = {pid: c.volume for pid, c in carried.items()}

    def book(
        self, deals: list[Any], orders: list[Any], first: int, stops: list[StopChange] | None = None
    ) -> None:
        """Book the terminal's ``deals`` and ``orders`` (already this run's), in time order, from bar
        ``first`` on; what is still open at the end is left for ``finish``. Deals of a position whose
        entry is not among ``deals`` (opened before the run) are booked where it is one of the run's
        (``carry``), else left out with a warning. ``stops``: the
        run's successful changes of a position's SL/TP, each applied to the exits after its time."""
        TerminalLedger.book_account({self.symbol: (self, deals, orders)}, first, stops)

    @staticmethod
    def book_account(
        ledgers: dict[str, tuple[TerminalLedger, list[Any], list[Any]]],
        first: int,
        stops: list[StopChange] | None = None,
    ) -> None:
        """Book each symbol's deals and orders (symbol -> (its ledger, deals, orders)) into its ledger, the
        deals of all the symbols in the terminal's time order, so that each deal's balance is the account's
        after it (see ``TerminalLedger.book``)."""
        changes = sorted(stops or (), key=lambda c: c.ns)
        merged = []
        for ledger, deals, orders in ledgers.values():
            ledger._changes = changes
            opened = {int(d.position_id) for d in deals if int(d.entry) == IN} | set(ledger._carried)
            foreign = sorted({int(d.position_id) for d in deals} - opened)
            if foreign:
                log.warning(
                    "positions %s were opened before the run: their deals are not in the report",
                    ", ".join(f"#{p}" for p in foreign),
                )
            levels = {int(o.ticket): (float(o.sl) or None, float(o.tp) or None) for o in orders}
            merged += [(ledger, d, levels, int(d.position_id) in opened) for d in deals]
        fills: dict[int, float] = {}
        for ledger, d, levels, ours in sorted(
            merged, key=lambda m: (int(m[1].time_msc or int(m[1].time) * 1000), int(m[1].ticket))
        ):
            fills.setdefault(int(d.order), float(d.price))
            if ours:
                ledger._book_deal(d, first, levels.get(int(d.order), (None, None)))
        for ledger, _, orders in ledgers.values():
            for o in sorted(orders, key=lambda o: (int(o.time_setup), int(o.ticket))):
                ledger._book_order(o, first, fills.get(int(o.ticket)))
            ledger.broker.t = len(ledger._ns) - 1

    def finish(self, last: int) -> None:
        """Close the positions the terminal still holds at bar ``last``'s close, in the report only, with
        the backtest's "end of test" exit: each becomes a backtest position (its entry commission as a
        cost, as the backtest keeps it) and ``Broker.finish`` closes it."""
        self.hand_over()
        self.broker.finish(last)

    def hand_over(self) -> None:
        """The positions the terminal still holds become the broker's (``Broker.adopt``), for its
        ``finish`` to close (an account of several symbols moves every symbol to the close first)."""
        self.held_at_end = len(self._open)
        for pid, pos in self._open.items():
            pos.sl, pos.tp = self._levels(pid, None, pos.sl, pos.tp)
            log.info(
                "position #%d (%s %g lots) is still open on the terminal: closed at the last close in the "
                "report only",
                pid,
                "buy" if pos.side > 0 else "sell",
                pos.lots,
            )
            b = self.broker
            price = round(pos.price * b.scale, 6)  # whole points, or between them for a netting average
            sl, tp = (None if v is None else b.to_points(v) for v in (pos.sl, pos.tp))
            held = OpenPosition(
                pid, pos.side, pos.lots, price, pos.bar, sl, tp, pos.magic, pos.comment, 0.0 - pos.commission
            )
            held.entry_ns, held.seg, held.margin_price = pos.entry_ns, pos.seg, pos.margin_price
            self.broker.adopt(held)
        self._open.clear()

    def _book_deal(self, d: Any, first: int, levels: tuple[float | None, float | None]) -> None:
        ns = self.utc_ns(d.time, getattr(d, "time_msc", None))
        bar = self.broker.t = self.bar_at(ns, first)
        side = +1 if int(d.type) == 0 else -1
        lots, price, pid, entry = float(d.volume), float(d.price), int(d.position_id), int(d.entry)
        money = float(d.commission) + float(getattr(d, "fee", 0.0) or 0.0)
        swap, profit = float(d.swap), float(d.profit)
        self.broker.funds.charge(money + swap + profit, bar)
        comment = user_comment(str(d.comment))
        pos = self._open.get(pid)
        left = self._carried_left.get(pid, 0.0)
        if pos is None and pid in self._carried and left != 0.0:
            if entry != IN:
                pos = self._open[pid] = self._carried_in(pid, lots, first, bar)
            elif left is not None:  # the run adds to a carried position: its carried lots are kept apart
                self._prior[pid] = self._carried_in(pid, left, first, bar)
        prior = self._prior.get(pid)
        if (pos is not None or prior is not None) and entry != IN:  # an exit; "in/out" also reverses it
            parts = [(p, key) for p, key in ((prior, self._prior), (pos, self._open)) if p is not None]
            closing = min(lots, round(sum(p.lots for p, _ in parts), 8))
            share = closing / lots if lots else 1.0
            deal = _Exit(price, ns, bar, money * share, swap, profit, int(d.reason), comment)
            self._split(pid, parts, closing, deal)
            rest = round(lots - closing, 8)
            if entry == INOUT and rest > 1e-9:
                self._open[pid] = self._opened(
                    side,
                    rest,
                    price,
                    bar,
                    ns,
                    money * (1 - share),
                    int(d.magic),
                    comment,
                    *levels,
                    bar,
                )
        elif entry != IN:  # an exit of a position already closed: its money stands, it makes no trade
            log.warning(
                "deal #%d closes position #%d, which is not open: booked to the balance only",
                int(d.ticket),
                pid,
            )
        elif pos is None:  # a position opened, or the run's first lots added to a carried one (its number)
            magic = int(d.magic) if prior is None else prior.magic
            self._open[pid] = self._opened(side, lots, price, bar, ns, money, magic, comment, *levels, bar)
        else:  # a netting account adds to its position
            self._end(pos, bar)
            total = pos.lots + lots
            charged = self._margin_price(side, price)
            if charged is not None or pos.margin_price is not None:  # both deals' margin prices, averaged
                held = pos.price if pos.margin_price is None else pos.margin_price
                pos.margin_price = (held * pos.lots + (price if charged is None else charged) * lots) / total
            pos.price = (pos.price * pos.lots + price * lots) / total
            pos.lots, pos.commission = round(total, 8), pos.commission + money
        self.ledger.deal(
            Deal(
                int(d.ticket),
                bar,
                ns,
                int(d.order),
                pid,
                "buy" if side > 0 else "sell",
                _ENTRY.get(entry, str(entry)),
                lots,
                price,
                money,
                swap,
                profit,
                self.broker.balance,
                int(d.magic),
                comment,
                self.symbol,
            )
        )

    def _carried_in(self, pid: int, lots: float, first: int, bar: int) -> _Open:
        """Position ``pid``, opened before the run, at an exit of ``lots`` of it at ``bar``: the trade shows
        its own entry (time and price, before the run; its entry bar the run's first), its exit's money
        only (its entry commission was paid before the run, outside the deposit), and no floating profit
        over the run's bars (the deposit, the balance at the start, does not hold it either), as
        MetaTrader's history report over a period books a closing deal's profit in it."""
        c, left = self._carried[pid], self._carried_left.get(pid)
        if left is not None:  # a netting reversal's "in/out" closes what it held, and opens the rest
            lots = min(lots, left)
            self._carried_left[pid] = round(left - lots, 8)
        ns = self.utc_ns(c.time, c.time_msc)
        return _Open(c.side, lots, c.price, first, ns, 0.0, c.magic, user_comment(c.comment), None, None, bar)

    def _split(self, pid: int, parts: list[tuple[_Open, dict[int, _Open]]], lots: float, deal: _Exit) -> None:
        """An exit ``deal`` of ``lots`` of position ``pid`` from its ``parts`` (each with the table holding
        it): its carried lots (never valued over the run) and the run's own, where the run added to a carried
        netting position, else the one part. A netting position's price is the volume-weighted average of
        its entries (MetaTrader's, and the backtest broker's ``fill``) and each close is charged from that
        average, which is the same money as closing every entry in proportion to the lots it holds: so
        each part closes its share of ``lots``, a trade from its own entry whose profit is its own price
        difference at the terminal's conversion of the deal; the last part takes what is left of the
        deal's profit (to the cent), so the trades of one deal sum to its money."""
        price, profit = deal.price, deal.profit
        total = sum(p.lots for p, _ in parts)
        shares = [lots * p.lots / total if total else lots for p, _ in parts]
        contract = self.broker.config.contract_size
        gains = [p.side * (price - p.price) * n * contract for (p, _), n in zip(parts, shares, strict=True)]
        unity = self.broker.money.profit.unity
        rate = profit / sum(gains) if sum(gains) and profit and not unity else self._rate(price)
        booked = 0.0
        for i, ((part, table), n) in enumerate(zip(parts, shares, strict=True)):
            mine = profit - booked if i == len(parts) - 1 else round(gains[i] * rate, 2)
            booked += mine
            part.sl, part.tp = self._levels(pid, deal.ns, part.sl, part.tp)
            if table is self._prior:
                part.seg = deal.bar  # carried lots are not valued over the run's bars
            n = part.lots if n >= part.lots - 1e-9 else round(n, 8)
            cut = n / lots if lots else 1.0
            if self._exit(
                pid, part, n, replace(deal, money=deal.money * cut, swap=deal.swap * cut, profit=mine)
            ):
                del table[pid]

    def _rate(self, price: float) -> float:
        """The account currency per unit of the symbol's profit currency at ``price`` (1 where they are
        one), where a deal's own profit cannot tell it."""
        if self.broker.money.profit.unity:
            return 1.0
        at = self.broker.to_points(price)
        return self.broker.money.money(1.0, at, at)

    def _opened(self, side: int, lots: float, price: float, *rest: Any) -> _Open:
        """A position opened (or left by a netting reversal) at ``price``, charged margin as the broker
        charges it (``SymbolMoney.margin_price``: converted into the deposit currency where it must be)."""
        return _Open(side, lots, price, *rest, self._margin_price(side, price))

    def _margin_price(self, side: int, price: float) -> float | None:
        at = self.broker.to_points(price)
        return self.broker.money.margin_price(side, at, at, at)

    def _exit(self, pid: int, pos: _Open, lots: float, deal: _Exit) -> bool:
        """A trade: ``lots`` of position ``pid`` closed by ``deal`` (its share of the deal's money), with
        its share of entry commission; True where it closes all that ``pos`` held."""
        price, ns, bar, money, swap, profit = (
            deal.price,
            deal.ns,
            deal.bar,
            deal.money,
            deal.swap,
            deal.profit,
        )
        self._end(pos, bar)
        share = lots / pos.lots if pos.lots else 1.0
        entry_comm = pos.commission * share
        why = _REASON.get(deal.reason) or deal.comment or "signal"
        commission = entry_comm + money
        amount = pos.side * (price - pos.price) * lots * self.broker.config.contract_size
        unity = self.broker.money.profit.unity
        rate = profit / amount if amount and profit and not unity else self._rate(price)
        self.ledger.trade(
            Trade(
                pid,
                "buy" if pos.side > 0 else "sell",
                lots,
                pos.entry_ns,
                pos.price,
                ns,
                price,
                pos.sl,
                pos.tp,
                why,
                commission,
                swap,
                profit,
                profit + commission + swap,
                pos.bar,
                bar,
                pos.magic,
                pos.comment,
                self.symbol,
                rate,
            )
        )
        left = round(pos.lots - lots, 8)
        pos.lots, pos.commission = max(left, 0.0), pos.commission - entry_comm
        return left <= 1e-9

    def _levels(
        self, pid: int, ns: int | None, sl: float | None, tp: float | None
    ) -> tuple[float | None, float | None]:
        """Position ``pid``'s SL/TP at UTC ``ns`` (None: at the end): the last change made by then, else
        the levels it opened with."""
        for change in self._changes:
            if ns is not None and change.ns > ns:
                break
            if change.position == pid:
                sl, tp = change.sl, change.tp
        return sl, tp

    def _end(self, pos: _Open, bar: int) -> None:
        if bar > pos.seg:
            self.ledger.segment(pos.seg, bar, pos.side, pos.lots, pos.price, pos.margin_price, self.symbol)
        pos.seg = bar

    def _book_order(self, o: Any, first: int, fill: float | None) -> None:
        """One order of the terminal's history as a row of the backtest's orders table (``order_row``)."""
        self.ledger.order(order_row(o, self.symbol, self.utc_ns, lambda ns: self.bar_at(ns, first), fill))
