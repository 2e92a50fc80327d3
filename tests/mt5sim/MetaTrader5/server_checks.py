"""The simulated trade server's checks of a request (``validate``), in the order a server makes them; the
module docstring of ``trading`` lists what each refusal answers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from MetaTrader5 import market
from MetaTrader5.constants import (
    ORDER_FILLING_FOK,
    ORDER_FILLING_IOC,
    ORDER_FILLING_RETURN,
    ORDER_TIME_SPECIFIED,
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
    TRADE_RETCODE_INVALID,
    TRADE_RETCODE_INVALID_CLOSE_VOLUME,
    TRADE_RETCODE_INVALID_EXPIRATION,
    TRADE_RETCODE_INVALID_FILL,
    TRADE_RETCODE_INVALID_ORDER,
    TRADE_RETCODE_INVALID_PRICE,
    TRADE_RETCODE_INVALID_STOPS,
    TRADE_RETCODE_INVALID_VOLUME,
    TRADE_RETCODE_MARKET_CLOSED,
    TRADE_RETCODE_NO_CHANGES,
    TRADE_RETCODE_NO_MONEY,
    TRADE_RETCODE_POSITION_CLOSED,
)

if TYPE_CHECKING:
    from MetaTrader5.trading import Book

DEPOSIT, LEVERAGE = 10_000.0, 100
CONTRACT_SIZE = 100_000.0
VOLUME_MIN, VOLUME_MAX, VOLUME_STEP = 0.01, 100.0, 0.01

# Pending order types: +1 buy / -1 sell, and whether the order price lies above the market.
PENDING = {2: (+1, False), 3: (-1, True), 4: (+1, True), 5: (-1, False), 6: (+1, True), 7: (-1, False)}
ALLOWED_FILLING = {ORDER_FILLING_FOK: SYMBOL_FILLING_FOK, ORDER_FILLING_IOC: SYMBOL_FILLING_IOC}


class Rejected(Exception):
    """A request the server refuses: ``retcode`` and the result's comment."""

    def __init__(self, retcode: int, comment: str) -> None:
        super().__init__(comment)
        self.retcode, self.comment = retcode, comment


def margin_of(symbol: str, volume: float, price: float) -> float:
    """Margin in USD at 1:LEVERAGE: the base currency's value (USD itself for USDJPY)."""
    base_usd = 1.0 if symbol.startswith("USD") else price
    return volume * CONTRACT_SIZE * base_usd / LEVERAGE


def _volume(req: dict) -> float:
    volume = req.get("volume", 0.0)
    if isinstance(volume, bool) or not isinstance(volume, (int, float)) or not math.isfinite(volume):
        raise Rejected(TRADE_RETCODE_INVALID_VOLUME, "Invalid volume")
    steps = volume / VOLUME_STEP
    if not (VOLUME_MIN <= volume <= VOLUME_MAX and math.isclose(steps, round(steps), abs_tol=1e-6)):
        raise Rejected(TRADE_RETCODE_INVALID_VOLUME, "Invalid volume")
    return float(volume)


def _stops(book: Book, side: int, ref: float, req: dict, point: float) -> None:
    """SL below / TP above ``ref`` for a buy (mirrored for a sell), at least the stops level away."""
    level = book.stops_level * point
    for name, below in (("sl", side > 0), ("tp", side < 0)):
        value = float(req.get(name, 0.0) or 0.0)
        if value and (value <= 0 or (ref - value if below else value - ref) < max(level, point / 2)):
            raise Rejected(TRADE_RETCODE_INVALID_STOPS, "Invalid stops")


def validate(book: Book, req: dict) -> None:
    """Raise ``Rejected`` for a request the server would refuse (everything but requotes and execution)."""
    symbol = req["symbol"]
    _, bid, ask = book.quote(symbol)
    point = 10.0 ** -market.SYMBOLS[symbol].digits
    if book.market_closed:
        raise Rejected(TRADE_RETCODE_MARKET_CLOSED, "Market closed")
    action = req.get("action")
    if action == TRADE_ACTION_DEAL:
        side = {ORDER_TYPE_BUY: +1, ORDER_TYPE_SELL: -1}.get(req.get("type"))
        if side is None:
            raise Rejected(TRADE_RETCODE_INVALID_ORDER, "Invalid order type")
        volume = _volume(req)
        if not book.filling_mode & ALLOWED_FILLING.get(req.get("type_filling", ORDER_FILLING_FOK), 0):
            raise Rejected(TRADE_RETCODE_INVALID_FILL, "Unsupported filling mode")
        closing = int(req.get("position", 0) or 0)
        if closing:
            pos = book.positions.get(closing)
            if pos is None:
                raise Rejected(TRADE_RETCODE_POSITION_CLOSED, "Position doesn't exist")
            if pos["symbol"] != symbol or pos["type"] == req["type"]:
                raise Rejected(TRADE_RETCODE_INVALID, "Invalid request (position to close)")
            if volume > pos["volume"] + 1e-9:
                raise Rejected(TRADE_RETCODE_INVALID_CLOSE_VOLUME, "Invalid close volume")
            return
        _stops(book, side, bid if side > 0 else ask, req, point)
        need = margin_of(symbol, volume, ask if side > 0 else bid)
        if need > book.account()["margin_free"]:
            raise Rejected(TRADE_RETCODE_NO_MONEY, "No money")
    elif action == TRADE_ACTION_PENDING:
        if req.get("type") not in PENDING:
            raise Rejected(TRADE_RETCODE_INVALID_ORDER, "Invalid order type")
        _volume(req)
        if req.get("type_filling", ORDER_FILLING_RETURN) not in (*ALLOWED_FILLING, ORDER_FILLING_RETURN):
            raise Rejected(TRADE_RETCODE_INVALID_FILL, "Unsupported filling mode")
        _pending_prices(book, req, bid, ask, point)
        if (
            req.get("type_time") == ORDER_TIME_SPECIFIED
            and int(req.get("expiration", 0)) <= market.now_broker()
        ):
            raise Rejected(TRADE_RETCODE_INVALID_EXPIRATION, "Invalid expiration")
    elif action == TRADE_ACTION_SLTP:
        pos = book.positions.get(int(req.get("position", 0) or 0))
        if pos is None:
            raise Rejected(TRADE_RETCODE_POSITION_CLOSED, "Position doesn't exist")
        side = 1 if pos["type"] == ORDER_TYPE_BUY else -1
        _stops(book, side, bid if side > 0 else ask, req, point)
        if (float(req.get("sl", 0.0)), float(req.get("tp", 0.0))) == (pos["sl"], pos["tp"]):
            raise Rejected(TRADE_RETCODE_NO_CHANGES, "No changes")
    elif action in (TRADE_ACTION_MODIFY, TRADE_ACTION_REMOVE):
        order = book.orders.get(int(req.get("order", 0) or 0))
        if order is None:
            raise Rejected(TRADE_RETCODE_INVALID, "Invalid request (order not found)")
        if action == TRADE_ACTION_MODIFY:
            new = {**order, **{k: req[k] for k in ("price", "stoplimit", "sl", "tp") if k in req}}
            _pending_prices(book, new, bid, ask, point)
            if all(
                float(new[k] or 0.0) == float(order[k] or 0.0) for k in ("price", "stoplimit", "sl", "tp")
            ):
                raise Rejected(TRADE_RETCODE_NO_CHANGES, "No changes")
    elif action == TRADE_ACTION_CLOSE_BY:
        a = book.positions.get(int(req.get("position", 0) or 0))
        b = book.positions.get(int(req.get("position_by", 0) or 0))
        if a is None or b is None:
            raise Rejected(TRADE_RETCODE_POSITION_CLOSED, "Position doesn't exist")
        if not book.hedging or a["type"] == b["type"] or a["symbol"] != b["symbol"]:
            raise Rejected(TRADE_RETCODE_INVALID, "Invalid request (close by)")
    else:
        raise Rejected(TRADE_RETCODE_INVALID, "Invalid request")


def _pending_prices(book: Book, req: dict, bid: float, ask: float, point: float) -> None:
    side, above = PENDING[req["type"]]
    price = float(req.get("price", 0.0) or 0.0)
    ref = ask if side > 0 else bid
    level = max(book.stops_level * point, point / 2)
    if price <= 0 or (price - ref if above else ref - price) < level:
        raise Rejected(TRADE_RETCODE_INVALID_PRICE, "Invalid price")
    entry = price
    if req["type"] in (6, 7):
        entry = float(req.get("stoplimit", 0.0) or 0.0)
        if entry <= 0 or side * (price - entry) < level:
            raise Rejected(TRADE_RETCODE_INVALID_PRICE, "Invalid price")
    _stops(book, side, entry, req, point)
