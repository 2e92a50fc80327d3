"""What a multi-symbol live run reads of the terminal besides bars: the EA's declared symbols and
timeframes, each symbol's specification, and each symbol's quote, checked (``quotes``) before anything is
decided or filled at it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from datafeeds.symbols import SpecError, spec_from_symbol_info
from datafeeds.terminal_errors import UnknownSymbolError
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import LiveError
from neuronet.live.multi_paper import Quote
from neuronet.live.quotes import QuoteBounds, QuoteError, check_prices, check_time

Retrying = Callable[[str, Callable[[], Any]], Any]  # the runner's terminal call, retried after a drop


def declared(ea_class: Any, symbol: str, timeframe: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The EA's symbols and timeframes (class attributes; empty: ``symbol``/``timeframe``), checked: names,
    distinct, timeframes MetaTrader has."""
    symbols = tuple(str(s).strip() for s in ea_class.symbols) or (symbol,)
    frames = tuple(str(t).strip().upper() for t in ea_class.timeframes) or (timeframe,)
    for kind, names in (("symbols", symbols), ("timeframes", frames)):
        if not all(names) or len(set(names)) != len(names):
            raise LiveError(f"{ea_class.__name__}.{kind}: distinct names, not {names!r}")
    for tf in frames:
        try:
            Timeframe.parse(tf)
        except ValueError as exc:
            raise LiveError(f"{ea_class.__name__}.timeframes: {exc}") from None
    return symbols, frames


def terminal_specs(source: Any, symbols: tuple[str, ...], ea: str, retrying: Retrying) -> dict:
    """Each symbol's specification from the terminal's ``symbol_info`` (the paper account's terms: digits,
    contract size, currencies, swaps, volume limits); a symbol the terminal does not know is refused."""
    specs = {}
    for name in symbols:
        info, _ = retrying(f"reading {name}", lambda n=name: source.call("symbol_info", n))
        if info is None:
            raise LiveError(f"{ea} trades {name}: the terminal has no symbol {name!r}")
        try:
            specs[name] = spec_from_symbol_info(info)
        except SpecError as exc:
            raise LiveError(str(exc)) from None
    return specs


def quote_bounds(feed: Any, market_bar: pd.Timestamp | None, seconds: int) -> QuoteBounds | None:
    """A symbol's quote is checked against the bar the terminal forms and its closed bars' price band
    (``QuoteBounds``); None before either is known."""
    if market_bar is None or feed is None or not len(feed):
        return None
    return QuoteBounds.of(
        feed.column("high"), feed.column("low"), feed.column("close")[-1], market_bar, seconds
    )


def checked_quote(
    source: Any,
    symbol: str,
    bar_open: pd.Timestamp,
    seconds: int,
    bounds: QuoteBounds | None,
    retrying: Retrying,
) -> Quote:
    """``symbol``'s quote for the bar opened at ``bar_open``: one that is missing, not a price, crossed, at
    a time far from that bar or at prices far from the recent bars is a ``QuoteError``."""
    try:
        when, bid, ask = retrying(f"reading the {symbol} quote", lambda: source.tick(symbol))
    except UnknownSymbolError as exc:
        raise QuoteError(str(exc)) from None
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise QuoteError(f"the terminal's {symbol} quote cannot be read ({exc})") from None
    bid, ask = check_prices(symbol, bid, ask)
    check_time(symbol, when, bar_open, seconds)
    if bounds is not None:
        bounds.check_prices(symbol, bid, ask)
    return Quote(bid, ask)
