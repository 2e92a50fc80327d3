"""Order handling of the simulated terminal: market deals on a hedging account, filled at once.

What it does, like a real hedging account: ``TRADE_ACTION_DEAL`` buys at the ask and sells at the bid of
the current tick (``symbol_info_tick``); without ``position`` a deal opens a new position, with
``position`` it closes (all or part of) that one; each fill adds a deal to the history. Requests are
checked the way users meet rejections: unknown symbol, volume outside min/max or off the step (10014), a
filling mode the symbol does not allow (10030), a closing deal in the position's own direction or for
more than its volume (10013). Pending orders and SL/TP triggering are not simulated (10013).
"""

from __future__ import annotations

import itertools
import math

from MetaTrader5 import market
from MetaTrader5.constants import (
    DEAL_ENTRY_IN,
    DEAL_ENTRY_OUT,
    ORDER_FILLING_FOK,
    ORDER_FILLING_IOC,
    ORDER_TYPE_BUY,
    ORDER_TYPE_SELL,
    SYMBOL_FILLING_FOK,
    SYMBOL_FILLING_IOC,
    TRADE_ACTION_DEAL,
    TRADE_RETCODE_DONE,
    TRADE_RETCODE_INVALID,
    TRADE_RETCODE_INVALID_FILL,
    TRADE_RETCODE_INVALID_VOLUME,
)
from MetaTrader5.records import OrderSendResult, TradeDeal, TradePosition, TradeRequest

VOLUME_MIN, VOLUME_MAX, VOLUME_STEP = 0.01, 100.0, 0.01
FILLING_MODE = SYMBOL_FILLING_FOK | SYMBOL_FILLING_IOC
CONTRACT_SIZE = 100_000.0


class Book:
    """Open positions and the deal history of the simulated account."""

    def __init__(self) -> None:
        self.positions: dict[int, dict] = {}
        self.deals: list[TradeDeal] = []
        self.tickets = itertools.count(1_000_001)


def quote(symbol: str) -> tuple[int, float, float]:
    """``(broker time, bid, ask)`` of the current tick: the close of the forming H1 bar plus its spread."""
    spec = market.SYMBOLS[symbol]
    rates, _ = market.history(symbol, 16385)
    last = rates[-1]
    bid = float(last["close"])
    return market.now_broker(), bid, round(bid + int(last["spread"]) * 10.0**-spec.digits, spec.digits)


def profit(symbol: str, side: int, volume: float, price_open: float, price_now: float) -> float:
    """Profit in the account currency (USD): quote-currency profit, converted for yen-quoted pairs."""
    move = (price_now - price_open) if side == ORDER_TYPE_BUY else (price_open - price_now)
    in_quote = move * volume * CONTRACT_SIZE
    return round(in_quote / price_now if symbol.endswith("JPY") else in_quote, 2)


def _request(req: dict) -> TradeRequest:
    fields = {name: req.get(name, 0) for name in TradeRequest._fields}
    fields["symbol"], fields["comment"] = req.get("symbol", ""), req.get("comment", "")
    return TradeRequest(**fields)


def _result(retcode: int, req: dict, comment: str, *, deal=0, order=0, volume=0.0, price=0.0, bid=0.0,
            ask=0.0) -> OrderSendResult:
    return OrderSendResult(retcode, deal, order, volume, price, bid, ask, comment, 0, 0, _request(req))


def _volume_ok(volume: float) -> bool:
    steps = volume / VOLUME_STEP
    return VOLUME_MIN <= volume <= VOLUME_MAX and math.isclose(steps, round(steps), abs_tol=1e-6)


def send(book: Book, req: dict) -> OrderSendResult | None:
    """``order_send``: None for an unknown symbol (the terminal's answer), else a result with a retcode."""
    symbol = req.get("symbol")
    if symbol not in market.SYMBOLS:
        return None
    if req.get("action") != TRADE_ACTION_DEAL or req.get("type") not in (ORDER_TYPE_BUY, ORDER_TYPE_SELL):
        return _result(TRADE_RETCODE_INVALID, req, "Invalid request (only market deals are simulated)")
    volume = float(req.get("volume", 0.0))
    if not _volume_ok(volume):
        return _result(TRADE_RETCODE_INVALID_VOLUME, req, "Invalid volume")
    filling = req.get("type_filling", ORDER_FILLING_FOK)
    allowed = {ORDER_FILLING_FOK: SYMBOL_FILLING_FOK, ORDER_FILLING_IOC: SYMBOL_FILLING_IOC}
    if not FILLING_MODE & allowed.get(filling, 0):
        return _result(TRADE_RETCODE_INVALID_FILL, req, "Unsupported filling mode")
    now, bid, ask = quote(symbol)
    side = req["type"]
    price = ask if side == ORDER_TYPE_BUY else bid
    ticket = next(book.tickets)
    closing = int(req.get("position", 0) or 0)
    if closing:
        pos = book.positions.get(closing)
        if pos is None or pos["symbol"] != symbol or pos["type"] == side or volume > pos["volume"] + 1e-9:
            return _result(TRADE_RETCODE_INVALID, req, "Invalid request (position to close)")
        pnl = profit(symbol, pos["type"], volume, pos["price_open"], price)
        pos["volume"] = round(pos["volume"] - volume, 2)
        if pos["volume"] <= 0:
            del book.positions[closing]
        entry, position_id = DEAL_ENTRY_OUT, closing
    else:
        book.positions[ticket] = {
            "ticket": ticket, "time": now, "type": side, "magic": req.get("magic", 0), "volume": volume,
            "price_open": price, "sl": req.get("sl", 0.0), "tp": req.get("tp", 0.0), "symbol": symbol,
            "comment": req.get("comment", ""),
        }
        pnl, entry, position_id = 0.0, DEAL_ENTRY_IN, ticket
    magic, comment = req.get("magic", 0), req.get("comment", "")
    book.deals.append(TradeDeal(ticket, ticket, now, now * 1000, side, entry, magic, position_id, 3, volume,
                                price, 0.0, 0.0, pnl, 0.0, symbol, comment, ""))
    return _result(TRADE_RETCODE_DONE, req, "Request executed", deal=ticket, order=ticket, volume=volume,
                   price=price, bid=bid, ask=ask)


def positions(book: Book, symbol=None, group=None, ticket=None) -> tuple[TradePosition, ...]:
    out = []
    for pos in book.positions.values():
        if (symbol and pos["symbol"] != symbol) or (ticket and pos["ticket"] != ticket):
            continue
        _, bid, ask = quote(pos["symbol"])
        now_price = bid if pos["type"] == ORDER_TYPE_BUY else ask
        out.append(TradePosition(
            pos["ticket"], pos["time"], pos["time"] * 1000, pos["time"], pos["time"] * 1000, pos["type"],
            pos["magic"], pos["ticket"], 3, pos["volume"], pos["price_open"], pos["sl"], pos["tp"], now_price,
            0.0, profit(pos["symbol"], pos["type"], pos["volume"], pos["price_open"], now_price),
            pos["symbol"], pos["comment"], ""))
    return tuple(out)


def deals(book: Book, date_from=None, date_to=None, *, position=None, ticket=None) -> tuple[TradeDeal, ...]:
    out = book.deals
    if position is not None:
        out = [d for d in out if d.position_id == position]
    if ticket is not None:
        out = [d for d in out if d.ticket == ticket]
    if date_from is not None and date_to is not None:
        out = [d for d in out if date_from <= d.time <= date_to]
    return tuple(out)
