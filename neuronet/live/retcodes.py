"""MetaTrader's ``TRADE_RETCODE_*`` answers as one-line messages, for logs, journals and the EA.

The values the backtest broker also gives (``backtests.checks``) are imported from there, so a request
refused in a backtest and on a terminal carries the same number. The texts follow MQL5's "Trade Server
Return Codes" table. ``order_check`` answers 0 when a request would pass.
"""

from __future__ import annotations

from backtests.checks import (
    DONE,
    FROZEN,
    INVALID,
    INVALID_CLOSE_VOLUME,
    INVALID_EXPIRATION,
    INVALID_PRICE,
    INVALID_STOPS,
    INVALID_VOLUME,
    NO_CHANGES,
    NO_MONEY,
    PLACED,
    POSITION_CLOSED,
)

CHECK_OK = 0  # order_check: the request would pass
REQUOTE = 10004
REJECT = 10006
DONE_PARTIAL = 10010
ERROR = 10011
TIMEOUT = 10012
TRADE_DISABLED = 10017
MARKET_CLOSED = 10018
PRICE_CHANGED = 10020
PRICE_OFF = 10021
CLIENT_DISABLES_AT = 10027  # trading disabled on this side: what a neuronet limit or kill switch answers
CONNECTION = 10031
INVALID_FILL = 10030
LIMIT_VOLUME = 10034
LIMIT_POSITIONS = 10040

SUCCESS = frozenset({DONE, PLACED, DONE_PARTIAL})

MESSAGES: dict[int, str] = {
    CHECK_OK: "request checked: it would pass",
    REQUOTE: "requote: the price moved",
    REJECT: "request rejected",
    10007: "request canceled by the trader",
    PLACED: "order placed",
    DONE: "request completed",
    DONE_PARTIAL: "only part of the request was completed",
    ERROR: "request processing error",
    TIMEOUT: "request canceled by timeout",
    INVALID: "invalid request",
    INVALID_VOLUME: "invalid volume in the request",
    INVALID_PRICE: "invalid price in the request",
    INVALID_STOPS: "invalid stops in the request",
    TRADE_DISABLED: "trading is disabled",
    MARKET_CLOSED: "market is closed",
    NO_MONEY: "not enough money to complete the request",
    PRICE_CHANGED: "prices changed",
    PRICE_OFF: "no quotes to process the request",
    INVALID_EXPIRATION: "invalid order expiration date in the request",
    10023: "order state changed",
    10024: "too frequent requests",
    NO_CHANGES: "no changes in the request",
    10026: "autotrading disabled by the server",
    CLIENT_DISABLES_AT: "trading disabled on the client side (a neuronet limit, or AutoTrading off)",
    10028: "request locked for processing",
    FROZEN: "order or position frozen (within the freeze level)",
    INVALID_FILL: "unsupported filling mode",
    CONNECTION: "no connection with the trade server",
    10032: "operation allowed only for live accounts",
    10033: "the number of pending orders has reached the limit",
    LIMIT_VOLUME: "the volume of orders and positions for the symbol has reached the limit",
    10035: "incorrect or prohibited order type",
    POSITION_CLOSED: "the position has already been closed",
    INVALID_CLOSE_VOLUME: "the close volume exceeds the position's volume",
    10039: "a close order already exists for the position",
    LIMIT_POSITIONS: "the number of open positions has reached the limit",
    10041: "pending order activation rejected, the order is canceled",
    10042: "only long positions are allowed for the symbol",
    10043: "only short positions are allowed for the symbol",
    10044: "only closing positions is allowed for the symbol",
    10045: "positions must be closed by the FIFO rule",
    10046: "opposite positions on one symbol are not allowed (hedging prohibited)",
}


def message(retcode: int) -> str:
    """``"10016 invalid stops in the request"``; an unknown code still reads as one line."""
    return f"{retcode} {MESSAGES.get(int(retcode), 'unknown trade server return code')}"
