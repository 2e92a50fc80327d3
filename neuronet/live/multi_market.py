"""What a multi-symbol live run reads of the terminal: the EA's declared symbols and timeframes, each
symbol's specification, the first history of every (symbol, timeframe), and each symbol's quote, checked
(``quotes``) before anything is decided or filled at it (``SymbolQuotes``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pandas as pd

from datafeeds.symbols import SpecError, spec_from_symbol_info
from datafeeds.timeframes import Timeframe
from neuronet.live.errors import LiveError
from neuronet.live.multi_paper import Quote
from neuronet.live.quotes import QuoteBounds, QuoteError, checked_tick
from neuronet.live.shared_state import SharedState

log = logging.getLogger(__name__)

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


def first_history(
    fetch: Callable[[tuple[str, str], Any], Any],
    symbols: tuple[str, ...],
    timeframes: tuple[str, ...],
    history_bars: int,
) -> tuple[dict[tuple[str, str], pd.DataFrame], Any]:
    """A new run's closed bars of every (symbol, timeframe) (``fetch(key, None)``: the terminal's), and the
    main chart's fetch (its ``final_until`` is the bar forming now). The main chart keeps its last
    ``history_bars`` (0: all); the timeline is its history: another symbol's bars on the main timeframe
    from its first to its last bar (the terminal's clock moves while the symbols are read one after the
    other: a bar read later is taken when it closes, never ahead of the main chart)."""
    main = (symbols[0], timeframes[0])
    frames: dict[tuple[str, str], pd.DataFrame] = {}
    fetched_main = None
    for name in symbols:
        for tf in timeframes:
            fetched = fetch((name, tf), None)
            frames[(name, tf)] = fetched.frame
            if (name, tf) == main:
                fetched_main = fetched
    main_hist = frames[main]
    if history_bars:
        main_hist = main_hist.iloc[-history_bars:]
    if len(main_hist) < 2:
        raise LiveError(
            f"the terminal has {len(main_hist)} closed {main[0]} {main[1]} bars; "
            "a live run needs history to start from"
        )
    first, last = main_hist.index[0], main_hist.index[-1]
    for key, df in frames.items():
        if key == main:
            frames[key] = main_hist
        elif key[1] == main[1]:
            frames[key] = df[(df.index >= first) & (df.index <= last)]
    empty = [f"{k[0]} {k[1]}" for k, df in frames.items() if k[1] == main[1] and not len(df)]
    if empty:
        raise LiveError(f"the terminal has no closed {', '.join(empty)} bars since {first}")
    return frames, fetched_main


class SymbolQuotes:
    """Every symbol's checked quote of a multi-symbol run (``quotes.checked_tick``): each against its own
    closed bars on the main timeframe (``feeds()``: the run's views' feeds, None before the start) and the
    bar the terminal forms as the run last read it (``shared``: the run's ``SharedState``), each read from
    its terminal through ``retrying`` (``Lifecycle.retrying``)."""

    def __init__(
        self,
        shared: SharedState,
        retrying: Callable[[str, Callable[[], Any]], Any],
        symbols: tuple[str, ...],
        timeframe: Timeframe,
        feeds: Callable[[], Any],
    ):
        self._shared, self._retrying = shared, retrying
        self._symbols, self._tf, self._feeds = symbols, timeframe, feeds

    def bounds(self, symbol: str) -> Callable[[], QuoteBounds | None]:
        """What a ``symbol`` quote is checked against now (``quote_bounds``)."""

        def read() -> QuoteBounds | None:
            feeds = self._feeds()
            feed = feeds[(symbol, self._tf.name)] if feeds is not None else None
            return quote_bounds(feed, self._shared.market_bar, self._tf.seconds)

        return read

    def of(self, symbol: str, bar_open: pd.Timestamp) -> Quote:
        """``symbol``'s quote for the bar opened at ``bar_open``, checked (``QuoteError``). Only the main
        symbol's must be stamped at or after that open on paper (``fill_age``): its bar exists because a
        newer tick came. Another symbol's last tick is often a moment older (ticks of two symbols are not
        simultaneous, and a quiet one may not tick for minutes): it is that symbol's price now, the one a
        live order would get, so it is held to the one-bar window every quote is (``check_time``); refused,
        that symbol would have no market for the whole bar and its range would go unchecked."""
        shared = self._shared
        age = shared.settings.fill_age() if symbol == self._symbols[0] else None
        bounds = self.bounds(symbol)()
        _, bid, ask = checked_tick(
            shared.source, symbol, bar_open, self._tf.seconds, bounds, self._retrying, age
        )
        return Quote(bid, ask)

    def at_open(self, when: pd.Timestamp, refused: Callable[[str], None]) -> dict[str, Quote | None]:
        """Every symbol's quote at the open of the bar forming at ``when``; the main symbol's must be good
        (``QuoteError``), another's that is refused means it has no market at this moment (None), said to
        ``refused`` (the journal's warning) so that a report shows why its requests got 10018."""
        quotes: dict[str, Quote | None] = {}
        for name in self._symbols:
            try:
                quotes[name] = self.of(name, when)
            except QuoteError as exc:
                if name == self._symbols[0]:
                    raise
                message = f"{name}: {exc}: no market for it at {when}"
                log.warning("%s", message)
                refused(message)
                quotes[name] = None
        return quotes

    def good(self, bar_open: pd.Timestamp) -> dict[str, Quote]:
        """The symbols' quotes that pass their checks now; a refused one is left out."""
        quotes: dict[str, Quote] = {}
        for name in self._symbols:
            try:
                quotes[name] = self.of(name, bar_open)
            except QuoteError:
                continue
        return quotes

    def at_missed_open(self, name: str, row: pd.Series) -> Quote:
        """A missed bar's open and spread as its quote (the backtest's fill prices of that bar)."""
        bid = float(row["open"])
        point = float(self._feeds()[(name, self._tf.name)].meta.point)
        return Quote(bid, bid + float(row["spread"]) * point)
