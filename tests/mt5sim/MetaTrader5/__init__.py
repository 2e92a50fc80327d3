"""A simulated MetaTrader 5 terminal, importable as ``MetaTrader5``.

It has the official package's function names, constants, result records and numpy dtypes, answers
``None`` (or ``False``) plus ``last_error()`` on failure, caps bars per call at the terminal's
``maxbars`` (``terminal_info().maxbars``), and serves known, deterministic history in broker time
(New York + 7 h; see ``market``). Failures — a broken IPC link, a missing login, an unknown symbol, a
stalled answer, the nth call failing — are switched on through ``SIM`` (see ``state``).

Put this directory on ``sys.path`` to use it in-process (the Windows code path), or start
``tests/mt5sim/serve.py`` to serve it over a real RPyC classic server (the Linux bridge).
"""

from __future__ import annotations

import calendar
import fnmatch
import functools
import time
from datetime import datetime

import numpy as np

from MetaTrader5 import market, trading
from MetaTrader5.constants import *  # noqa: F403 - the official package exposes them at top level
from MetaTrader5.constants import (
    ACCOUNT_TRADE_MODE_DEMO,
    RES_E_AUTH_FAILED,
    RES_E_FAIL,
    RES_E_INTERNAL_FAIL_CONNECT,
    RES_E_INVALID_PARAMS,
    RES_E_NOT_FOUND,
    SYMBOL_TRADE_MODE_FULL,
    TIMEFRAME_H1,
)
from MetaTrader5.records import AccountInfo, SymbolInfo, TerminalInfo, Tick
from MetaTrader5.state import SIM

__version__ = "5.0.4150"
__author__ = "simulator"

_NO_SESSION = ("initialize", "shutdown", "version")


def _api(failure=None):
    """Wrap an API function: stall, planned failure, 'no IPC connection' before initialize()."""

    def decorate(fn):
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            SIM.begun[name] += 1
            seconds = SIM.delays.get(name)
            if seconds:
                time.sleep(seconds)
            code = SIM.planned_failure(name)
            if code == 0:
                raise ConnectionResetError(f"{name}: connection reset by peer (simulated)")
            if code is not None:
                SIM.set_error(code)
                return failure
            if name not in _NO_SESSION and not SIM.initialized:
                SIM.set_error(RES_E_INTERNAL_FAIL_CONNECT)
                return failure
            SIM.set_error(1)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def _seconds(value) -> int:
    """Request times as the official package takes them: seconds since 1970 or a datetime (UTC-labelled)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return calendar.timegm(value.timetuple())
        return int(value.timestamp())
    return int(value)


def _spec(symbol):
    spec = market.SYMBOLS.get(symbol)
    if spec is None:
        SIM.set_error(RES_E_INVALID_PARAMS)
    return spec


def _valid_timeframe(timeframe) -> bool:
    valid = int(timeframe) in {v for k, v in globals().items() if k.startswith("TIMEFRAME_")}
    if not valid:
        SIM.set_error(RES_E_INVALID_PARAMS)
    return valid


def _served(symbol, timeframe) -> bool:
    """False (and "call failed") for a (symbol, timeframe) the terminal is switched to hold no bars of
    (``SIM.configure(no_history=...)``: a broker's symbol without that history)."""
    if (str(symbol), int(timeframe)) in SIM.no_history:
        SIM.set_error(RES_E_FAIL)
        return False
    return True


def last_error():
    return SIM.error


@_api()
def version():
    return (500, 4150, "15 Dec 2023")


@_api(failure=False)
def initialize(path=None, *, login=None, password=None, server=None, timeout=60000, portable=False):
    if SIM.init_error is not None:
        SIM.set_error(SIM.init_error)
        return False
    if login is not None and not password:
        SIM.set_error(RES_E_AUTH_FAILED)
        return False
    SIM.initialized = True
    return True


@_api(failure=False)
def login(login, password=None, server=None, timeout=60000):
    if not password:
        SIM.set_error(RES_E_AUTH_FAILED)
        return False
    SIM.logged_in = True
    return True


@_api(failure=False)
def shutdown():
    SIM.initialized = False
    return True


@_api()
def terminal_info():
    return TerminalInfo(
        community_account=False,
        community_connection=False,
        connected=SIM.logged_in,
        dlls_allowed=False,
        trade_allowed=True,
        tradeapi_disabled=False,
        email_enabled=False,
        ftp_enabled=False,
        notifications_enabled=False,
        mqid=False,
        build=4150,
        maxbars=SIM.maxbars,
        codepage=0,
        ping_last=25000,
        community_balance=0.0,
        retransmission=0.0,
        company="Simulated Markets Ltd.",
        name="MetaTrader 5 (simulated)",
        language="English",
        path="C:\\Program Files\\MetaTrader 5",
        data_path="C:\\Users\\trader\\AppData\\Roaming\\MetaQuotes\\Terminal\\SIM",
        commondata_path="C:\\Users\\trader\\AppData\\Roaming\\MetaQuotes\\Terminal\\Common",
    )


@_api()
def account_info():
    if not SIM.logged_in:
        SIM.set_error(RES_E_FAIL)
        return None
    return AccountInfo(
        login=SIM.account_login,
        trade_mode=ACCOUNT_TRADE_MODE_DEMO,
        leverage=100,
        limit_orders=200,
        margin_so_mode=0,
        trade_allowed=True,
        trade_expert=True,
        margin_mode=SIM.book.margin_mode,
        currency_digits=2,
        fifo_close=False,
        credit=0.0,
        **SIM.book.account(),
        margin_so_call=50.0,
        margin_so_so=30.0,
        name="Sim Trader",
        server=SIM.account_server,
        currency="USD",
        company="Simulated Markets Ltd.",
    )


def _symbol_record(spec: market.SymbolSpec) -> SymbolInfo:
    rates, _ = market.history(spec.name, TIMEFRAME_H1)
    last = rates[-1]
    point = 10.0**-spec.digits
    bid = float(last["close"])
    ask = round(bid + int(last["spread"]) * point, spec.digits)
    # Value of one point for one lot in the account currency (USD): 1 for XXXUSD, 1000/price for USDJPY.
    tick_value = 1000.0 / bid if spec.name.endswith("JPY") else 1.0
    return SymbolInfo(
        custom=False,
        chart_mode=0,
        select=True,
        visible=True,
        session_deals=0,
        time=int(last["time"]),
        digits=spec.digits,
        spread=int(last["spread"]),
        spread_float=True,
        trade_calc_mode=0,
        trade_mode=SYMBOL_TRADE_MODE_FULL,
        trade_stops_level=SIM.book.stops_level,
        trade_freeze_level=0,
        trade_exemode=2,
        swap_mode=1,
        swap_rollover3days=3,
        expiration_mode=15,
        filling_mode=SIM.book.filling_mode,
        order_mode=127,
        bid=bid,
        ask=ask,
        last=0.0,
        point=point,
        trade_tick_value=tick_value,
        trade_tick_size=point,
        trade_contract_size=trading.CONTRACT_SIZE,
        volume_min=trading.VOLUME_MIN,
        volume_max=trading.VOLUME_MAX,
        volume_step=trading.VOLUME_STEP,
        swap_long=-6.5,
        swap_short=1.2,
        margin_initial=0.0,
        currency_base=spec.name[:3],
        currency_profit=spec.name[3:],
        currency_margin=spec.name[:3],
        description=spec.description,
        path=f"Forex\\{spec.name}",
        name=spec.name,
    )


@_api()
def symbols_total():
    return len(market.SYMBOLS)


@_api()
def symbols_get(group=None):
    names = list(market.SYMBOLS)
    if group:
        keep = set()
        for pattern in group.split(","):
            if pattern.startswith("!"):
                keep -= set(fnmatch.filter(names, pattern[1:]))
            else:
                keep |= set(fnmatch.filter(names, pattern))
        names = [n for n in names if n in keep]
    return tuple(_symbol_record(market.SYMBOLS[n]) for n in names)


@_api()
def symbol_info(symbol):
    spec = market.SYMBOLS.get(symbol)
    if spec is None:
        SIM.set_error(RES_E_NOT_FOUND)
        return None
    return _symbol_record(spec)


@_api(failure=False)
def symbol_select(symbol, enable=True):
    if symbol not in market.SYMBOLS:
        SIM.set_error(RES_E_NOT_FOUND)
        return False
    return True


@_api()
def symbol_info_tick(symbol):
    spec = _spec(symbol)
    if spec is None:
        return None
    seconds, bid, ask = SIM.book.quote(symbol)
    return Tick(
        time=seconds, bid=bid, ask=ask, last=0.0, volume=0, time_msc=seconds * 1000, flags=6, volume_real=0.0
    )


def _capped(rates: np.ndarray, count: int) -> np.ndarray:
    return np.array(rates[: min(int(count), SIM.maxbars)], dtype=market.RATES_DTYPE)


@_api()
def copy_rates_from(symbol, timeframe, date_from, count):
    """The ``count`` bars up to and including ``date_from`` (capped at maxbars), oldest first."""
    if _spec(symbol) is None or not _valid_timeframe(timeframe) or not _served(symbol, timeframe):
        return None
    rates = SIM.book.shifted(symbol, int(timeframe), market.history(symbol, int(timeframe))[0])
    end = np.searchsorted(rates["time"], _seconds(date_from), side="right")
    count = min(int(count), SIM.maxbars)
    return np.array(rates[max(0, end - count) : end], dtype=market.RATES_DTYPE)


@_api()
def copy_rates_from_pos(symbol, timeframe, start_pos, count):
    """Bars counted back from the forming bar (position 0), oldest first; None past the history."""
    if _spec(symbol) is None or not _valid_timeframe(timeframe) or not _served(symbol, timeframe):
        return None
    rates = SIM.book.shifted(symbol, int(timeframe), market.history(symbol, int(timeframe))[0])
    end = len(rates) - int(start_pos)
    if int(start_pos) < 0 or end <= 0:
        SIM.set_error(RES_E_FAIL)
        return None
    count = min(int(count), SIM.maxbars)
    return np.array(rates[max(0, end - count) : end], dtype=market.RATES_DTYPE)


@_api()
def copy_rates_range(symbol, timeframe, date_from, date_to):
    """Bars opening in ``[date_from, date_to]``; past maxbars the answer stops at the cap (oldest first)."""
    if _spec(symbol) is None or not _valid_timeframe(timeframe) or not _served(symbol, timeframe):
        return None
    rates = SIM.book.shifted(symbol, int(timeframe), market.history(symbol, int(timeframe))[0])
    lo = np.searchsorted(rates["time"], _seconds(date_from), side="left")
    hi = np.searchsorted(rates["time"], _seconds(date_to), side="right")
    return _capped(rates[lo:hi], SIM.maxbars)


@_api()
def copy_ticks_range(symbol, date_from, date_to, flags):
    if _spec(symbol) is None:
        return None
    ticks = market.ticks_between(symbol, _seconds(date_from), _seconds(date_to))
    return np.array(ticks[: SIM.maxbars], dtype=market.TICKS_DTYPE)


@_api()
def copy_ticks_from(symbol, date_from, count, flags):
    if _spec(symbol) is None:
        return None
    start = _seconds(date_from)
    ticks = market.ticks_between(symbol, start, start + 7 * 86400)
    return np.array(ticks[: min(int(count), SIM.maxbars)], dtype=market.TICKS_DTYPE)


@_api()
def order_send(request):
    """Execute a request; a planned lost reply (``Book.lost_replies``) executes it and then drops the link
    (code 0) or answers None with that ``last_error()`` code."""
    if type(request) is not dict:  # the C package takes a real dict only (not an RPyC proxy of one)
        SIM.set_error(RES_E_INVALID_PARAMS)
        return None
    answer = trading.send(SIM.book, request)
    if answer is None:
        SIM.set_error(RES_E_INVALID_PARAMS)
        return None
    lost = SIM.book.lose_reply()
    if lost == 1:  # RES_S_OK: this one's reply arrives (a plan (1, -10005) loses only the second's)
        return answer
    if lost == 0:
        raise ConnectionResetError("order_send: the link dropped before the reply (simulated)")
    if lost is not None:
        SIM.set_error(lost)
        return None
    return answer


@_api()
def positions_get(symbol=None, group=None, ticket=None):
    return trading.positions(SIM.book, symbol=symbol, group=group, ticket=ticket)


@_api()
def positions_total():
    return len(SIM.book.positions)


@_api()
def orders_get(symbol=None, group=None, ticket=None):
    return trading.orders(SIM.book, symbol=symbol, group=group, ticket=ticket)


@_api()
def orders_total():
    return len(SIM.book.orders)


@_api()
def history_deals_get(date_from=None, date_to=None, group=None, ticket=None, position=None):
    lo = None if date_from is None else _seconds(date_from)
    hi = None if date_to is None else _seconds(date_to)
    return trading.deals(SIM.book, lo, hi, position=position, ticket=ticket)


@_api()
def history_deals_total(date_from, date_to):
    return len(trading.deals(SIM.book, _seconds(date_from), _seconds(date_to)))


@_api()
def order_check(request):
    if type(request) is not dict:
        SIM.set_error(RES_E_INVALID_PARAMS)
        return None
    answer = trading.check(SIM.book, request)
    if answer is None:
        SIM.set_error(RES_E_INVALID_PARAMS)
    return answer


def _history_orders(book) -> list:
    """The orders history of the book: a filled market (or pending) order behind each deal's order ticket;
    the simulator keeps no record of pending orders deleted or expired."""
    from MetaTrader5.constants import ORDER_FILLING_FOK, ORDER_STATE_FILLED, ORDER_TIME_GTC
    from MetaTrader5.records import TradeOrder

    out, seen = [], set()
    for d in book.deals:
        if d.order in seen:
            continue
        seen.add(d.order)
        out.append(
            TradeOrder(
                d.order,
                d.time,
                d.time_msc,
                d.time,
                d.time_msc,
                0,
                d.type,
                ORDER_TIME_GTC,
                ORDER_FILLING_FOK,
                ORDER_STATE_FILLED,
                d.magic,
                d.position_id,
                0,
                d.reason,
                d.volume,
                0.0,
                d.price,
                0.0,
                0.0,
                d.price,
                0.0,
                d.symbol,
                d.comment,
                "",
            )
        )
    return out


@_api()
def history_orders_get(date_from=None, date_to=None, group=None, ticket=None, position=None):
    """Orders of the history (see ``_history_orders``): by time range, ``ticket`` or ``position``."""
    out = _history_orders(SIM.book)
    if ticket is not None:
        out = [o for o in out if o.ticket == ticket]
    if position is not None:
        out = [o for o in out if o.position_id == position]
    if date_from is not None and date_to is not None:
        lo, hi = _seconds(date_from), _seconds(date_to)
        out = [o for o in out if lo <= o.time_setup <= hi]
    return tuple(out)


@_api()
def history_orders_total(date_from, date_to):
    lo, hi = _seconds(date_from), _seconds(date_to)
    return sum(lo <= o.time_setup <= hi for o in _history_orders(SIM.book))


# Quotes answered instead of the market's, first in first out (tests of a terminal that answers garbage):
# each None, or a dict of Tick fields (missing ones from the market's quote; "time" may be any object).
BAD_QUOTES: list = []
_market_tick = symbol_info_tick


def symbol_info_tick(symbol):  # the market's quote, or the next planned bad one
    if not BAD_QUOTES:
        return _market_tick(symbol)
    bad = BAD_QUOTES.pop(0)
    if bad is None:
        return None
    real = _market_tick(symbol)
    return real._replace(**bad) if real is not None else None
