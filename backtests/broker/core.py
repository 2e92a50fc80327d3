"""A MetaTrader-style simulated broker: "open prices only", or "1 minute OHLC" / real ticks with a price
path attached.

The broker composes its parts, each an object with its own state: the symbol's bars (``Market``), its
order book (``OrderBook``: positions, pending orders, what a price reaches of them), the account
(``Account``: balance, equity, margin, stop-out), the margin and swap models, the symbol's money in the
deposit currency (``SymbolMoney``), the ledger of everything that happened (``Ledger``) and the EA's
requests (``TradeRequests``). The broker itself keeps the clock of the run (bar ``t``, the tick or minute
being worked); its ``Dealer`` (``backtests.broker.dealer``) makes the deals.

A broker trades one symbol. Several symbols on one account (``backtests.broker.portfolio``) are one broker
each, sharing the account and the ledger (``share``): the money rules are these, once.

Fill rules (prices are bid prices as in MT5 bars; ``backtests.broker.book`` says what a price reaches):
- market orders fill at the current bar's open: buys at the ask (open + spread), sells at the bid (open);
  longs close at the bid, shorts at the ask; netting (one position per symbol, default) or hedging;
- commission is money per lot per deal (entry and exit); swap is points per lot per night (``swap``), kept
  on the position (in the equity) until the deal that closes it books it to the balance, as MetaTrader does;
- an opening order needing more than the free margin is rejected, as the terminal does (no partial
  fills); requests are checked as the trade server does (``backtests.checks``) and a refused one is
  recorded with MetaTrader's retcode;
- stop-out: when the margin level falls to ``stop_out_level`` (``account``), the most losing position is
  closed where the level was crossed, and the level checked again;
- with an M1 path (``backtests.paths``) or ticks (``backtests.ticks``) the range checks follow the bar's
  minutes or ticks instead of its high/low.

Profits are computed in the symbol's profit currency and converted into the deposit currency at the rate of
the moment (``backtests.broker.convert``); a symbol without a specification keeps its profit as the deposit
currency (EURUSD on a USD account). The equity curve is rebuilt after the run from position segments, so
the per-bar loop stays cheap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from backtests.broker.account import Account, cents
from backtests.broker.book import OpenPosition, OrderBook, Pending
from backtests.broker.calm import Calm
from backtests.broker.config import AccountConfig
from backtests.broker.dealer import Dealer
from backtests.broker.ledger import Ledger
from backtests.broker.margin import MarginModel
from backtests.broker.market import Market, server_days
from backtests.broker.records import OrderRecord
from backtests.broker.requests import KEEP, TradeRequests
from backtests.broker.swap import SwapModel
from backtests.broker.terms import SymbolMoney, SymbolTerms
from backtests.broker.triggers import fill_reached
from datafeeds.clock import UTC, BrokerClock
from strategies.trade import Account as AccountView
from strategies.trade import Order, Position


class Broker:
    """Positions, pending orders, fills and the account for one replay; the harness advances ``t`` bar by bar.

    Implements ``strategies.trade.TradeContext``: the EA's requests go to ``requests``. ``bar_open``,
    ``bar_range`` and ``finish`` are the harness's events; a paper account and a live account's ledger
    extend the broker through its parts' public methods (``market.append``, ``ledger``, ``adopt``).
    """

    def __init__(
        self,
        open_: np.ndarray,
        high: np.ndarray,
        low: np.ndarray,
        close: np.ndarray,
        spread_points: np.ndarray,
        time: pd.DatetimeIndex,
        point: float,
        config: AccountConfig,
        clock: BrokerClock = UTC,
        *,
        terms: SymbolTerms | None = None,
        share: Broker | None = None,
    ):
        """``terms``: the symbol's name and what its specification adds (``SymbolTerms``); ``share``: the
        broker of another symbol of the same account, whose account and ledger this one joins."""
        self.config = config
        self.point = point
        self.clock = clock  # the broker's server clock: its midnight is the rollover, its day "today"
        self.terms = terms = terms or SymbolTerms()
        self.symbol = terms.symbol
        self.market = Market(open_, high, low, close, spread_points, time, point, config, clock)
        self.scale = self.market.scale  # points per price unit: prices inside the broker are whole points
        self.margin = MarginModel(config, self.scale, terms.calc_mode, terms.margin_rate)
        self.money = SymbolMoney(config, self.scale, terms)
        if share is None:
            self.ledger = Ledger(self.market, config, self.margin, self.symbol)
            self.funds = Account(config, self.ledger)
        else:
            self.ledger, self.funds = share.ledger, share.funds
            self.ledger.add(self.symbol, self.market, config.contract_size, self.margin, self.money.profit)
        self.book = OrderBook()
        self.funds.attach(self)
        self.dealer = Dealer(self)  # the fills and closes: ``fill``, ``close_position``
        self.swaps = SwapModel(config, point, terms.swap_mode)
        self.requests = TradeRequests(self)
        self.calm = Calm(self)  # the open-prices bars that reach nothing of the book: their checks skipped
        self.t = 0
        self.last_retcode = 0
        self.stop_out_on = config.stop_out_level > 0
        m = self.market
        # Prices the checks read, in points: (open, high, low, spread) of the bar, or of one stretch of a
        # price path.
        self.quote = (m.o[0], m.h[0], m.lo[0], m.s[0])
        self.price_path = None  # backtests.paths.M1Path ("1 minute OHLC") or backtests.ticks.TickPath
        self.open_day: np.ndarray | None = None  # server day of each bar's first minute or tick, else its own
        self.rolled = -1  # the last bar whose rollover has been looked at (``rollover``)
        self.midnights: dict[int, int] = {}  # path rows that open a server day (a bar's first too): the day
        self.midnight_rows: list[int] = []  # those rows, in order
        self.walking = False  # True while a price path is walked: the order of prices inside it is known
        # Inside a bar: the tick being worked (its bid and ask are the market), or the UTC ns of the minute
        # being walked; the records take their times from these, so a fill shows when it happened.
        self.now = None  # strategies.trade.Tick
        self.now_ns: int | None = None
        # A quote inside the bar that fills take instead of its open, without a time of its own (a paper
        # account's latest quote for on_tick): (bid, ask) in points.
        self.inside: tuple[float, float] | None = None
        self.revision = 0  # counts changes of positions and orders (a tick walk re-reads its levels then)

    # -- the parts' state, read-only (``spread`` in price units, ``deals`` the number of deals) -----------
    opens = property(lambda self: self.market.opens)
    highs = property(lambda self: self.market.highs)
    lows = property(lambda self: self.market.lows)
    closes = property(lambda self: self.market.closes)
    spread = property(lambda self: self.market.spread)
    time = property(lambda self: self.market.time)
    balance = property(lambda self: self.funds.balance)
    open_positions = property(lambda self: self.book.positions)
    pending_orders = property(lambda self: self.book.orders)
    trades = property(lambda self: self.ledger.trades)
    rejected = property(lambda self: self.ledger.rejected)
    deals = property(lambda self: self.ledger.deal_count())  # MetaTrader's "Total Deals"
    profit_rate = property(lambda self: self.money.profit)

    # -- prices and time -------------------------------------------------------------------------------------
    def price(self, side: int, symbol: str | None = None) -> float:
        """Fill price now for a deal in direction ``side`` (+1 buy at the ask, -1 sell at the bid): the
        current bar's open, or the tick being worked."""
        if symbol is not None:
            self.requests.own(symbol)
        return self.price_points(side) / self.scale

    def point_of(self, symbol: str) -> float:
        """The point of ``symbol`` (this broker's own)."""
        self.requests.own(symbol)
        return self.point

    def price_points(self, side: int) -> float:
        """``price`` in whole points."""
        now = self.now
        if now is not None:  # a tick: (time_ns, bid, ask, ...)
            return float(round((now[2] if side > 0 else now[1]) * self.scale))
        if self.inside is not None:
            return self.inside[1] if side > 0 else self.inside[0]
        t, m = self.t, self.market  # Python floats (``item``): the same values, cheaper to compute with
        return m.o.item(t) + m.s_open.item(t) if side > 0 else m.o.item(t)

    def bid_ask(self) -> tuple[float, float]:
        """``(price_points(-1), price_points(+1))`` in one call: the bid and the ask now, in points."""
        now = self.now
        if now is not None:
            scale = self.scale
            return float(round(now[1] * scale)), float(round(now[2] * scale))
        inside = self.inside
        if inside is not None:
            return inside[0], inside[1]
        t, m = self.t, self.market
        bid = m.o.item(t)
        return bid, bid + m.s_open.item(t)

    def to_points(self, price: float) -> float:
        """A price on the symbol's grid, in whole points (the nearest: a quote lies on the grid)."""
        return float(round(price * self.scale))

    def time_now(self) -> pd.Timestamp:
        """The server's clock now: the tick's or minute's time (a bar's first at its open), else the bar's."""
        ns = self.stamp()
        return self.market.time[self.t] if ns is None else pd.Timestamp(ns, tz="UTC")

    def stamp(self) -> int | None:
        """UTC ns of the tick or minute being worked; None where none is (records use the bar's time)."""
        now = self.now
        return now[0] if now is not None else self.now_ns

    # -- the EA's requests (strategies.trade.TradeContext; ``symbol`` must be this broker's own) ----------
    def order(self, side, lots, sl, tp, magic, comment, symbol: str | None = None):
        return self.requests.order(side, lots, sl, tp, magic, comment, symbol)

    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol=None):
        return self.requests.pending(kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol)

    def close(self, ticket, magic, lots=None, reason: str = "signal", symbol: str | None = None) -> int:
        return self.requests.close(ticket, magic, lots, reason, symbol)

    def close_by(self, ticket: int, opposite: int) -> bool:
        return self.requests.close_by(ticket, opposite)

    def modify(self, ticket: int, sl: float | None, tp: float | None) -> bool:
        return self.requests.modify(ticket, sl, tp)

    def cancel(self, ticket: int) -> bool:
        return self.requests.cancel(ticket)

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration=KEEP) -> bool:
        return self.requests.modify_order(ticket, price, stoplimit, sl, tp, expiration)

    def positions(self, symbol: str | None = None) -> list[Position]:
        return self.requests.positions(symbol)

    def orders(self, symbol: str | None = None) -> list[Order]:
        self.requests.own(symbol)
        return [o.public(self.market.time, self.scale, self.symbol) for o in self.book.orders]

    def account(self) -> AccountView:
        equity = self.equity_now()
        margin = self.funds.used_margin()
        return AccountView(self.funds.balance, equity, margin, equity - margin, self.funds.leverage,
                           self.funds.currency)  # fmt: skip

    def equity_now(self) -> float:
        """Balance plus floating profit at the current open (the tick being worked on a tick path)."""
        if self.funds.closed_form:
            return self.funds.equity(self.price_points(-1), self.price_points(+1))
        return self.funds.equity_now()

    def equity_at_close(self, t: int) -> float:
        """Balance plus floating profit at bar ``t``'s close (longs at its bid, shorts at its ask; the
        account's other symbols at their prices now)."""
        m = self.market
        return self.funds.equity(m.c[t], m.c[t] + m.s_close[t], self)

    # -- this symbol's money in the deposit currency (the account reads them) --------------------------------
    def floating(self, bid: float, ask: float) -> float:
        """The positions' floating profit at ``bid``/``ask`` (points), deposit currency."""
        return self.money.floating(self.book.positions, bid, ask)

    def floating_now(self) -> float:
        """The positions' floating profit at the prices now, deposit currency."""
        return self.money.floating(self.book.positions, self.price_points(-1), self.price_points(+1))

    def position_profit(self, pos: OpenPosition, exit_: float, bid=None, ask=None) -> float:
        """``pos`` closed at ``exit_`` (points; ``bid``/``ask``: this symbol's prices then, default now),
        in the deposit currency."""
        amount = pos.side * (exit_ - pos.price) * pos.lots * self.money.per_point
        if bid is None:
            bid, ask = self.price_points(-1), self.price_points(+1)
        return self.money.money(amount, bid, ask)

    # -- per-bar events (called by the harness) -----------------------------------------------------------
    def bar_open(self, t: int) -> None:
        """Start of bar ``t``: swaps, stops gapped through, expiries and pending orders reached by the open,
        then the stop-out check at the open. On a tick path the open is the bar's first tick (its bid and
        ask are then the market for the EA's decision too)."""
        if self.price_path is None:  # open prices: ``enter`` without a path to open
            self.t, self.now, self.now_ns = t, None, None
            book = self.book
            if book.positions or book.orders:  # nothing open, nothing to check
                self.open_checks(t, None)
        else:
            self.open_checks(t, self.enter(t))

    def enter(self, t: int) -> tuple | None:
        """Bar ``t`` begins: the clock moves to its open (its first tick on a tick path, whose quote this
        returns). Every symbol of an account enters a bar before any is checked, so each reads the others'
        prices of the same moment."""
        self.t = t
        self.now = self.now_ns = None
        path = self.price_path
        return path.open_bar(self, t) if path is not None else None

    def open_checks(self, t: int, first: tuple | None) -> None:
        """``bar_open``'s checks, once the bar has begun (``first``: its first tick's quote, if any)."""
        book = self.book
        m = self.market
        if not (book.positions or book.orders):
            return
        if self.midnights:  # the account's night, every symbol's, where it is due at this opening
            self._opening_midnight(t)
        if self.swaps.active and book.positions:  # else no swap to charge: ``rolls`` is False
            self.rollover(t)
        else:
            self.rolled = t
        if m.closed is not None and m.closed[t]:
            return  # no bar of its own: nothing else to check (``Market.close_gaps``)
        if first is None and self.calm.holds(t):
            return
        self.quote = (m.o.item(t), m.h.item(t), m.lo.item(t), m.s_open.item(t)) if first is None else first
        if book.orders:
            self.expire(t, self.time_now())  # the bar's open, or its first tick's time
        self.at_open_checks(t)

    def _opening_midnight(self, t: int) -> None:
        """Bar ``t`` opens at its first minute or tick, the first of a new server day (``midnights``): where
        the account's night has not been charged yet (another symbol's bar opened before the midnight,
        ``multi_replay.rollover``), it is charged now, before this opening's checks (``midnight``)."""
        path = self.price_path
        row = int(path.starts[t])
        day = self.midnights.get(row) if row < path.starts[t + 1] else None
        now = self.stamp()
        if day is not None and now is not None and now >= path.row_ns[row]:
            self.midnight(day, int(path.row_ns[row]))

    def rollover(self, t: int, day: int | None = None, ns: int | None = None) -> None:
        """Once a bar, the rollover's swap of the nights the positions held into bar ``t`` still owe by its
        opening day, or by server day ``day`` where that is earlier (``rolls``), at UTC ``ns`` (the account's
        first price of the bar) or the bar's open (None); an account charges every symbol's before any
        symbol's checks (``multi_replay.rollover``): a stop-out there never closes a position with its night
        unpaid."""
        if self.rolls(t, day):
            self._swap(self._today(t, day), ns)
        self.rolled = t

    def rolls(self, t: int, day: int | None = None) -> bool:
        """Whether bar ``t``'s ``rollover`` charges a swap (not yet looked at, a position that has not been
        charged up to the day bar ``t`` opens on, or ``day`` where that is earlier)."""
        if self.rolled == t or not (self.swaps.active and self.book.positions) or t == 0:
            return False
        today = self._today(t, day)
        return any(self.held_since(pos) < today for pos in self.book.positions)

    def _today(self, t: int, day: int | None) -> int:
        """The server day of bar ``t``'s opening (its first minute's or tick's), or ``day`` if earlier."""
        days = self.market.day if self.open_day is None else self.open_day
        own = int(days[t])
        return own if day is None or day > own else day

    def held_since(self, pos: OpenPosition) -> int:
        """The server day whose midnight ``pos`` has been charged up to: first the day it was opened on (its
        fill's minute or tick, else its bar's time). MetaTrader charges the rollover to the positions open at
        that moment only, so a night is owed from here on, whichever minutes a walk worked before it: a
        position opened after a midnight that nothing stopped at owes nothing for it, one open at a
        midnight that nothing stopped at owes it at the next rollover."""
        night = pos.night
        if night is None:
            ns = pos.entry_ns
            days = self.market.day if ns is None else server_days(np.array([ns], dtype=np.int64), self.clock)
            night = pos.night = int(days[pos.bar if ns is None else 0])
        return night

    def midnight(self, day: int, ns: int) -> None:
        """The server's midnight passed inside bar ``t``, at the first minute or tick of server day ``day``
        (UTC ``ns``; the next bar missing, the prices going on): MetaTrader charges the swap at the
        rollover to the positions open then, so every symbol of the account is charged its night here, at
        its price of this moment, and not again at the next bar's opening (``rollover``); a position opened
        after it owes none. The charge is recorded with its moment: the equity path takes it there, not at
        the bar's open (where it would lower a peak of the bar before midnight)."""
        for desk in self.funds.desks:
            desk.night(day, ns)

    def night(self, day: int, ns: int) -> None:
        """This symbol's share of ``midnight``: each position's nights not yet charged up to ``day``, at
        UTC ``ns``."""
        if self.swaps.active and self.book.positions:
            self._swap(day, ns)

    def bar_range(self, t: int) -> None:
        """During bar ``t``: pending orders reached by its high/low, the stop-out (with the stops nearer to
        the open before it), then the stops touched (including positions opened at this bar).

        With a price path attached (``attach_path``), the bar's minutes or ticks are walked instead; a tick
        path with an ``on_tick`` hook is walked even with nothing open (the hook runs on every tick).
        """
        path, book = self.price_path, self.book
        if self.market.closed is not None and self.market.closed[t]:
            return  # the symbol has no bar now: nothing trades (``Market.close_gaps``)
        if path is not None and path.covers(t) and (book.positions or book.orders or path.hook):
            path.walk(self, t)
            return
        if not (book.positions or book.orders) or self.calm.holds(t):
            return
        m = self.market
        self.quote = (m.o.item(t), m.h.item(t), m.lo.item(t), m.s.item(t))
        self.range_checks(t)

    def attach_path(self, path) -> None:
        """Work fills through M1 bars (``backtests.paths.M1Path``: MetaTrader's "1 minute OHLC" model) or
        ticks (``backtests.ticks.TickPath``: "Every tick based on real ticks"); the bars they cover open
        with the spread of their first minute or tick and close with that of their last."""
        self.price_path = path
        self.market.use_spreads(*path.bar_spreads())
        self.open_day = path.opening_days(self.clock)
        if self.swaps.active:  # a walk stops at each of these rows: a rollover inside a bar (``midnight``)
            self.midnights = path.midnights(self.clock)
            self.midnight_rows = sorted(self.midnights)

    def at_open_checks(self, t: int) -> None:
        """At an opening price (``quote``): pending orders reached, stops gapped through, the stop-out.

        Pending orders first: a position a gap fills at the open may already lie beyond its own SL or TP
        (a buy limit gapped below its stop-loss), and then closes at that open, not at the level.
        """
        book = self.book
        if book.orders:
            fill_reached(self, t, at_open=True)
        if book.positions:
            self._stops(t, True)
        if book.positions and self.stop_out_on and self.funds.level_crossed(self.quote, True, self):
            self.stop_out(at_open=True)

    def range_checks(self, t: int) -> None:
        """Over a range of prices (``quote``): pending orders, the stop-out, then SL/TP.

        On an M1 path the range is a straight move ending at any pending price inside it, so the positions
        open before it are checked first and an order filled at its end is checked from there on.
        """
        book = self.book
        if book.orders and not self.walking:
            fill_reached(self, t, at_open=False)
        if book.positions:
            if self.stop_out_on and self.funds.level_crossed(self.quote, False, self):
                self.stop_out(at_open=False)
            self._stops(t, False)
        if book.orders and self.walking:
            fill_reached(self, t, at_open=False)

    def expire(self, t: int, now: pd.Timestamp | None = None) -> None:
        """Retire the orders whose expiration has come by ``now`` (default: bar ``t``'s opening time)."""
        now = self.market.time[t] if now is None else now
        for order in self.book.expired(now):
            self.retire(order, "expired")

    def to_close(self, t: int) -> None:
        """The market moves to bar ``t``'s close, where conversions through this symbol then read it."""
        self.t, self.now, self.now_ns, self.inside = t, None, None, self.market.close_quote(t)

    def finish(self, last: int) -> None:
        """Close what is still open at the last bar's close (MetaTrader's "end of test" deals; an account's
        symbols all move there first, ``to_close``); pending orders are left unfilled and cancelled."""
        self.to_close(last)
        bid, ask = self.inside
        for pos in list(self.book.positions):
            self.close_position(pos, pos.lots, bid if pos.side > 0 else ask, "end of test")
        for order in list(self.book.orders):
            self.retire(order, "canceled")

    def adopt(self, pos: OpenPosition) -> None:
        """Hold ``pos``, a position opened elsewhere (a live account's, handed over to be closed in a
        report by ``finish``); its floating segment runs from ``pos.seg``."""
        self.book.add(pos)

    # -- fills ---------------------------------------------------------------------------------------------
    def upcoming_ticket(self) -> int:
        """The ticket the next order or position will get (one numbering for the account's symbols)."""
        return self.ledger.upcoming_ticket()

    def new_ticket(self) -> int:
        return self.ledger.new_ticket()

    def fill(self, side, lots, price, sl, tp, magic, comment, ticket=None, reason="signal",
             quote: tuple[float, float] | None = None) -> int | None:  # fmt: skip
        """A deal of ``lots`` at ``price`` (points; SL/TP too), as ``Dealer.fill`` makes it: the position's
        ticket, or None (refused and recorded)."""
        return self.dealer.fill(side, lots, price, sl, tp, magic, comment, ticket, reason, quote)

    def close_position(self, pos: OpenPosition, lots: float, price: float, reason: str, order=None,
                       record_order=True, entry="out") -> None:  # fmt: skip
        """Close ``lots`` of ``pos`` at ``price`` (points), as ``Dealer.close_position`` books it."""
        self.dealer.close_position(pos, lots, price, reason, order, record_order, entry)

    def _stops(self, t: int, gap_only: bool) -> None:
        for pos, price, reason in self.book.reached_stops(self.quote, t, gap_only):
            self.close_position(pos, pos.lots, price, reason)

    def stop_out(self, at_open: bool) -> None:
        """Close what the stop-out closes (``Account.stop_out_step``: on any symbol of the account, the most
        losing position first) until the level is no longer crossed. Each close happens where the market is
        then, and the level is checked again from that bid on (never from a price the market had passed,
        which would close the next position at an older price than MetaTrader's re-check at that tick)."""
        funds, when, quote = self.funds, self.time_now(), self.quote  # the moment of the crossing price
        while funds.level_crossed(quote, at_open, self):
            for desk, pos, price, reason in funds.stop_out_step(quote, at_open, when, self.t, self):
                desk.close_position(pos, pos.lots, price, reason)
                if not at_open and desk is self:
                    o, h, lo, spr = quote
                    bid = price if pos.side > 0 else price - spr
                    if self.walking:  # a straight piece of a path: the rest of it lies beyond the bid
                        h, lo = (bid, lo) if h == o else (h, bid)
                    quote = (bid, h, lo, spr)

    def retire(self, order: Pending, state: str) -> None:
        """Take ``order`` off the book as ``state`` ("canceled", "expired")."""
        self.book.orders.remove(order)
        self.revision += 1
        record = order.record
        record.state, record.bar_done, record.done_ns = state, self.t, self.stamp()

    def _swap(self, day: int, ns: int | None = None) -> None:
        """Each position's nights from the day it has been charged up to (``held_since``) to server day
        ``day``, at this moment's prices and at UTC ``ns`` (a midnight inside the bar, a symbol's or the
        account's first price of a new day) or the bar's open (None); kept on the position until its closing
        deal books it."""
        bid, ask = self.price_points(-1), self.price_points(+1)
        for pos in self.book.positions:
            since = self.held_since(pos)
            if since >= day:
                continue
            pos.night = day
            nights = self.swaps.nights(since, day)
            if not nights:
                continue
            amount = cents(self.money.swap_money(self.swaps.amount(pos, nights, bid, ask), bid, ask))
            pos.swap += amount
            self.funds.accrue(amount, self.t, ns)  # on the position until its closing deal books it

    # -- records -------------------------------------------------------------------------------------------
    def reject(self, action: str, side: int, lots, retcode: int, reason: str, **request) -> None:
        """Refuse a request: ``last_retcode`` is set and the request listed with its reason."""
        self.last_retcode = retcode
        self.ledger.reject(self.t, self.time_now(), action, side, lots, retcode, reason, symbol=self.symbol,
                           **request)  # fmt: skip
        return None

    def record_order(self, ticket, kind, lots, price, sl, tp, state, position, magic, comment, stoplimit=None,
                     expiration=None) -> OrderRecord | None:  # fmt: skip
        """An order of the orders table (a market order filled now, or a pending order placed now; prices
        in price units): the placed order's record, which follows the order, or None for a fill (recorded
        as a row, ``Ledger.new_order``)."""
        self.revision += 1
        ns = self.now[0] if self.now is not None else self.now_ns  # ``stamp``, inline: per order
        return self.ledger.new_order(self.t, ns, ticket, kind, lots, price, sl, tp, state, position, magic,
                                     comment, stoplimit, expiration, self.symbol)  # fmt: skip

    # -- result tables -------------------------------------------------------------------------------------
    def trades_frame(self) -> pd.DataFrame:
        return self.ledger.trades_frame()

    def orders_frame(self) -> pd.DataFrame:
        return self.ledger.orders_frame()

    def deals_frame(self) -> pd.DataFrame:
        return self.ledger.deals_frame()

    def curves(self, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.ledger.curves(first)

    def worst_curves(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        return self.ledger.worst_curves(first)
