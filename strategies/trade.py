"""The trade API an expert advisor uses: positions, pending orders, the account (MetaTrader's shapes).

``TradeContext`` is the one interface behind it: the backtest broker implements it, and a live terminal is
to implement the same. ``TradeMethods`` is the EA-facing half (``ExpertAdvisor`` inherits it): it checks
argument types at the call (a wrong type is a bug in the EA: ``EAError``) and leaves the checks of values
a trade server makes (NaN volume, stops on the wrong side, ...) to the context, which refuses such
requests with MetaTrader's retcode, as the terminal would. The records it hands out (``Position``,
``Order``, ``Account``, ``Tick``, the order types) are ``strategies.trade_records``', importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from datafeeds.clock import read_timestamp
from strategies.errors import EAError
from strategies.trade_records import ORDER_TYPE_CODES as ORDER_TYPE_CODES
from strategies.trade_records import ORDER_TYPES as ORDER_TYPES
from strategies.trade_records import PENDING_TYPES as PENDING_TYPES
from strategies.trade_records import Account as Account
from strategies.trade_records import Order as Order
from strategies.trade_records import OrderType as OrderType
from strategies.trade_records import Position as Position
from strategies.trade_records import Tick as Tick

if TYPE_CHECKING:
    from strategies.bars import Bars


class TradeContext(Protocol):
    """What the harness gives an EA to trade with: the backtest broker (``backtests``) implements it, and a
    live terminal is to implement the same. Refused requests return None/False/0 and set ``last_retcode``
    (MetaTrader's ``TRADE_RETCODE_*``); stops of 0 or None mean "no stop"."""

    point: float
    last_retcode: int

    def order(
        self, side: int, lots: float, sl: float | None, tp: float | None, magic: int, comment: str
    ) -> int | None: ...

    def pending(
        self,
        kind: str,
        lots: float,
        price: float,
        stoplimit: float | None,
        sl: float | None,
        tp: float | None,
        expiration: str | pd.Timestamp | None,
        magic: int,
        comment: str,
    ) -> int | None: ...

    def close(
        self, ticket: int | None, magic: int | None, lots: float | None = None, reason: str = "signal"
    ) -> int: ...

    def close_by(self, ticket: int, opposite: int) -> bool: ...

    def modify(self, ticket: int, sl: float | None, tp: float | None) -> bool: ...

    def orders(self) -> list[Order]: ...

    def cancel(self, ticket: int) -> bool: ...

    def modify_order(
        self,
        ticket: int,
        price: float | None,
        stoplimit: float | None,
        sl: float | None,
        tp: float | None,
        expiration: str | pd.Timestamp | None = "keep",
    ) -> bool: ...

    def positions(self) -> list[Position]: ...

    def net_lots(self) -> float:
        """``net_volume(self.positions())``, answered without building the position records where the
        context keeps its positions itself (an EA may ask on every bar of every symbol)."""
        ...

    def account(self) -> Account: ...

    def price(self, side: int) -> float: ...

    def time_now(self) -> pd.Timestamp: ...

    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str) -> np.ndarray: ...


class TradeMethods:
    """The trading methods of ``ExpertAdvisor`` (needs ``magic`` and ``_require_ctx`` from it)."""

    magic: int
    _ctx: TradeContext | None  # read directly by the per-bar requests; ``_require_ctx`` says why it is None
    _require_ctx: Callable[[], TradeContext]

    # -- trading -----------------------------------------------------------------------------------------
    def buy(
        self,
        lots: float,
        *,
        sl: float | None = None,
        tp: float | None = None,
        sl_points: float | None = None,
        tp_points: float | None = None,
        magic: int | None = None,
        comment: str = "",
        symbol: str | None = None,
    ) -> int | None:
        """Market buy at the ask. Stops by price or by points from the fill; returns a ticket or None.
        ``symbol``: one of the EA's declared ``symbols`` (default: the main chart's)."""
        return self._order(+1, lots, sl, tp, sl_points, tp_points, magic, comment, symbol)

    def sell(
        self,
        lots: float,
        *,
        sl: float | None = None,
        tp: float | None = None,
        sl_points: float | None = None,
        tp_points: float | None = None,
        magic: int | None = None,
        comment: str = "",
        symbol: str | None = None,
    ) -> int | None:
        """Market sell at the bid; see ``buy``."""
        return self._order(-1, lots, sl, tp, sl_points, tp_points, magic, comment, symbol)

    def close(
        self,
        ticket: int | None = None,
        *,
        magic: int | None = None,
        lots: float | None = None,
        reason: str = "signal",
        symbol: str | None = None,
    ) -> int:
        """Close one position by ticket, or all (of one magic number, of one ``symbol``); ``lots`` closes
        part of one position. ``reason`` is the trade's exit reason in the report (e.g. "time" for a
        holding-time exit). Returns how many positions were closed (or reduced)."""
        if lots is not None and ticket is None:
            raise EAError("close(lots=...) closes part of one position: give its ticket")
        if ticket is None and magic is None and lots is None and symbol is None and type(reason) is str:
            ctx = self._ctx  # close all: nothing to convert
            return (self._require_ctx() if ctx is None else ctx).close(None, None, None, reason)
        return self._require_ctx().close(
            _ticket(ticket, "ticket", optional=True),
            None if magic is None else _ticket(magic, "magic"),
            None if lots is None else _number(lots, "lots"),
            str(reason),
            **_symbol(symbol),
        )

    def close_by(self, ticket: int, opposite: int) -> bool:
        """Close a position by an opposite one (hedging accounts): one spread is saved."""
        return self._require_ctx().close_by(_ticket(ticket, "ticket"), _ticket(opposite, "opposite"))

    def modify(self, ticket: int, *, sl: float | None = None, tp: float | None = None) -> bool:
        """New SL/TP of an open position: None keeps a level, 0 removes it (MQL5's PositionModify)."""
        return self._require_ctx().modify(_ticket(ticket, "ticket"), _stop(sl, "sl"), _stop(tp, "tp"))

    def buy_limit(self, lots: float, price: float, **kw: Any) -> int | None:
        """Buy when the ask falls to ``price`` (below the ask). Keywords: sl, tp, expiration, magic, comment.

        ``expiration``: None (good till cancelled), "today" (until the server day ends) or a time.
        Returns the order's ticket (also the ticket of the position it opens), or None when refused.
        """
        return self._pending("buy_limit", lots, price, None, **kw)

    def sell_limit(self, lots: float, price: float, **kw: Any) -> int | None:
        """Sell when the bid rises to ``price`` (above the bid); see ``buy_limit``."""
        return self._pending("sell_limit", lots, price, None, **kw)

    def buy_stop(self, lots: float, price: float, **kw: Any) -> int | None:
        """Buy when the ask rises to ``price`` (above the ask); see ``buy_limit``."""
        return self._pending("buy_stop", lots, price, None, **kw)

    def sell_stop(self, lots: float, price: float, **kw: Any) -> int | None:
        """Sell when the bid falls to ``price`` (below the bid); see ``buy_limit``."""
        return self._pending("sell_stop", lots, price, None, **kw)

    def buy_stop_limit(self, lots: float, price: float, stoplimit: float, **kw: Any) -> int | None:
        """When the ask rises to ``price``, place a buy limit at ``stoplimit`` (below ``price``)."""
        return self._pending("buy_stop_limit", lots, price, stoplimit, **kw)

    def sell_stop_limit(self, lots: float, price: float, stoplimit: float, **kw: Any) -> int | None:
        """When the bid falls to ``price``, place a sell limit at ``stoplimit`` (above ``price``)."""
        return self._pending("sell_stop_limit", lots, price, stoplimit, **kw)

    def orders(self, symbol: str | None = None) -> list[Order]:
        """The working pending orders (of one ``symbol``; default: all)."""
        return self._require_ctx().orders(**_symbol(symbol))

    def cancel(self, ticket: int) -> bool:
        """Delete a pending order."""
        return self._require_ctx().cancel(_ticket(ticket, "ticket"))

    def modify_order(
        self,
        ticket: int,
        *,
        price: float | None = None,
        stoplimit: float | None = None,
        sl: float | None = None,
        tp: float | None = None,
        expiration: Any = "keep",
    ) -> bool:
        """Change a pending order: None keeps a value, sl/tp 0 removes a stop, expiration "keep" keeps it."""
        return self._require_ctx().modify_order(
            _ticket(ticket, "ticket"),
            None if price is None else _number(price, "price"),
            None if stoplimit is None else _number(stoplimit, "stoplimit"),
            _stop(sl, "sl"),
            _stop(tp, "tp"),
            expiration if isinstance(expiration, str) and expiration == "keep" else _expiration(expiration),
        )

    @property
    def last_retcode(self) -> int:
        """MetaTrader's retcode of the last request (10009 done, 10008 placed, 10016 invalid stops, ...)."""
        return self._require_ctx().last_retcode

    def positions(self, symbol: str | None = None) -> list[Position]:
        """The open positions (of one ``symbol``; default: all)."""
        return self._require_ctx().positions(**_symbol(symbol))

    @property
    def position(self) -> float:
        """Net open volume in lots of the main chart's symbol: positive long, negative short, 0 flat."""
        return self._require_ctx().net_lots(**_symbol(self._main_symbol()))

    def position_of(self, symbol: str) -> float:
        """Net open volume in lots of ``symbol``."""
        return self._require_ctx().net_lots(**_symbol(symbol))

    def bid_of(self, symbol: str) -> float:
        """``symbol``'s bid now (the open of the bar now forming)."""
        return self._require_ctx().price(-1, **_symbol(symbol))

    def ask_of(self, symbol: str) -> float:
        """``symbol``'s ask now."""
        return self._require_ctx().price(+1, **_symbol(symbol))

    def _main_symbol(self) -> str | None:
        """The main chart's symbol where the EA trades several (None: the run's one symbol)."""
        declared = getattr(self, "symbols", ())
        return declared[0] if len(declared) > 1 else None

    @property
    def account(self) -> Account:
        return self._require_ctx().account()

    @property
    def bid(self) -> float:
        """The current bar's opening bid (known at decision time in "open prices only")."""
        return self._require_ctx().price(-1)

    @property
    def ask(self) -> float:
        return self._require_ctx().price(+1)

    @property
    def time_current(self) -> pd.Timestamp:
        """The server's time now (MQL5's TimeCurrent): the decision's moment, the bar's opening time with
        open prices, its first minute or tick with 1 minute OHLC and ticks; in ``on_tick``, the tick's."""
        return self._require_ctx().time_now()

    @property
    def point(self) -> float:
        return self._require_ctx().point

    def _order(self, side, lots, sl, tp, sl_points, tp_points, magic, comment, symbol=None) -> int | None:
        ctx = self._ctx
        if ctx is None:
            ctx = self._require_ctx()
        if sl is None and tp is None and sl_points is None and tp_points is None and symbol is None:
            # no stops, the main chart: the common order, with only its volume and magic to convert
            lots = lots if type(lots) is float else _number(lots, "lots")
            magic = self.magic if magic is None else _ticket(magic, "magic")
            return ctx.order(side, lots, None, None, magic, comment if type(comment) is str else str(comment))
        if (sl is not None and sl_points is not None) or (tp is not None and tp_points is not None):
            raise EAError("give a stop as a price or in points, not both")
        lots, sl, tp = _number(lots, "lots"), _stop(sl, "sl"), _stop(tp, "tp")
        for name, points in (("sl_points", sl_points), ("tp_points", tp_points)):
            if points is not None and not (_number(points, name) >= 0 and np.isfinite(points)):
                raise EAError(f"{name} must be a finite distance >= 0 in points (0 = none), got {points!r}")
        if sl_points or tp_points:
            price = ctx.price(side, **_symbol(symbol))
            point = ctx.point if symbol is None else ctx.point_of(symbol)
            if sl_points:
                sl = price - side * sl_points * point
            if tp_points:
                tp = price + side * tp_points * point
        return ctx.order(side, lots, sl, tp, self._magic(magic), str(comment), **_symbol(symbol))

    def _pending(
        self,
        kind,
        lots,
        price,
        stoplimit,
        *,
        sl=None,
        tp=None,
        expiration=None,
        magic=None,
        comment="",
        symbol=None,
    ):
        return self._require_ctx().pending(
            kind,
            _number(lots, "lots"),
            _number(price, "price"),
            None if stoplimit is None else _number(stoplimit, "stoplimit"),
            _stop(sl, "sl"),
            _stop(tp, "tp"),
            _expiration(expiration),
            self._magic(magic),
            str(comment),
            **_symbol(symbol),
        )

    def _magic(self, magic: Any) -> int:
        return self.magic if magic is None else _ticket(magic, "magic")


def net_volume(positions: Iterable[Any]) -> float:
    """Net open volume in lots of ``positions`` (records with ``side`` and ``lots``): positive long, negative
    short, 0 flat. Summed in the positions' order, so every context that answers ``net_lots`` gives the
    same float as the sum over its ``positions()`` (MQL5's ``PositionGetDouble(POSITION_VOLUME)`` signed
    by ``POSITION_TYPE``, added up over a hedging account's positions of the symbol)."""
    return sum(p.side * p.lots for p in positions)


def _symbol(symbol: Any) -> dict:
    """The ``symbol=`` keyword of a request, only where one is named (a one-symbol context takes none)."""
    if symbol is None:
        return {}
    if not isinstance(symbol, str) or not symbol:
        raise EAError(f"symbol must be a symbol's name like 'EURUSD', got {symbol!r}")
    return {"symbol": symbol}


def _number(value: Any, name: str) -> float:
    """A real number as float (NaN and infinities pass: the broker refuses them with a retcode). An
    integer too large for a float (10**400) is an infinity of its sign, refused the same way."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise EAError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _stop(value: Any, name: str) -> float | None:
    return None if value is None else _number(value, name)


def _ticket(value: Any, name: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise EAError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _expiration(value: Any) -> str | pd.Timestamp | None:
    """None/"gtc" (good till cancelled), "today", or anything ``pandas.Timestamp`` reads as a time."""
    if value is None or (isinstance(value, str) and value.lower() in ("gtc", "today")):
        return None if value is None or value.lower() == "gtc" else "today"
    ts = read_timestamp(value)
    if ts is None:
        raise EAError(f"expiration must be None, 'gtc', 'today' or a time, got {value!r}")
    return ts
