"""Order handling of the simulated terminal: a hedging account (or a netting one) as a trade server runs it.

What it does, like a real hedging account: ``TRADE_ACTION_DEAL`` buys at the ask and sells at the bid of the
current quote; without ``position`` a deal opens a new position, with ``position`` it closes (all or part
of) that one; each fill adds a deal to the history. On a netting account (``hedging=False``) a deal adds to,
reduces, closes or reverses the symbol's one position, which keeps its ticket. ``TRADE_ACTION_PENDING``
places limit, stop and stop-limit orders (``PLACED``), which ``Book.move`` fills when the price reaches them
(a stop-limit turns into a limit order first), as it closes positions whose SL or TP the price reaches.
``SLTP`` changes a position's stops, ``MODIFY`` and ``REMOVE`` change and delete pending orders,
``CLOSE_BY`` closes two opposite positions against each other at the second one's opening price.
A ``move`` of the quote is kept with its time, and the bars the terminal serves carry it from then on
(``Book.shifted``), as a real terminal's history records what its quotes did.

Requests are checked the way users meet rejections, in the order a server checks them: unknown symbol
(``None``), a request dictionary that is not a real ``dict`` (``None``: the C package's answer to an RPyC
proxy), market closed (10018), volume outside min/max or off the step (10014), a filling mode the symbol
does not allow (10030), a pending price on the wrong side of the market (10015), stops on the wrong side or
nearer than the stops level (10016), a bad expiration (10022), not enough free margin (10019), an unknown
position (10036) or order (10013), a close in the position's own direction (10013) or for more than its
volume (10038), a change that changes nothing (10025). ``order_check`` makes the same checks without
executing (retcode 0, "Done", when the request would pass).

Switches (``Book.configure``; a new book, as ``SIM.reset()`` makes, has none): ``market_closed``,
``filling_mode`` (the symbol's mask), ``stops_level`` (points), ``balance``, ``hedging``, ``keep_comments``
(False: a server that drops request comments from positions and deals);
``requotes``/``price_changes``: the next n deals answer 10004/10020 after the price moved by
``requote_points`` (signed points); ``lost_replies``: error codes for the next deals that execute and then
lose their reply (0: the link drops, ``ConnectionResetError``; 1: this deal's reply arrives, so that a plan
can lose a later deal's only; else ``None`` with that ``last_error()`` code, such as an IPC timeout)."""

from __future__ import annotations

import itertools

import numpy as np

from MetaTrader5 import market
from MetaTrader5.constants import (
    DEAL_ENTRY_IN,
    DEAL_ENTRY_INOUT,
    DEAL_ENTRY_OUT,
    DEAL_ENTRY_OUT_BY,
    ORDER_FILLING_RETURN,
    ORDER_STATE_PLACED,
    ORDER_TYPE_BUY,
    ORDER_TYPE_SELL,
    SYMBOL_FILLING_FOK,
    SYMBOL_FILLING_IOC,
    TRADE_ACTION_CLOSE_BY,
    TRADE_ACTION_DEAL,
    TRADE_ACTION_MODIFY,
    TRADE_ACTION_PENDING,
    TRADE_ACTION_REMOVE,
    TRADE_ACTION_SLTP,
    TRADE_RETCODE_DONE,
    TRADE_RETCODE_PLACED,
    TRADE_RETCODE_PRICE_CHANGED,
    TRADE_RETCODE_REQUOTE,
)
from MetaTrader5.records import (
    OrderCheckResult,
    OrderSendResult,
    TradeDeal,
    TradeOrder,
    TradePosition,
    TradeRequest,
)
from MetaTrader5.server_checks import (
    CONTRACT_SIZE,
    DEPOSIT,
    PENDING,
    Rejected,
    margin_of,
    validate,
)
from MetaTrader5.server_checks import VOLUME_MAX as VOLUME_MAX  # the symbol's limits, read as trading.*
from MetaTrader5.server_checks import VOLUME_MIN as VOLUME_MIN
from MetaTrader5.server_checks import VOLUME_STEP as VOLUME_STEP

FILLING_MODE = SYMBOL_FILLING_FOK | SYMBOL_FILLING_IOC
REASON_EXPERT, REASON_SL, REASON_TP = 3, 4, 5


class Book:
    """Open positions, pending orders, the deal history and the balance of the simulated account, and the
    switches that make its trade server misbehave (see the module docstring)."""

    def __init__(self) -> None:
        self.positions: dict[int, dict] = {}
        self.orders: dict[int, dict] = {}
        self.deals: list[TradeDeal] = []
        self.tickets = itertools.count(1_000_001)
        self.balance = DEPOSIT
        self.shift: dict[str, float] = {}  # symbol -> points the quote moved away from the history's close
        self.moves: list[tuple[int, str, float]] = []  # (broker time, symbol, points) of each ``move``
        self.executed = 0  # requests that changed the book (a duplicate shows up here)
        self.filling_mode = FILLING_MODE
        self.stops_level = 0
        self.market_closed = False
        self.requotes = self.price_changes = 0
        self.requote_points = 5.0
        self.lost_replies: list[int] = []
        self.hedging = True
        self.keep_comments = True
        self.history_from = 0  # broker seconds: older deals are not served (the History tab's range)

    @property
    def margin_mode(self) -> int:
        """``account_info().margin_mode``: 2 hedging, 0 netting (one position per symbol)."""
        return 2 if self.hedging else 0

    def configure(
        self,
        *,
        filling_mode=None,
        stops_level=None,
        market_closed=None,
        balance=None,
        requotes=None,
        price_changes=None,
        requote_points=None,
        lost_replies=(),
        hedging=None,
        keep_comments=None,
        history_from=None,
    ) -> None:
        for name, value in (
            ("filling_mode", filling_mode),
            ("stops_level", stops_level),
            ("market_closed", market_closed),
            ("balance", balance),
            ("requotes", requotes),
            ("price_changes", price_changes),
            ("requote_points", requote_points),
            ("hedging", hedging),
            ("keep_comments", keep_comments),
            ("history_from", history_from),
        ):
            if value is not None:
                setattr(self, name, type(getattr(self, name))(value))
        self.lost_replies.extend(int(code) for code in lost_replies)

    def lose_reply(self) -> int | None:
        """The code of a reply to lose now (see ``configure``), or None."""
        return self.lost_replies.pop(0) if self.lost_replies else None

    # -- prices -------------------------------------------------------------------------------------------
    def quote(self, symbol: str) -> tuple[int, float, float]:
        """``(broker time, bid, ask)``: the close of the forming H1 bar + spread, moved by ``shift``."""
        spec = market.SYMBOLS[symbol]
        rates, _ = market.history(symbol, 16385)
        last = rates[-1]
        point = 10.0**-spec.digits
        bid = round(float(last["close"]) + self.shift.get(symbol, 0.0) * point, spec.digits)
        return market.now_broker(), bid, round(bid + int(last["spread"]) * point, spec.digits)

    def move(self, symbol: str, points: float) -> None:
        """Move the quote by ``points``; fill the pending orders and close the positions it reaches."""
        self.shift[symbol] = self.shift.get(symbol, 0.0) + float(points)
        self.moves.append((market.now_broker(), symbol, float(points)))
        _, bid, ask = self.quote(symbol)
        for order in [o for o in self.orders.values() if o["symbol"] == symbol]:
            side, above = PENDING[order["type"]]
            market_price = ask if side > 0 else bid
            if not (market_price >= order["price"] if above else market_price <= order["price"]):
                continue
            if order["type"] in (6, 7):  # a stop-limit reached: a limit order at its stop-limit price
                order["type"], order["price"], order["stoplimit"] = order["type"] - 4, order["stoplimit"], 0.0
                continue
            del self.orders[order["ticket"]]
            held = [p for p in self.positions.values() if p["symbol"] == symbol]
            if held and not self.hedging:
                self._net(held[0], order, order["type"] % 2, order["price"])
            else:
                self._open(order, order["type"] % 2, order["price"], ticket=order["ticket"])
        for pos in [p for p in self.positions.values() if p["symbol"] == symbol]:
            close_at = bid if pos["type"] == ORDER_TYPE_BUY else ask
            sign = 1 if pos["type"] == ORDER_TYPE_BUY else -1
            if pos["sl"] and sign * (close_at - pos["sl"]) <= 0:
                self._close(pos, pos["volume"], pos["sl"], {"comment": "[sl]"}, REASON_SL)
            elif pos["tp"] and sign * (close_at - pos["tp"]) >= 0:
                self._close(pos, pos["volume"], pos["tp"], {"comment": "[tp]"}, REASON_TP)

    def shifted(self, symbol: str, timeframe: int, rates: np.ndarray) -> np.ndarray:
        """The symbol's full history ``rates`` on ``timeframe`` with the moves made so far, as the
        terminal's bars record what its quotes did: a bar's open carries the moves made before it opened,
        its close those made before it ended (the forming bar's: every move; a move over a weekend, when
        no bar forms, is the next bar's), its high and low both."""
        moves = [(t, p) for t, s, p in self.moves if s == symbol]
        if not moves or not len(rates):
            return rates
        point = 10.0 ** -market.SYMBOLS[symbol].digits
        at = np.array([t for t, _ in moves], dtype=np.int64)
        total = np.concatenate([[0.0], np.cumsum([p for _, p in moves])]) * point
        opened = total[np.searchsorted(at, rates["time"], side="left")]
        ends = np.append(rates["time"][1:], np.iinfo(np.int64).max)
        length = market.bar_seconds(timeframe)
        if length:
            ends = np.minimum(ends, rates["time"] + length)
        closed = total[np.searchsorted(at, ends, side="left")]
        digits = market.SYMBOLS[symbol].digits
        out = np.array(rates, dtype=market.RATES_DTYPE)
        out["open"] = np.round(rates["open"] + opened, digits)
        out["close"] = np.round(rates["close"] + closed, digits)
        out["high"] = np.round(rates["high"] + np.maximum(opened, closed), digits)
        out["low"] = np.round(rates["low"] + np.minimum(opened, closed), digits)
        return out

    # -- the account ----------------------------------------------------------------------------------------
    def account(self) -> dict:
        floating = sum(p.profit for p in positions(self))
        margin = round(
            sum(margin_of(p["symbol"], p["volume"], p["price_open"]) for p in self.positions.values()), 2
        )
        equity = round(self.balance + floating, 2)
        level = round(equity / margin * 100, 2) if margin else 0.0
        return {
            "balance": round(self.balance, 2),
            "equity": equity,
            "profit": round(floating, 2),
            "margin": margin,
            "margin_free": round(equity - margin, 2),
            "margin_level": level,
        }

    # -- fills ---------------------------------------------------------------------------------------------
    def _open(self, req: dict, side: int, price: float, ticket: int | None = None) -> tuple[int, int]:
        now = market.now_broker()
        ticket = next(self.tickets) if ticket is None else ticket
        self.positions[ticket] = {
            "ticket": ticket,
            "time": now,
            "type": side,
            "magic": int(req.get("magic", 0)),
            "volume": float(req["volume"]),
            "price_open": price,
            "sl": float(req.get("sl", 0.0) or 0.0),
            "tp": float(req.get("tp", 0.0) or 0.0),
            "symbol": req["symbol"],
            "comment": req.get("comment", "") if self.keep_comments else "",
        }
        deal = self._deal(ticket, side, DEAL_ENTRY_IN, req, ticket, float(req["volume"]), price, 0.0)
        return deal, ticket

    def _close(
        self,
        pos: dict,
        volume: float,
        price: float,
        req: dict,
        reason: int = REASON_EXPERT,
        entry: int = DEAL_ENTRY_OUT,
    ) -> tuple[int, int]:
        pnl = profit(pos["symbol"], pos["type"], volume, pos["price_open"], price)
        self.balance += pnl
        pos["volume"] = round(pos["volume"] - volume, 2)
        if pos["volume"] <= 0:
            del self.positions[pos["ticket"]]
        order = next(self.tickets)
        side = ORDER_TYPE_SELL if pos["type"] == ORDER_TYPE_BUY else ORDER_TYPE_BUY
        deal = self._deal(
            order,
            side,
            entry,
            {**pos, **req, "magic": req.get("magic", pos["magic"])},
            pos["ticket"],
            volume,
            price,
            pnl,
            reason,
        )
        return deal, order

    def _net(self, pos: dict, req: dict, side: int, price: float) -> tuple[int, int]:
        """A deal on a netting account that holds ``pos``: adds to it, reduces or closes it, or reverses it
        (the position keeps its ticket, as MetaTrader's netting positions keep their identifier)."""
        volume, order = float(req["volume"]), next(self.tickets)
        pnl = 0.0
        if pos["type"] == side:
            total = round(pos["volume"] + volume, 2)
            pos["price_open"] = round((pos["price_open"] * pos["volume"] + price * volume) / total, 8)
            pos["volume"], entry = total, DEAL_ENTRY_IN
        else:
            pnl = profit(pos["symbol"], pos["type"], min(volume, pos["volume"]), pos["price_open"], price)
            self.balance += pnl
            left = round(volume - pos["volume"], 2)
            entry = DEAL_ENTRY_INOUT if left > 0 else DEAL_ENTRY_OUT
            if left > 0:
                pos.update(type=side, volume=left, price_open=price, time=market.now_broker())
            elif left == 0:
                del self.positions[pos["ticket"]]
            else:
                pos["volume"] = -left
        return self._deal(order, side, entry, req, pos["ticket"], volume, price, pnl), order

    def _deal(self, order, side, entry, req, position_id, volume, price, pnl, reason=REASON_EXPERT) -> int:
        now = market.now_broker()
        ticket = next(self.tickets)
        self.deals.append(
            TradeDeal(
                ticket,
                order,
                now,
                now * 1000,
                side,
                entry,
                int(req.get("magic", 0)),
                position_id,
                reason,
                volume,
                price,
                0.0,
                0.0,
                pnl,
                0.0,
                req["symbol"],
                req.get("comment", "") if self.keep_comments else "",
                "",
            )
        )
        return ticket


def profit(symbol: str, side: int, volume: float, price_open: float, price_now: float) -> float:
    """Profit in the account currency (USD): quote-currency profit, converted for yen-quoted pairs."""
    move = (price_now - price_open) if side == ORDER_TYPE_BUY else (price_open - price_now)
    in_quote = move * volume * CONTRACT_SIZE
    return round(in_quote / price_now if symbol.endswith("JPY") else in_quote, 2)


def _request(req: dict) -> TradeRequest:
    fields = {name: req.get(name, 0) for name in TradeRequest._fields}
    fields["symbol"], fields["comment"] = req.get("symbol", ""), req.get("comment", "")
    return TradeRequest(**fields)


def _result(
    retcode: int, req: dict, comment: str, bid: float, ask: float, *, deal=0, order=0, volume=0.0, price=0.0
) -> OrderSendResult:
    return OrderSendResult(retcode, deal, order, volume, price, bid, ask, comment, 0, 0, _request(req))


def check(book: Book, req: dict) -> OrderCheckResult | None:
    """``order_check``: retcode 0 ("Done") when ``order_send`` would accept the request, else its retcode."""
    if req.get("symbol") not in market.SYMBOLS:
        return None
    acc = book.account()
    try:
        validate(book, req)
        code, comment = 0, "Done"
    except Rejected as exc:
        code, comment = exc.retcode, exc.comment
    return OrderCheckResult(
        code,
        acc["balance"],
        acc["equity"],
        acc["profit"],
        acc["margin"],
        acc["margin_free"],
        acc["margin_level"],
        comment,
        _request(req),
    )


def send(book: Book, req: dict) -> OrderSendResult | None:
    """``order_send``: None for an unknown symbol (the terminal's answer), else a result with a retcode."""
    symbol = req.get("symbol")
    if symbol not in market.SYMBOLS:
        return None
    try:
        validate(book, req)
    except Rejected as exc:
        _, bid, ask = book.quote(symbol)
        return _result(exc.retcode, req, exc.comment, bid, ask)
    action = req["action"]
    if action == TRADE_ACTION_DEAL and (book.requotes or book.price_changes):
        code = TRADE_RETCODE_REQUOTE if book.requotes else TRADE_RETCODE_PRICE_CHANGED
        if book.requotes:
            book.requotes -= 1
        else:
            book.price_changes -= 1
        book.move(symbol, book.requote_points)
        _, bid, ask = book.quote(symbol)
        return _result(code, req, "Requote" if code == TRADE_RETCODE_REQUOTE else "Prices changed", bid, ask)
    book.executed += 1
    _, bid, ask = book.quote(symbol)
    if action == TRADE_ACTION_DEAL:
        price = ask if req["type"] == ORDER_TYPE_BUY else bid
        volume = float(req["volume"])
        closing = int(req.get("position", 0) or 0)
        held = [p for p in book.positions.values() if p["symbol"] == symbol]
        if closing:
            deal, order = book._close(book.positions[closing], volume, price, req)
        elif held and not book.hedging:
            deal, order = book._net(held[0], req, req["type"], price)
        else:
            deal, order = book._open(req, req["type"], price)
        return _result(
            TRADE_RETCODE_DONE,
            req,
            "Request executed",
            bid,
            ask,
            deal=deal,
            order=order,
            volume=volume,
            price=price,
        )
    if action == TRADE_ACTION_PENDING:
        ticket = next(book.tickets)
        book.orders[ticket] = {
            "ticket": ticket,
            "time": market.now_broker(),
            "type": req["type"],
            "volume": float(req["volume"]),
            "price": float(req["price"]),
            "stoplimit": float(req.get("stoplimit", 0.0) or 0.0),
            "sl": float(req.get("sl", 0.0) or 0.0),
            "tp": float(req.get("tp", 0.0) or 0.0),
            "type_time": int(req.get("type_time", 0)),
            "expiration": int(req.get("expiration", 0) or 0),
            "type_filling": int(req.get("type_filling", ORDER_FILLING_RETURN)),
            "magic": int(req.get("magic", 0)),
            "symbol": symbol,
            "comment": req.get("comment", ""),
        }
        return _result(
            TRADE_RETCODE_PLACED,
            req,
            "Request executed",
            bid,
            ask,
            order=ticket,
            volume=float(req["volume"]),
            price=float(req["price"]),
        )
    if action == TRADE_ACTION_SLTP:
        pos = book.positions[int(req["position"])]
        pos["sl"], pos["tp"] = float(req.get("sl", 0.0) or 0.0), float(req.get("tp", 0.0) or 0.0)
    elif action == TRADE_ACTION_MODIFY:
        order = book.orders[int(req["order"])]
        for key in ("price", "stoplimit", "sl", "tp", "expiration", "type_time"):
            if key in req:
                order[key] = type(order[key])(req[key] or 0)
    elif action == TRADE_ACTION_REMOVE:
        del book.orders[int(req["order"])]
    elif action == TRADE_ACTION_CLOSE_BY:
        a, b = book.positions[int(req["position"])], book.positions[int(req["position_by"])]
        volume, price = min(a["volume"], b["volume"]), b["price_open"]
        book._close(a, volume, price, req, entry=DEAL_ENTRY_OUT_BY)
        book._close(b, volume, price, req, entry=DEAL_ENTRY_OUT_BY)
    return _result(TRADE_RETCODE_DONE, req, "Request executed", bid, ask, order=int(req.get("order", 0) or 0))


def positions(book: Book, symbol=None, group=None, ticket=None) -> tuple[TradePosition, ...]:
    out = []
    for pos in book.positions.values():
        if (symbol and pos["symbol"] != symbol) or (ticket and pos["ticket"] != ticket):
            continue
        _, bid, ask = book.quote(pos["symbol"])
        now_price = bid if pos["type"] == ORDER_TYPE_BUY else ask
        out.append(
            TradePosition(
                pos["ticket"],
                pos["time"],
                pos["time"] * 1000,
                pos["time"],
                pos["time"] * 1000,
                pos["type"],
                pos["magic"],
                pos["ticket"],
                REASON_EXPERT,
                pos["volume"],
                pos["price_open"],
                pos["sl"],
                pos["tp"],
                now_price,
                0.0,
                profit(pos["symbol"], pos["type"], pos["volume"], pos["price_open"], now_price),
                pos["symbol"],
                pos["comment"],
                "",
            )
        )
    return tuple(out)


def orders(book: Book, symbol=None, group=None, ticket=None) -> tuple[TradeOrder, ...]:
    out = []
    for o in book.orders.values():
        if (symbol and o["symbol"] != symbol) or (ticket and o["ticket"] != ticket):
            continue
        _, bid, ask = book.quote(o["symbol"])
        out.append(
            TradeOrder(
                o["ticket"],
                o["time"],
                o["time"] * 1000,
                0,
                0,
                o["expiration"],
                o["type"],
                o["type_time"],
                o["type_filling"],
                ORDER_STATE_PLACED,
                o["magic"],
                0,
                0,
                REASON_EXPERT,
                o["volume"],
                o["volume"],
                o["price"],
                o["sl"],
                o["tp"],
                ask if PENDING[o["type"]][0] > 0 else bid,
                o["stoplimit"],
                o["symbol"],
                o["comment"],
                "",
            )
        )
    return tuple(out)


def deals(book: Book, date_from=None, date_to=None, *, position=None, ticket=None) -> tuple[TradeDeal, ...]:
    out = [d for d in book.deals if d.time >= book.history_from]  # a terminal holding a shorter history
    if position is not None:
        out = [d for d in out if d.position_id == position]
    if ticket is not None:
        out = [d for d in out if d.ticket == ticket]
    if date_from is not None and date_to is not None:
        out = [d for d in out if date_from <= d.time <= date_to]
    return tuple(out)
