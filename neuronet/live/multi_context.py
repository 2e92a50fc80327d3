"""The trade context of a multi-symbol live EA: requests routed by symbol, each journaled with its symbol.

``TerminalRouter`` is ``backtests.context.TradingContext``'s routing over one ``TerminalTrade`` per symbol (a
live account); a paper account uses ``TradingContext`` itself over its brokers (``multi_paper``). Either way
``MultiLiveContext`` journals every request first, with the symbol it goes to, then its result (as
``context.LiveContext`` does for one symbol), and evaluates indicators on the main chart's closed bars.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from backtests.replay import causal_indicator
from neuronet.live.answers import JournalAnswers
from neuronet.live.context import LiveBars
from neuronet.live.day_pnl import DayPnl
from neuronet.live.limits import AccountState
from strategies.bars import Bars
from strategies.errors import EAError
from strategies.trade import net_volume

log = logging.getLogger(__name__)


class TerminalRouter:
    """A live account's trading over several symbols: one ``TerminalTrade`` each, the main one first."""

    def __init__(self, trades: Mapping[str, Any], main: str):
        self.trades = dict(trades)
        self.main = self.trades[main]
        self._last = self.main

    def _of(self, symbol: str | None) -> Any:
        if symbol is None:
            return self.main
        trade = self.trades.get(symbol)
        if trade is None:
            raise EAError(f"symbol {symbol!r}: this run trades {', '.join(self.trades)} only")
        return trade

    def _holding(self, ticket: int) -> Any:
        """The symbol's trade context holding position or order ``ticket`` (the main one refuses others)."""
        for trade in self.trades.values():
            if any(p.ticket == ticket for p in trade.positions()) or any(
                o.ticket == ticket for o in trade.orders()
            ):
                return trade
        return self.main

    def _use(self, trade: Any) -> Any:
        self._last = trade
        return trade

    def symbol_of(self, symbol: str | None, ticket: int | None = None) -> str:
        """The symbol a request goes to (journaled with it before it is sent)."""
        if symbol is not None or ticket is None:
            return self._of(symbol).symbol
        return self._holding(ticket).symbol

    @property
    def point(self) -> float:
        return self.main.point

    @property
    def last_retcode(self) -> int:
        return self._last.last_retcode

    def order(self, side, lots, sl, tp, magic, comment, symbol=None):
        return self._use(self._of(symbol)).order(side, lots, sl, tp, magic, comment)

    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol=None):
        t = self._use(self._of(symbol))
        return t.pending(kind, lots, price, stoplimit, sl, tp, expiration, magic, comment)

    def close(self, ticket, magic, lots=None, reason="signal", symbol=None) -> int:
        if symbol is not None:
            return self._use(self._of(symbol)).close(ticket, magic, lots, reason)
        if ticket is not None:
            return self._use(self._holding(ticket)).close(ticket, magic, lots, reason)
        return sum(self._use(t).close(None, magic, lots, reason) for t in self.trades.values())

    def close_by(self, ticket, opposite) -> bool:
        return self._use(self._holding(ticket)).close_by(ticket, opposite)

    def modify(self, ticket, sl, tp) -> bool:
        return self._use(self._holding(ticket)).modify(ticket, sl, tp)

    def cancel(self, ticket) -> bool:
        return self._use(self._holding(ticket)).cancel(ticket)

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration="keep") -> bool:
        return self._use(self._holding(ticket)).modify_order(ticket, price, stoplimit, sl, tp, expiration)

    def positions(self, symbol=None) -> list:
        if symbol is not None:
            return self._of(symbol).positions()
        return sorted((p for t in self.trades.values() for p in t.positions()), key=lambda p: p.ticket)

    def net_lots(self, symbol=None) -> float:
        return net_volume(self.positions(symbol))

    def orders(self, symbol=None) -> list:
        if symbol is not None:
            return self._of(symbol).orders()
        return sorted((o for t in self.trades.values() for o in t.orders()), key=lambda o: o.ticket)

    def account(self):
        return self.main.account()

    def price(self, side: int, symbol=None) -> float:
        return self._of(symbol).price(side)

    def point_of(self, symbol: str) -> float:
        return self._of(symbol).point

    # -- requests whose reply was lost, the day's halt and late bars: every symbol's -------------------------
    @property
    def unresolved(self) -> dict:
        return {k: v for t in self.trades.values() for k, v in t.unresolved.items()}

    def resolve(self) -> dict:
        out: dict = {}
        for trade in self.trades.values():
            if trade.unresolved:
                out.update(trade.resolve())
        return out

    def restore_unresolved(self, lost: Mapping[str, dict]) -> None:
        """Each request a stopped run left unresolved goes back to the context of its own symbol."""
        for symbol, trade in self.trades.items():
            mine = {k: v for k, v in lost.items() if (v.get("symbol") or self.main.symbol) == symbol}
            if mine:
                trade.restore_unresolved(mine)

    def restore_magics(self, magics: Mapping[str, set[int]]) -> None:
        """The magic numbers each symbol's requests carried before a restart go back to its context."""
        for symbol, trade in self.trades.items():
            trade.restore_magics(magics.get(symbol, ()))

    def restore_owned(self, owned: Mapping[str, list]) -> None:
        """The positions each symbol's context saw open before a restart (``owned``) go back to it."""
        for symbol, trade in self.trades.items():
            trade.restore_owned(owned.get(symbol, ()))

    def restore_halt(self, day: int) -> None:
        for trade in self.trades.values():
            trade.restore_halt(day)

    def account_state(self, day: int | None = None) -> AccountState:
        """Every symbol's exposures and today's P&L together, and whether any symbol's request found the
        daily loss limit reached today: a halt of the whole account (``limits.AccountLimits``). ``day``: the
        server day of the requesting symbol's own quote (None: the main symbol's)."""
        trades = list(self.trades.values())
        held = {name: t.exposures() for name, t in self.trades.items()}
        day = self.main.server_day() if day is None else int(day)
        halted = any(t.halted_on(day) for t in trades)
        pnl = sum((t.day_pnl(day) for t in trades), DayPnl(0.0))
        return AccountState(sum(held.values()), pnl, halted, held)

    @property
    def late(self) -> str | None:
        return self.main.late

    @late.setter
    def late(self, reason: str | None) -> None:
        for trade in self.trades.values():
            trade.late = reason


class MultiLiveContext:
    """``strategies.trade.TradeContext`` of a multi-symbol live run (see the module docstring)."""

    def __init__(
        self,
        trading: Any,
        bars: LiveBars,
        record: Callable[..., dict],
        now: Callable[[], pd.Timestamp],
        bar: Callable[[], int],
    ):
        self.trading = trading
        self._bars = bars
        self._record = record
        self._now = now
        self._bar = bar
        # A resumed run deciding again a bar the stop cut short: the requests journaled for it, in order,
        # answered from the journal instead of sent again (``answers``).
        self.answers = JournalAnswers()

    @property
    def point(self) -> float:
        return self.trading.point

    @property
    def last_retcode(self) -> int:
        got = self.answers.retcode
        return self.trading.last_retcode if got is None else got

    def _symbol(self, symbol: str | None, ticket: int | None) -> str | None:
        """The symbol a request goes to, for the journal (None for a close of every symbol)."""
        router = self.trading
        if hasattr(router, "symbol_of"):
            return router.symbol_of(symbol, ticket)
        if symbol is not None or ticket is None:
            return router._of(symbol).symbol
        return router._holding(ticket).symbol

    def _request(self, name: str, args: list, symbol: str | None, ticket: int | None = None) -> Any:
        target = (
            None if (name == "close" and symbol is None and ticket is None) else self._symbol(symbol, ticket)
        )
        done, value, why = self.answers.take(name, args, target)
        if why is not None:
            self._record("warning", bar=self._bar(), message=why)
        if done:
            return value
        self._record("request", bar=self._bar(), time=self._now(), call=name, args=list(args), symbol=target)
        kw = {} if symbol is None else {"symbol": symbol}
        value = getattr(self.trading, name)(*args, **kw)
        self._record(
            "result",
            bar=self._bar(),
            call=name,
            value=value,
            retcode=self.trading.last_retcode,
            symbol=target,
        )
        return value

    def order(self, side, lots, sl, tp, magic, comment, symbol=None):
        return self._request("order", [side, lots, sl, tp, magic, comment], symbol)

    def pending(self, kind, lots, price, stoplimit, sl, tp, expiration, magic, comment, symbol=None):
        args = [kind, lots, price, stoplimit, sl, tp, expiration, magic, comment]
        return self._request("pending", args, symbol)

    def close(self, ticket, magic, lots=None, reason="signal", symbol=None):
        return self._request("close", [ticket, magic, lots, reason], symbol, ticket)

    def close_by(self, ticket, opposite):
        return self._request("close_by", [ticket, opposite], None, ticket)

    def modify(self, ticket, sl, tp):
        return self._request("modify", [ticket, sl, tp], None, ticket)

    def cancel(self, ticket):
        return self._request("cancel", [ticket], None, ticket)

    def modify_order(self, ticket, price, stoplimit, sl, tp, expiration="keep"):
        return self._request("modify_order", [ticket, price, stoplimit, sl, tp, expiration], None, ticket)

    def orders(self, symbol=None):
        return self.trading.orders(symbol)

    def positions(self, symbol=None):
        return self.trading.positions(symbol)

    def net_lots(self, symbol=None) -> float:
        return self.trading.net_lots(symbol)

    def account(self):
        return self.trading.account()

    def price(self, side: int, symbol=None) -> float:
        value = self.trading.price(side, symbol)
        return value if value is not None else math.nan

    def point_of(self, symbol: str) -> float:
        return self.trading.point_of(symbol)

    def time_now(self) -> pd.Timestamp:
        return self._now()

    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str) -> np.ndarray:
        feed = self._bars.feed
        n = len(feed)
        probes = sorted({m for m in (n // 2, n - 1) if 2 <= m < n})
        return causal_indicator(fn, feed, name, probes)
