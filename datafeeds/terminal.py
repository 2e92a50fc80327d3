"""Candles from a running MetaTrader 5 terminal: the official package on Windows, an RPyC bridge on Linux.

    src = TerminalSource()                                   # Windows, or a bridge on 127.0.0.1:18812
    src = TerminalSource("127.0.0.1", 18812, clock=BrokerClock(2, "us"))
    df = src.load("EURUSD", "H1", start="2023-01-01", end="2023-12-31")

Which link: with ``host=None`` the ``MetaTrader5`` package is used in-process when it can be imported
(Windows); otherwise, or when a host is given, the source connects to an RPyC classic server that runs in
the terminal's Python (on Linux, under Wine). See ``datafeeds.terminal_link`` for how answers cross the
bridge and why every call is bounded. Classic RPyC executes arbitrary code: keep the server on 127.0.0.1
and reach it from elsewhere only through an SSH tunnel.

Time: the terminal stamps bars in broker server time. Requests are sent in broker seconds and bars are
converted to UTC with the declared ``clock`` (default UTC+2 with US daylight saving, the common "New York
close" server clock) through ``from_rates``, which records the clock so ``to_rates`` gives the terminal's
seconds back.

Paging: the terminal answers at most ``maxbars`` bars per call (Tools > Options > Charts > Max bars in
chart). Ranges are requested in windows that hold at most one page each; without ``start`` the history is
walked back by position. Pages are stitched in time order and bars seen twice at page boundaries are kept
once. The bar still forming (position 0) is left out, so every bar returned is final.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
import operator
import time
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from datafeeds.candles import RATES_DTYPE, CandleMeta, from_rates
from datafeeds.clock import BrokerClock, utc_seconds
from datafeeds.errors import DataError
from datafeeds.symbols import SpecError, SymbolSpec, spec_from_symbol_info
from datafeeds.terminal_errors import (
    IPC_INIT_FAILED,
    IPC_NO_CONNECTION,
    NoBarsError,
    NotLoggedInError,
    TerminalError,
    UnknownSymbolError,
    error_from_last_error,
)
from datafeeds.terminal_link import BridgeLink, NativeLink
from datafeeds.ticks import TickMeta, make_ticks
from datafeeds.timeframes import Timeframe

log = logging.getLogger(__name__)

DEFAULT_PORT = 18812
COPY_TICKS_ALL = -1  # MetaTrader5.COPY_TICKS_ALL: every tick, quotes and trades
TICKS_DTYPE = np.dtype(
    [("time_msc", "<i8"), ("bid", "<f8"), ("ask", "<f8"), ("last", "<f8"), ("volume_real", "<f8")]
)
MAX_PAGE = 100_000  # bars per call even when the terminal's maxbars allows more (bounded answer size)


class Fetched(NamedTuple):
    """What ``TerminalSource.fetch`` gives: the bars, the UTC time before which every bar is final, and the
    UTC time up to which the answer is known complete (at most the former)."""

    frame: pd.DataFrame
    final_until: pd.Timestamp
    complete_until: pd.Timestamp


def _utc_stamp(seconds: int) -> pd.Timestamp:
    return pd.Timestamp(int(seconds), unit="s", tz="UTC")


def _min_bar_seconds(tf: Timeframe) -> int:
    """Shortest possible bar of ``tf``: a window of ``page`` of these never holds more than ``page`` bars."""
    return 28 * 86400 if tf is Timeframe.MN1 else tf.seconds


def _as_records(answer: Any, dtype: np.dtype, call: str) -> np.ndarray:
    """The terminal's structured array in exactly ``dtype`` (so pages concatenate); None gives none."""
    if answer is None:
        return np.empty(0, dtype=dtype)
    names = getattr(getattr(answer, "dtype", None), "names", None) or ()
    missing = [n for n in dtype.names if n not in names]
    if missing:
        raise TerminalError(f"MetaTrader 5 {call} answered without fields {missing}")
    out = np.empty(len(answer), dtype=dtype)
    for n in dtype.names:
        out[n] = answer[n]
    return out


class TerminalSource:
    """Load candles from a MetaTrader 5 terminal (``load(symbol, timeframe, start=None, end=None)``).

    Parameters (keyword-only after ``port``):
    - ``host``/``port``: the RPyC classic bridge; ``host=None`` uses the local package when importable,
      otherwise 127.0.0.1.
    - ``timeout``: seconds any single terminal call may take before ``TerminalTimeoutError``.
    - ``connect_timeout``: seconds to wait for the bridge's TCP connection.
    - ``clock``: the broker's server clock (``BrokerClock`` or text such as ``"UTC+2/us"``); bars come
      back in UTC.
    - ``login``/``password``/``server``/``path``/``portable``: passed to ``initialize()`` when given.
    - ``retries``/``backoff``: transient failures (IPC timeout, dropped bridge connection) are retried
      ``retries`` times, waiting ``backoff`` seconds, then twice that, and so on. An unknown symbol, a
      missing login or an initialize failure are never retried.
    - ``page_size``: bars per call; default the terminal's ``maxbars``, at most 100,000.
    """

    name = "mt5"

    def __init__(
        self,
        host: str | None = None,
        port: int = DEFAULT_PORT,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        clock: BrokerClock | str = BrokerClock(2.0, "us"),  # noqa: B008 - frozen dataclass, safe as a default
        login: int | None = None,
        password: str | None = None,
        server: str | None = None,
        path: str | None = None,
        portable: bool = False,
        retries: int = 3,
        backoff: float = 0.5,
        page_size: int | None = None,
    ) -> None:
        if _whole(port) is None or not 0 < _whole(port) < 65536:
            raise DataError(f"port must be a whole number 1..65535, not {port!r}")
        if host is not None and (not isinstance(host, str) or not host.strip()):
            raise DataError(f"host must name the machine of the terminal bridge, not {host!r}")
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not (_finite(value) and value > 0):
                raise DataError(f"{name} must be a finite number of seconds > 0, not {value!r}")
        for name, value in (("retries", retries), ("backoff", backoff)):
            if not (_finite(value) and value >= 0):
                raise DataError(f"{name} must be a finite number >= 0, not {value!r}")
        if page_size is not None and (_whole(page_size) is None or _whole(page_size) < 1):
            raise DataError(f"page_size must be a whole number >= 1, not {page_size!r}")
        self.host, self.port = host, int(port)
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        self.init_kwargs = {
            k: v
            for k, v in (
                ("login", login),
                ("password", password),
                ("server", server),
                ("portable", portable or None),
            )
            if v is not None
        }
        self.path = path
        self.retries, self.backoff = int(retries), float(backoff)
        self.page_size = page_size
        self._link: NativeLink | BridgeLink | None = None
        self.trade_server: str | None = None  # the account's trade server, as the terminal reported it

    # -- session -----------------------------------------------------------------------------------
    def _connect(self) -> NativeLink | BridgeLink:
        if self._link is not None:
            return self._link
        if self.host is None and importlib.util.find_spec("MetaTrader5") is not None:
            link: NativeLink | BridgeLink = NativeLink(self.timeout)
        else:
            link = BridgeLink(self.host or "127.0.0.1", self.port, self.timeout, self.connect_timeout)
        args = (self.path,) if self.path else ()
        ok, error = link.call("initialize", *args, **self.init_kwargs)
        if not ok:
            link.close()
            code, message = error or (IPC_INIT_FAILED, "initialize() returned False")
            raise error_from_last_error("initialize()", code, message)
        self._link = link
        log.info("connected to MetaTrader 5 (%s)", link.where)
        return link

    @property
    def where(self) -> str:
        return self._link.where if self._link else (self.host or "local")

    def close(self) -> None:
        """Drop the link (the next ``load`` reconnects).

        The terminal's IPC session belongs to the process that runs the package, so it is shared: by every
        client of one bridge, and by every source in this process. Ending it from one of them would make the
        others' calls fail with -10004, so a bridge's session is never shut down from here, and the
        in-process one only when its last user closes (``NativeLink.close``).
        """
        self._drop()

    def __enter__(self) -> TerminalSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, name: str, *args, expect_none: bool = False) -> Any:
        """One API call with retries of transient failures.

        A ``None``/``False`` answer raises the error its ``last_error()`` stands for, except that with
        ``expect_none`` an answer of "not found"/"failed" (not an IPC or login failure) is returned as None.
        """
        for attempt in range(self.retries + 1):
            try:
                answer, error = self._connect().call(name, *args)
                if error is not None:
                    code, message = error
                    if not expect_none or code <= -10000 or code == -6:
                        raise error_from_last_error(f"{name}()", code, message)
                    log.debug("%s%r answered None: %s %s", name, args, code, message)
                    return None
                return answer
            except TerminalError as exc:
                if exc.code in (None, IPC_INIT_FAILED, IPC_NO_CONNECTION):
                    self._drop()  # the link or the session failed: the next call reconnects, initialize()s
                if not exc.transient or attempt == self.retries:
                    raise
                wait = self.backoff * 2**attempt
                log.warning("%s; retry %d of %d in %.2f s", exc, attempt + 1, self.retries, wait)
                time.sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, tuple[int, str] | None]:
        """One terminal call as the link answers it, ``(answer, last_error() or None)``, connecting (and
        ``initialize()``-ing) first when there is no live link. Never retried: the caller decides what may
        be repeated (a trade request whose reply was lost may not). A link that failed, or a session the
        terminal lost, is dropped so that the next call reconnects."""
        try:
            answer, error = self._connect().call(name, *args, **kwargs)
        except TerminalError as exc:
            if exc.code in (None, IPC_INIT_FAILED, IPC_NO_CONNECTION):
                self._drop()
            raise
        if error is not None and error[0] in (IPC_INIT_FAILED, IPC_NO_CONNECTION):
            self._drop()
        return answer, error

    def _drop(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.close()

    # -- loading -----------------------------------------------------------------------------------
    def load(
        self, symbol: str, timeframe: str | int | Timeframe, start: Any = None, end: Any = None
    ) -> pd.DataFrame:
        """Bars of ``symbol`` opening in ``[start, end)`` (UTC; naive times are UTC), as a candle frame.

        Without ``start`` the whole history the terminal holds is returned; without ``end``, up to the
        last finished bar. No bar in the window raises ``NoBarsError``.
        """
        df = self.fetch(symbol, timeframe, start, end).frame
        if not len(df):
            tf = Timeframe.parse(timeframe)
            raise NoBarsError(
                f"the terminal at {self.where} has no {symbol} {tf.name} bars between "
                f"{start or 'the start of its history'} and {end or 'now'} (UTC)"
            )
        return df

    def fetch(
        self, symbol: str, timeframe: str | int | Timeframe, start: Any = None, end: Any = None
    ) -> Fetched:
        """Like ``load``, but an empty window gives an empty frame, and with it the UTC open time of the
        bar still forming (every bar before it is final) and the UTC time up to which the answer is known
        complete (what a cache may record as covered): where a page answered "not found" instead of an
        empty array — what a terminal says while it is still downloading that history — the answer is
        complete only up to that page."""
        tf = Timeframe.parse(timeframe)
        start_s, end_s = utc_seconds(start, "start"), utc_seconds(end, "end")
        if start_s is not None and end_s is not None and start_s >= end_s:
            raise DataError(f"start {start} must come before end {end}")
        self._require_login()
        digits = self._select(symbol)
        page = self._page_size()
        current = self._rates("copy_rates_from_pos", symbol, tf, 0, 1)
        if current is None or not len(current):
            raise NoBarsError(f"the terminal at {self.where} has no {symbol} {tf.name} history")
        forming = int(current["time"][-1])
        last = forming - 1  # the forming bar is left out
        if end_s is not None:  # end is exclusive
            last = min(last, int(self.clock.to_broker_seconds(np.array([end_s]))[0]) - 1)
        if start_s is None:
            first = None
            pages, unknown = self._walk_back(symbol, tf, page), None
        else:
            first = int(self.clock.to_broker_seconds(np.array([start_s]))[0])
            pages, unknown = self._walk_range(symbol, tf, first, last, page) if first <= last else ([], None)
        rates = _stitch(pages)
        keep = rates["time"] <= last
        if first is not None:
            keep &= rates["time"] >= first
        meta = CandleMeta(symbol, tf, digits, self.clock, source=f"mt5:{self.where}")
        complete = forming if unknown is None else min(forming, unknown)
        final, complete = self.clock.to_utc_seconds(np.array([forming, complete]))
        return Fetched(from_rates(rates[keep], meta), _utc_stamp(final), _utc_stamp(complete))

    def load_ticks(self, symbol: str, start: Any = None, end: Any = None) -> pd.DataFrame:
        """Every tick of ``symbol`` in ``[start, end)`` (UTC) through ``copy_ticks_range``, a day per call;
        an answer cut at the terminal's cap is continued from its last second (asked again whole)."""
        start_s, end_s = utc_seconds(start, "start"), utc_seconds(end, "end")
        if start_s is None or end_s is None or start_s >= end_s:
            raise DataError(f"ticks from the terminal need a start before the end, got {start} .. {end}")
        self._require_login()
        digits = self._select(symbol)
        page = self._page_size()
        first, last = (int(v) for v in self.clock.to_broker_seconds(np.array([start_s, end_s - 1])))
        parts, t0 = [], first
        while t0 <= last:
            t1 = min(t0 + 86400 - 1, last)
            answer = self._call("copy_ticks_range", symbol, t0, t1, COPY_TICKS_ALL, expect_none=True)
            part = _as_records(answer, TICKS_DTYPE, "copy_ticks_range()")
            if len(part) >= page:
                cut = int(part["time_msc"][-1] // 1000)
                if cut <= t0:
                    raise TerminalError(f"more than {page} {symbol} ticks in one second at broker time {cut}")
                part, t1 = part[part["time_msc"] // 1000 < cut], cut - 1
            parts.append(part)
            t0 = t1 + 1
        ticks = np.concatenate(parts) if parts else _as_records(None, TICKS_DTYPE, "")
        ms = ticks["time_msc"].astype(np.int64)
        utc_s = self.clock.to_utc_seconds(ms // 1000)
        ns = (utc_s * 1000 + ms % 1000) * 1_000_000
        meta = TickMeta(symbol, digits, f"mt5:{self.where}")
        return make_ticks(
            ns, ticks["bid"], ticks["ask"], meta, last=ticks["last"], volume=ticks["volume_real"]
        )

    def tick(self, symbol: str) -> tuple[pd.Timestamp, float, float]:
        """The latest quote of ``symbol``: ``(UTC time, bid, ask)``, the time read with the broker clock."""
        answer = self._call("symbol_info_tick", symbol, expect_none=True)
        if answer is None:
            raise UnknownSymbolError(f"the terminal at {self.where} has no quote for {symbol!r}")
        seconds = int(self.clock.to_utc_seconds(np.array([int(answer.time)]))[0])
        return _utc_stamp(seconds), float(answer.bid), float(answer.ask)

    def link(self) -> NativeLink | BridgeLink:
        """The connected link (``initialize()`` done): live trading sends its trade requests through it."""
        return self._connect()

    def cache_feed(self) -> str:
        """Which broker the bars come from, known without a terminal call (a read-through cache's key):
        the ``server`` option when given, else where the terminal is reached. ``trade_server`` holds the
        server the terminal reported at the last load."""
        if "server" in self.init_kwargs:
            return str(self.init_kwargs["server"])
        if self.host is None and importlib.util.find_spec("MetaTrader5") is not None:
            return "local"
        return f"{self.host or '127.0.0.1'}:{self.port}"

    def _require_login(self) -> None:
        account = self._call("account_info", expect_none=True)
        if account is None:
            raise NotLoggedInError(
                f"the MetaTrader 5 terminal at {self.where} has no trade account logged in; log in from the "
                "terminal (File > Login to Trade Account) or pass login=, password= and server="
            )
        self.trade_server = str(getattr(account, "server", "") or "")

    def spec(self, symbol: str) -> SymbolSpec:
        """``symbol``'s trading conditions from the terminal's ``symbol_info`` (MQL5 Reference, "Symbol
        Properties"): digits, contract size, currencies, calculation mode, swaps and their mode, levels,
        volumes, trade mode, hedged margin. A symbol the terminal does not know is refused by name; a reply
        no MetaTrader symbol could give is one line naming the symbol and the field, never a spec made up."""
        info = self._info(symbol)
        try:
            return spec_from_symbol_info(info)
        except SpecError as exc:
            raise SpecError(f"the terminal at {self.where}: {exc}") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise SpecError(
                f"the terminal at {self.where} answered symbol_info({symbol!r}) with a record no MetaTrader "
                f"symbol has ({type(exc).__name__}: {exc})"
            ) from None

    def _select(self, symbol: str) -> int:
        """Check the symbol and put it in Market Watch (history is served only for those); give its digits."""
        info = self._info(symbol)
        if not self._call("symbol_select", symbol, True, expect_none=True):
            raise TerminalError(f"the terminal at {self.where} could not add {symbol} to Market Watch")
        return int(info.digits)

    def _info(self, symbol: str) -> Any:
        """The terminal's ``symbol_info`` record of ``symbol``; an unknown symbol refused by name, with the
        closest names the terminal has."""
        info = self._call("symbol_info", symbol, expect_none=True)
        if info is None:
            known = self._call("symbols_get", expect_none=True) or ()
            names = [s.name for s in known]
            close = difflib.get_close_matches(symbol, names, n=3, cutoff=0.6)
            hint = (
                f"; did you mean {', '.join(close)}?"
                if close
                else (f"; it has {len(names)} symbols, e.g. {', '.join(names[:5])}" if names else "")
            )
            raise UnknownSymbolError(f"the terminal at {self.where} has no symbol {symbol!r}{hint}")
        return info

    def _page_size(self) -> int:
        if self.page_size is not None:
            return self.page_size
        info = self._call("terminal_info")
        return max(1, min(int(info.maxbars), MAX_PAGE))

    def _rates(self, call: str, symbol: str, tf: Timeframe, a: int, b: int) -> np.ndarray | None:
        """The rates of one call; None for a "not found" answer (nothing known), unlike an empty array."""
        answer = self._call(call, symbol, int(tf), int(a), int(b), expect_none=True)
        return None if answer is None else _as_records(answer, RATES_DTYPE, f"{call}()")

    def _walk_range(
        self, symbol: str, tf: Timeframe, first: int, last: int, page: int
    ) -> tuple[list[np.ndarray], int | None]:
        """``copy_rates_range`` over windows of at most ``page`` bars each, oldest first, and the broker
        time of the first window answered "not found" (None when every window answered).

        Each window starts right after the last bar received, so an answer the terminal cut short (its cap
        below ``page``) is simply continued, and an empty window (a weekend, a holiday) is stepped over.
        """
        span = page * _min_bar_seconds(tf)
        pages, t0, unknown = [], first, None
        while t0 <= last:
            t1 = min(t0 + span - 1, last)
            part = self._rates("copy_rates_range", symbol, tf, t0, t1)
            if part is None:
                unknown = t0 if unknown is None else unknown
                part = np.empty(0, dtype=RATES_DTYPE)
            pages.append(part)
            t0 = int(part["time"][-1]) + 1 if len(part) else t1 + 1
        log.debug("%s %s: %d range pages", symbol, tf.name, len(pages))
        return pages, unknown

    def _walk_back(self, symbol: str, tf: Timeframe, page: int) -> list[np.ndarray]:
        """``copy_rates_from_pos`` from position 1 back to the oldest bar the terminal holds."""
        pages, pos = [], 1
        while True:
            part = self._rates("copy_rates_from_pos", symbol, tf, pos, page)
            if part is None or not len(part):
                break
            pages.append(part)
            if len(part) < page:
                break
            pos += len(part)
        log.debug("%s %s: %d position pages", symbol, tf.name, len(pages))
        return pages[::-1]  # oldest first


def _stitch(pages: list[np.ndarray]) -> np.ndarray:
    """Pages in time order, each bar once (boundary bars can arrive twice; the later page wins)."""
    if not pages:
        return np.empty(0, dtype=RATES_DTYPE)
    rates = np.concatenate(pages) if len(pages) > 1 else pages[0]
    t = rates["time"]
    if np.all(t[1:] > t[:-1]):
        return rates  # the usual case: nothing to sort or drop
    order = np.argsort(rates["time"], kind="stable")[::-1]
    _, first_seen = np.unique(rates["time"][order], return_index=True)
    return rates[order[first_seen]]


def _whole(value: object) -> int | None:
    """``value`` as a whole number (an int, a NumPy int or digits), else None; never a bool or a float."""
    if isinstance(value, bool):
        return None
    try:
        return int(value) if isinstance(value, str) else operator.index(value)
    except (TypeError, ValueError):
        return None


def _finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
