"""The trading context of a backtest: what an expert advisor's requests reach (``strategies.trade``).

One class for every run: a broker per symbol, all on one account, the first symbol's the main chart's.
A single-symbol run is the case of one broker, so each rule is written once here: where a request goes
(``symbol=`` names a declared symbol, None the main chart's; a ticket goes to the symbol that holds it),
what a position query returns, and that no symbol is quoted before its first bar of its own (MetaTrader's
``SymbolInfoDouble`` gives no price for a symbol without ticks: its flat first open lies in the future),
nor, with several symbols' minutes or ticks, before its first minute or tick: its price is NaN, and a
request on it, or on a symbol whose profit or margin it converts, is refused with 10021 (MetaTrader's
``TRADE_RETCODE_PRICE_OFF``, "there are no quotes to process the request") naming it, so no later price is
read, shown or filled at.
Indicators are evaluated on the main chart by the harness's evaluator (``backtests.replay``: proved
causal on shorter prefixes), which the context calls but does not own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from backtests import checks
from backtests.broker import Broker
from backtests.pair_moves import priced_through
from strategies.errors import EAError
from strategies.trade import PENDING_TYPES, Account, Order, Position, net_volume

Indicator = Callable[[Callable, str], np.ndarray]  # (fn, name) -> its values over the main chart's bars


class TradingContext:
    """``strategies.trade.TradeContext`` over the brokers of one account (see the module docstring);
    ``indicator``: the harness's causal evaluator on the main chart (None: an account without bars of its
    own, such as a paper account's, whose runner evaluates indicators itself)."""

    def __init__(self, brokers: Mapping[str, Broker], main: str, indicator: Indicator | None = None):
        self.brokers = dict(brokers)
        self.main = self.brokers[main]
        self._route: dict[str | None, Broker] = {None: self.main, **self.brokers}  # None: the main chart
        self.point = self.main.point
        self._last = self.main  # the broker of the latest request: its retcode is the EA's
        self._several = len(self.brokers) > 1
        self._indicator = indicator
        self._late = _late_quotes(self.brokers.values(), self.main)
        # What a request on each symbol needs a quote of: itself and the pairs converting its money, where
        # one may have none yet (the symbols of ``_late``); empty in every other run, so nothing is asked.
        late = self._late
        needs = {b: [x for x in _quoting(b) if x in late] for b in self.brokers.values()} if late else {}
        self._needs = {b: need for b, need in needs.items() if need}

    # -- routing -------------------------------------------------------------------------------------------
    def _of(self, symbol: str | None) -> Broker:
        """The broker of ``symbol`` (None: the main chart's); a symbol the run does not trade is the EA's
        bug."""
        broker = self._route.get(symbol)
        if broker is None:
            raise EAError(
                f"symbol {symbol!r}: this run trades {', '.join(self.brokers)} only; declare the symbols "
                "an EA trades in its class attribute symbols (or --symbols)"
            )
        return broker

    def _holding(self, ticket: int) -> Broker:
        """The broker with position or pending order ``ticket`` (the main one refuses an unknown ticket)."""
        if self._several:
            for broker in self.brokers.values():
                book = broker.book
                if book.position(ticket) is not None or book.order(ticket) is not None:
                    return broker
        return self.main

    def _use(self, broker: Broker) -> Broker:
        self._last = broker
        return broker

    @property
    def last_retcode(self) -> int:
        return self._last.last_retcode

    # -- requests ------------------------------------------------------------------------------------------
    def order(self, side, lots, sl, tp, magic, comment, symbol=None):
        broker = self._last = self._route.get(symbol) or self._of(symbol)
        if self._needs and self._no_quote(broker, "deal", side, lots, sl=sl, tp=tp):
            return None
        return broker.requests.order(side, lots, sl, tp, magic, comment)  # ``Broker.order``, one call less

    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol=None):
        broker = self._last = self._route.get(symbol) or self._of(symbol)
        if self._needs:
            side = PENDING_TYPES[kind].side if kind in PENDING_TYPES else 0
            request = {"kind": kind, "price": price, "stoplimit": stoplimit, "sl": sl, "tp": tp}
            if self._no_quote(broker, "pending", side, lots, **request, expiration=str(expiration)):
                return None
        return broker.pending(kind, lots, price, stoplimit, sl, tp, expiration, magic, comment)

    def _no_quote(self, broker: Broker, action: str, side: int, lots, **request) -> bool:
        """Refuse a request (10021) where its symbol, or a pair converting its profit or margin, has no
        quote yet (see the module docstring); the reason names that symbol, never a price."""
        missing = next((x for x in self._needs.get(broker, ()) if not self._quoted(x, x is broker)), None)
        if missing is None:
            return False
        at = self.time_now()
        why = (
            f"no quotes: {broker.symbol} has no price yet at {at}"
            if missing is broker
            else f"no quotes: {broker.symbol}'s money converts through {missing.symbol}, which has no price "
            f"yet at {at}"
        )
        broker.reject(action, side, lots, checks.PRICE_OFF, why, **request)
        return True

    def _quoted(self, broker: Broker, own: bool = False) -> bool:
        """Whether ``broker``'s symbol has a price now: its first bar of its own has begun (``own``: not
        asked, a request on the symbol itself is refused there as the market being closed, 10018) and,
        with minutes or ticks, its first one has come by the moment the EA decides (the main symbol's
        first of the bar)."""
        if broker.t < broker.market.first and not own:
            return False
        first = self._late.get(broker)
        if first is None:
            return True
        path = self.main.price_path
        return path is None or first <= path.opening_ns(self.main.t)

    def close(self, ticket, magic, lots=None, reason="signal", symbol=None) -> int:
        """One position (by ticket), or every position (of a magic number) of one symbol or of all."""
        if symbol is None and not self._several:  # one symbol: its broker holds every ticket
            broker = self._last = self.main
            return broker.requests.close(ticket, magic, lots, reason)  # ``Broker.close``, one call less
        if symbol is not None:
            return self._use(self._of(symbol)).close(ticket, magic, lots, reason)
        if ticket is not None:
            return self._use(self._holding(ticket)).close(ticket, magic, lots, reason)
        return sum(self._use(b).close(None, magic, lots, reason) for b in self.brokers.values())

    def close_by(self, ticket: int, opposite: int) -> bool:
        return self._use(self._holding(ticket)).close_by(ticket, opposite)

    def modify(self, ticket: int, sl, tp) -> bool:
        return self._use(self._holding(ticket)).modify(ticket, sl, tp)

    def cancel(self, ticket: int) -> bool:
        return self._use(self._holding(ticket)).cancel(ticket)

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration="keep") -> bool:
        return self._use(self._holding(ticket)).modify_order(ticket, price, stoplimit, sl, tp, expiration)

    # -- queries -------------------------------------------------------------------------------------------
    def positions(self, symbol=None) -> list[Position]:
        """One symbol's positions, or every symbol's in ticket order (one symbol's: in its book's order)."""
        if symbol is None and self._several:
            return sorted((p for b in self.brokers.values() for p in b.positions()), key=lambda p: p.ticket)
        return (self._route.get(symbol) or self._of(symbol)).positions()

    def net_lots(self, symbol=None) -> float:
        """One symbol's net volume in lots (None: the main chart's), from its book's kept sum: the same as
        ``net_volume(self.positions(symbol))`` without building the records."""
        if symbol is None and self._several:
            return net_volume(self.positions())
        return (self._route.get(symbol) or self._of(symbol)).book.net_lots()

    def orders(self, symbol=None) -> list[Order]:
        if symbol is not None or not self._several:
            return self._of(symbol).orders()
        return sorted((o for b in self.brokers.values() for o in b.orders()), key=lambda o: o.ticket)

    def account(self) -> Account:
        return self.main.account()

    def price(self, side: int, symbol=None) -> float:
        """A symbol's price now; NaN before its first bar of its own (see the module docstring)."""
        broker = self._route.get(symbol) or self._of(symbol)
        if broker.t < broker.market.first or (broker in self._late and not self._quoted(broker)):
            return math.nan
        return broker.price(side)

    def point_of(self, symbol: str) -> float:
        return (self._route.get(symbol) or self._of(symbol)).point

    def time_now(self) -> pd.Timestamp:
        return self.main.time_now()

    def indicator(self, fn: Callable, name: str) -> np.ndarray:
        if self._indicator is None:
            raise EAError(f"indicator {name!r}: this account evaluates no indicators of its own")
        return self._indicator(fn, name)


def _late_quotes(brokers, main: Broker) -> dict[Broker, int]:
    """The symbols that may have no quote at a moment the EA decides: each one whose first bar of its own
    comes after the account's first (value: -1, no later price path), and each other than the main symbol
    whose first minute or tick comes after the account's first bar opens (value: that minute's or tick's
    UTC ns). The main symbol decides at its own first price of a bar, so it always has one."""
    late: dict[Broker, int] = {}
    for b in brokers:
        path = b.price_path
        first = int(path.row_ns[0]) if path is not None and len(path.row_ns) else -1
        if b is not main and path is not None and first > int(path.edges_ns[0]):
            late[b] = first
        elif b.market.first > 0:
            late[b] = -1
    return late


def _quoting(broker: Broker) -> list[Broker]:
    """The brokers whose quotes a request on ``broker`` reads: its own, and those of the pairs converting
    its profit and its margin into the deposit currency (``backtests.broker.convert``)."""
    return [broker, *priced_through(broker)]
