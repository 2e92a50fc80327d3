"""A quote from the terminal is checked before anything is decided or filled at it.

A terminal (or a bridge, or a broker's feed) can answer ``symbol_info_tick`` with None, a NaN or zero
price, an ask below the bid, a time nowhere near the bar being traded, or a price nowhere near the bars
(bid 11.70 while the bars trade at 1.17: a feed that lost a decimal, a symbol mixed up). Such a quote is
refused here (``QuoteError``): the runner journals and logs the refusal and waits for the next look, and a
live trade request made at it is refused with "no quotes" (10021), so a quote refused is never a fill.

The price bound (``QuoteBounds``): let the recent range be the highest high minus the lowest low of the
last ``BAND_BARS`` closed bars, or of the last server day of bars when that is more of them (an M1 run
looks at 1440), and at least ``BAND_FLOOR`` of the last close (a flat history). A bid or an ask more than
``BAND_WIDTHS`` recent ranges below that low or above that high is refused. On EURUSD H1 that leaves
about 2-6 cents on either side of four days' range: a real gap or a news spike passes, a price 10x or a
tenth of the bars' does not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from datafeeds.terminal_errors import UnknownSymbolError
from neuronet.live.errors import LiveError


class QuoteError(LiveError):
    """The terminal's quote cannot be traded on (missing, not a price, crossed, or at the wrong time)."""


def check_prices(symbol: str, bid: Any, ask: Any) -> tuple[float, float]:
    """``bid`` and ``ask`` as floats, or a ``QuoteError``: both finite and positive, ask not below bid."""
    try:
        b, a = float(bid), float(ask)
    except (TypeError, ValueError, OverflowError):
        raise QuoteError(f"{symbol} quote bid {bid!r} ask {ask!r}: not prices") from None
    if not (math.isfinite(b) and b > 0 and math.isfinite(a) and a > 0):
        raise QuoteError(f"{symbol} quote bid {b} ask {a}: not a tradable price")
    if a < b:
        raise QuoteError(f"{symbol} quote bid {b} ask {a}: the ask is below the bid")
    return b, a


def check_time(
    symbol: str, when: pd.Timestamp, bar_open: pd.Timestamp, bar_seconds: int, max_age: float | None = None
) -> None:
    """A quote at ``when`` for the bar opened at ``bar_open`` lies at most one bar before it (stale) and
    before the end of the bar after it (one more bar may close between reading the bars and the quote).

    ``max_age`` (seconds; a paper fill's, ``LiveSettings.max_quote_age``): the quote may be at most that
    much older than the bar's open. A paper account fills at the quote as the backtest fills at the bar's
    open; a quote stamped before the bar opened is a price of the bar before, one the account could not
    have traded at the moment it decides (the terminal formed the new bar from a newer tick), so it is
    refused and the run waits for a fresh one (``FRESH``)."""
    step = pd.Timedelta(seconds=bar_seconds)
    if max_age is not None and when < bar_open - pd.Timedelta(seconds=max_age):
        raise QuoteError(
            f"{symbol} quote at {when}: stamped before the bar opened at {bar_open} (stale for a paper fill: "
            f"at most {max_age:g} s older than the bar's open, --max-quote-age); waiting for a fresh one"
        )
    if when < bar_open - step:
        raise QuoteError(f"{symbol} quote at {when}: older than the bar opened at {bar_open} (stale)")
    if when >= bar_open + 2 * step:
        raise QuoteError(f"{symbol} quote at {when}: in the future of the bar opened at {bar_open}")


FRESH = 0.0  # seconds a paper fill's quote may be older than the bar's open (``LiveSettings.max_quote_age``)
BAND_BARS = 100  # closed bars the recent range is taken over (at least; a server day of bars when more)
BAND_WIDTHS = 2.0  # how many recent ranges a quote may lie beyond it
BAND_FLOOR = 0.01  # the recent range is taken as at least this share of the last close


@dataclass(frozen=True)
class QuoteBounds:
    """What a quote must agree with: the bar the terminal is forming (its time, UTC) and the price band the
    recent closed bars allow (``low``..``high``, see the module docstring). The runner keeps one up to date
    as bars close; a live trade context checks every quote a request reads against it."""

    bar_open: pd.Timestamp
    bar_seconds: int
    low: float
    high: float

    @classmethod
    def of(
        cls, highs: np.ndarray, lows: np.ndarray, last_close: float, bar_open: pd.Timestamp, bar_seconds: int
    ) -> QuoteBounds:
        """The bounds after closed bars with these ``highs`` and ``lows`` (oldest first, (N,))."""
        n = max(BAND_BARS, 86400 // max(int(bar_seconds), 1))
        hi, lo = float(np.max(highs[-n:])), float(np.min(lows[-n:]))
        span = max(hi - lo, BAND_FLOOR * float(last_close))
        return cls(bar_open, int(bar_seconds), lo - BAND_WIDTHS * span, hi + BAND_WIDTHS * span)

    def check(self, symbol: str, when: pd.Timestamp, bid: float, ask: float) -> None:
        """A ``QuoteError`` unless the quote's time fits the forming bar and its prices the band."""
        check_time(symbol, when, self.bar_open, self.bar_seconds)
        self.check_prices(symbol, bid, ask)

    def check_prices(self, symbol: str, bid: float, ask: float) -> None:
        """A ``QuoteError`` when the bid or the ask lies outside the band of the recent bars."""
        if bid < self.low or ask > self.high:
            raise QuoteError(
                f"{symbol} quote bid {bid:.10g} ask {ask:.10g}: far from the recent bars (a quote must lie "
                f"within {self.low:.10g} .. {self.high:.10g})"
            )

    def server_day(self, quote_seconds: int, bar_open_broker: int) -> int:
        """The server day a request made at a quote stamped ``quote_seconds`` (broker time) belongs to: the
        day of that time held within the bar the terminal is forming (opened at ``bar_open_broker``), so a
        quote stamped a day ahead (or behind) cannot move the day a daily limit counts by."""
        end = bar_open_broker + self.bar_seconds - 1
        return min(max(int(quote_seconds), bar_open_broker), end) // 86400


def checked_tick(
    source: Any,
    symbol: str,
    bar_open: pd.Timestamp,
    seconds: int,
    bounds: QuoteBounds | None,
    retrying: Callable[[str, Callable[[], Any]], Any],
    max_age: float | None = None,
) -> tuple[pd.Timestamp, float, float]:
    """``symbol``'s quote (``source.tick``, read through the run's ``retrying``) for the bar opened at
    ``bar_open`` (``seconds`` long): its time, bid and ask. One that is missing, not a price, crossed, at a
    time far from that bar (more than ``max_age`` seconds before its open, where given: ``check_time``)
    or at prices outside ``bounds`` is a ``QuoteError``."""
    try:
        when, bid, ask = retrying(f"reading the {symbol} quote", lambda: source.tick(symbol))
    except UnknownSymbolError as exc:  # None: the symbol was there when the run started
        raise QuoteError(str(exc)) from None
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise QuoteError(f"the terminal's {symbol} quote cannot be read ({exc})") from None
    bid, ask = check_prices(symbol, bid, ask)
    check_time(symbol, when, bar_open, seconds, max_age)
    if bounds is not None:
        bounds.check_prices(symbol, bid, ask)
    return when, bid, ask


def quote_of(symbol: str, tick: Any) -> tuple[int, float, float]:
    """A ``symbol_info_tick`` answer as (broker seconds, bid, ask), or a ``QuoteError``."""
    if tick is None:
        raise QuoteError(f"the terminal has no quote for {symbol}")
    bid, ask = check_prices(symbol, getattr(tick, "bid", None), getattr(tick, "ask", None))
    try:
        seconds = float(tick.time)
    except (AttributeError, TypeError, ValueError, OverflowError):
        raise QuoteError(f"{symbol} quote time {getattr(tick, 'time', None)!r}: not a time") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise QuoteError(f"{symbol} quote time {seconds}: not a time")
    return int(seconds), bid, ask


def refused_at_bad_quote(action: str, refused: Any) -> Callable[[Callable], Callable]:
    """A trade request of ``TerminalTrade`` that, when the quote it reads is garbage, is refused with
    "no quotes" (``refuse_quote``: noted, logged) and answers ``refused`` (None, 0, False), never raises.
    So is every request while ``self.late`` says why the decision's price is gone (a bar decided after it
    closed: the terminal would fill it at today's price, not at that bar's open)."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def request(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.late:
                self.refuse_quote(action, QuoteError(self.late))
                return refused
            try:
                return method(self, *args, **kwargs)
            except QuoteError as exc:
                self.refuse_quote(action, exc)
                return refused

        return request

    return wrap
