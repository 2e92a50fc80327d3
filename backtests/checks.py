"""The request checks a MetaTrader trade server makes, as pure functions returning a retcode and a reason.

Each check returns ``None`` when the request passes, else ``(retcode, reason)`` with MetaTrader's
``TRADE_RETCODE_*`` value, so a rejected request reads the same here as in the terminal's journal.

Stop rules (MQL5 "Requirements and Limitations in Making Trades"): a long position closes at the bid, so
its SL must lie below the bid and its TP above it, each at least ``stops_level`` points away; a short
closes at the ask, mirrored. A stop of 0 (or None) means "no stop". A level exactly at the reference price
is refused even when ``stops_level`` is 0: it would fill at once, which no server accepts as a stop.
Pending orders are checked against the market the same way, and their SL/TP against the order's price.

Distances are counted in whole points of the symbol when ``point`` is given (the trade server keeps prices
as integers of points): ``1.11851 + 10 points`` is then exactly 10 points from 1.11851, where as floats it
is 1.1186099999..., and a price exactly at the market is refused every time, not only where float noise
happens to fall on the refusing side.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import pandas as pd

from datafeeds.clock import UTC, BrokerClock
from strategies.trade import PENDING_TYPES

DONE = 10009
PLACED = 10008
INVALID = 10013  # invalid request (unknown order, wrong account type for the action)
INVALID_VOLUME = 10014
INVALID_PRICE = 10015
INVALID_STOPS = 10016
TRADE_DISABLED = 10017  # trading is disabled for the symbol
MARKET_CLOSED = 10018  # the symbol has no price now (no bar at this time)
NO_MONEY = 10019
PRICE_OFF = 10021  # no quotes to process the request (the symbol, or a pair converting it, has no price yet)
INVALID_EXPIRATION = 10022
NO_CHANGES = 10025
FROZEN = 10029  # the order or position is within the freeze level of the market
POSITION_CLOSED = 10036  # no open position with that ticket
INVALID_CLOSE_VOLUME = 10038  # closing more than the position holds
LONG_ONLY = 10042  # the symbol allows long positions only
SHORT_ONLY = 10043  # the symbol allows short positions only
CLOSE_ONLY = 10044  # the symbol allows closing positions only

Check = tuple[int, str] | None


def is_number(value: object) -> bool:
    """A real number (NaN and infinities included: they are refused by the checks with a reason)."""
    return isinstance(value, Real) and not isinstance(value, bool)


def real(value: float) -> float:
    """A number as a float; an integer too large for one (10**400) as an infinity of its sign, which the
    checks refuse as they refuse any infinite value (never an OverflowError from deep inside a check)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def stop_value(value: float | None) -> float | None:
    """MQL5's convention: 0 (or None) is "no stop"; anything else is kept as given for ``check_stops``."""
    if value is None:
        return None
    return None if value == 0 else real(value)


def check_volume(lots: float, lot_min: float, lot_max: float, lot_step: float) -> Check:
    """Volume within min/max and a whole number of steps (the terminal does not round for you)."""
    if not math.isfinite(lots) or lots <= 0:
        problem = "must be a positive finite number of lots"
    elif abs(round(lots / lot_step) * lot_step - lots) > 1e-6 * lot_step:  # a float32 0.1 is 0.1 lots
        problem = "not a multiple of the lot step"
    elif not lot_min - 1e-9 <= lots <= lot_max + 1e-9:
        problem = "outside"
    else:
        return None
    return INVALID_VOLUME, f"invalid volume {lots}: {problem} (min {lot_min}, max {lot_max}, step {lot_step})"


def check_close_by(sides: dict[int, int], ticket: int, opposite: int, hedging: bool) -> Check:
    """Closing ``ticket`` by ``opposite``: both open (``sides``: ticket -> +1/-1), opposite directions,
    on a hedging account (a netting account never holds two positions of a symbol)."""
    if not hedging:
        return INVALID, "close by needs a hedging account"
    if ticket not in sides or opposite not in sides:
        return POSITION_CLOSED, f"no open position #{ticket if ticket not in sides else opposite}"
    if ticket == opposite or sides[ticket] == sides[opposite]:
        return INVALID, f"close by needs two opposite positions, got #{ticket} and #{opposite}"
    return None


def check_price(price: float, what: str = "price") -> Check:
    if not math.isfinite(price) or price <= 0:
        return INVALID_PRICE, f"invalid {what} {price}: must be a positive finite price"
    return None


def _short(dist: float, min_dist: float, point: float | None) -> bool:
    """Whether a distance (price units) is not beyond the market by at least ``min_dist``: in whole points
    when ``point`` is given, else as floats with a tolerance for their noise."""
    if point:
        dist_pts = round(dist / point)
        return dist_pts <= 0 or dist_pts < round(min_dist / point)
    return dist <= 0 or dist < min_dist - 1e-12


def check_stops(
    side: int,
    ref: float,
    sl: float | None,
    tp: float | None,
    min_dist: float,
    what: str,
    point: float | None = None,
) -> Check:
    """SL/TP of a position of direction ``side`` closing at ``ref`` (bid for longs, ask for shorts).

    ``min_dist`` is the stops level in price units; ``what`` names the reference in the reason; ``point``
    counts the distances in whole points.
    """
    for name, level, below in (("sl", sl, side > 0), ("tp", tp, side < 0)):
        if level is None:
            continue
        if not math.isfinite(level) or level < 0:
            return INVALID_STOPS, f"invalid stops: {name}={level} is not a price (0 = none)"
        dist = ref - level if below else level - ref
        if _short(dist, min_dist, point):
            where = "below" if below else "above"
            need = f" by at least {min_dist:.10g}" if min_dist > 0 else ""
            return (
                INVALID_STOPS,
                f"invalid stops: {name}={level:.10g} must lie {where} the {what} {ref:.10g}{need}",
            )
    return None


def check_pending(
    kind: str,
    price: float,
    stoplimit: float | None,
    bid: float,
    ask: float,
    min_dist: float,
    point: float | None = None,
) -> Check:
    """The order price on the right side of the market: limits below (buy) / above (sell), stops beyond
    (``point``: distances in whole points)."""
    bad = check_price(price)
    if bad:
        return bad
    order = PENDING_TYPES[kind]
    side = order.side
    ref, name = (ask, "ask") if side > 0 else (bid, "bid")
    above = order.above  # buy stop / sell limit lie above the market
    dist = price - ref if above else ref - price
    if _short(dist, min_dist, point):
        where = "above" if above else "below"
        return INVALID_PRICE, f"invalid price: {kind} at {price:.10g} must lie {where} the {name} {ref:.10g}"
    if order.trigger == "stop_limit":
        if stoplimit is None:
            return INVALID_PRICE, f"invalid price: {kind} needs a stop-limit price"
        bad = check_price(stoplimit, "stop-limit price")
        if bad:
            return bad
        # The limit order placed at the trigger must itself be a valid limit: below (buy) / above (sell) it.
        gap = price - stoplimit if side > 0 else stoplimit - price
        if _short(gap, min_dist, point):
            return (
                INVALID_PRICE,
                f"invalid price: {kind} limit {stoplimit:.10g} must lie beyond its trigger {price:.10g}",
            )
    return None


def expiration_time(expiration: object, now: pd.Timestamp, clock: BrokerClock = UTC) -> pd.Timestamp | None:
    """None/"gtc" = good till cancelled; "today" = the end of the current server day (MetaTrader's
    ``ORDER_TIME_DAY``: the next midnight of the broker's ``clock``, 22:00 UTC on a UTC+2 server); else a
    time.

    Raises ValueError with a readable reason for anything else (the EA layer turns it into an EAError).
    """
    if expiration is None or (isinstance(expiration, str) and expiration.lower() == "gtc"):
        return None
    if isinstance(expiration, str) and expiration.lower() == "today":
        return server_day_end(now, clock)
    try:
        ts = pd.Timestamp(expiration)
    except (TypeError, ValueError):
        raise ValueError(f"expiration {expiration!r} is not None, 'gtc', 'today' or a time") from None
    if ts is pd.NaT:
        raise ValueError(f"expiration {expiration!r} is not a time")
    if ts.tzinfo is None and now.tzinfo is not None:
        ts = ts.tz_localize(now.tzinfo)
    elif ts.tzinfo is not None and now.tzinfo is None:
        ts = ts.tz_convert(None)  # a zone-aware time against naive bars (taken as UTC)
    return ts


def server_day_end(now: pd.Timestamp, clock: BrokerClock) -> pd.Timestamp:
    """The end of the broker's server day that ``now`` falls in, as a time in ``now``'s zone (naive = UTC)."""
    utc = now.tz_localize("UTC") if now.tzinfo is None else now.tz_convert("UTC")
    server = int(clock.to_broker_seconds(np.array([utc.value // 1_000_000_000], dtype=np.int64))[0])
    midnight = (server // 86_400 + 1) * 86_400
    end = pd.Timestamp(int(clock.to_utc_seconds(np.array([midnight], dtype=np.int64))[0]), unit="s", tz="UTC")
    return end.tz_localize(None) if now.tzinfo is None else end.tz_convert(now.tzinfo)


def check_trade_mode(mode: str, side: int, reduces: bool) -> Check:
    """A deal of direction ``side`` (or a pending order of it) under the symbol's trade mode
    (``SYMBOL_TRADE_MODE``); ``reduces``: it only reduces a position, which every mode but "disabled"
    allows."""
    if mode == "full" or (reduces and mode != "disabled"):
        return None
    if mode == "disabled":
        return TRADE_DISABLED, "trading is disabled for the symbol (trade mode: disabled)"
    if mode == "close_only":
        return CLOSE_ONLY, "the symbol allows closing positions only (trade mode: close only)"
    if mode == "long_only" and side < 0:
        return LONG_ONLY, "the symbol allows long positions only (trade mode: long only)"
    if mode == "short_only" and side > 0:
        return SHORT_ONLY, "the symbol allows short positions only (trade mode: short only)"
    return None
