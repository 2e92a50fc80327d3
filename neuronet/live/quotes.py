"""A quote from the terminal is checked before anything is decided or filled at it.

A terminal (or a bridge, or a broker's feed) can answer ``symbol_info_tick`` with None, a NaN or zero
price, an ask below the bid, or a time nowhere near the bar being traded. Such a quote is refused here
(``QuoteError``): the runner journals and logs the refusal and waits for the next look, and a live trade
request made at it is refused with "no quotes" (10021), so a quote refused is never a fill.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import pandas as pd

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


def check_time(symbol: str, when: pd.Timestamp, bar_open: pd.Timestamp, bar_seconds: int) -> None:
    """A quote at ``when`` for the bar opened at ``bar_open`` lies at most one bar before it (stale) and
    before the end of the bar after it (one more bar may close between reading the bars and the quote)."""
    step = pd.Timedelta(seconds=bar_seconds)
    if when < bar_open - step:
        raise QuoteError(f"{symbol} quote at {when}: older than the bar opened at {bar_open} (stale)")
    if when >= bar_open + 2 * step:
        raise QuoteError(f"{symbol} quote at {when}: in the future of the bar opened at {bar_open}")


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
    "no quotes" (``refuse_quote``: noted, logged) and answers ``refused`` (None, 0, False), never raises."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def request(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except QuoteError as exc:
                self.refuse_quote(action, exc)
                return refused

        return request

    return wrap
