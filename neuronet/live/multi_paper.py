"""Paper trading of a multi-symbol EA: the backtest's multi-symbol account (``backtests.multi``), as it is,
over bars that grow while the terminal quotes.

One broker per symbol on the account's timeline, all on one account (``backtests.broker.portfolio``: one
balance, free margin, margin level and stop-out across the symbols; profit and margin converted into the
deposit currency at the rate of the moment). The timeline is the main chart's bars: ``open_bar`` starts the
bar now forming with each symbol's live bid and ask (every symbol enters the bar before any is checked, as
the backtest's ``MultiBacktest._replay`` does), ``close_bar`` completes it with each symbol's closed bar and
works its range. A symbol without a quote or a bar of its own at that moment gets the backtest's flat bar at
its last close, through which nothing trades (``Market.close_gaps``, "market closed"). So a paper run and a
backtest over the same bars give the same trades.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from backtests.alignment import align
from backtests.broker import AccountConfig, Broker
from backtests.broker.portfolio import open_brokers
from backtests.context import TradingContext
from datafeeds.candles import meta_of
from datafeeds.symbols import SymbolSpec
from neuronet.live.errors import LiveError


class Quote(NamedTuple):
    """A symbol's bid and ask at a bar's open (prices)."""

    bid: float
    ask: float


class Closed(NamedTuple):
    """A symbol's bar once closed: its range and close (prices)."""

    high: float
    low: float
    close: float


class MultiPaper:
    """The brokers of one paper account over ``history`` (symbol -> closed bars of the main timeframe, the
    main symbol first), with ``specs`` per symbol; ``context`` routes the EA's requests by symbol."""

    def __init__(
        self, history: Mapping[str, pd.DataFrame], specs: Mapping[str, SymbolSpec], account: AccountConfig
    ):
        if not history or any(not len(df) for df in history.values()):
            raise LiveError("paper trading needs at least one closed bar of history for every symbol")
        aligned = align(history)
        columns = {
            name: (tr.open, tr.high, tr.low, tr.close, tr.spread, aligned.time)
            for name, tr in aligned.tracks.items()
        }
        clock = meta_of(next(iter(history.values()))).clock
        self.brokers: dict[str, Broker] = open_brokers(columns, specs, account, clock)
        self.main = next(iter(history))
        self._closed = {name: list(tr.closed) for name, tr in aligned.tracks.items()}
        for name in self.brokers:
            self._gaps(name)
        self.context = TradingContext(self.brokers, self.main)

    def __len__(self) -> int:
        return len(self.brokers[self.main].market)

    def lacked(self) -> dict[str, int]:
        """Per symbol, the bars of the timeline it had none of (the report's "Bars lacked")."""
        return {name: int(sum(closed)) for name, closed in self._closed.items()}

    def _gaps(self, name: str) -> None:
        """The bars at which ``name`` had none of its own, over its grown market."""
        market = self.brokers[name].market
        market.closed = None
        market.close_gaps(np.array(self._closed[name], dtype=bool))

    def open_bar(self, when: pd.Timestamp, quotes: Mapping[str, Quote | None]) -> int:
        """A bar of the timeline begins at ``when``: each symbol at its quote (None: no quote of its own at
        this moment, flat at its last close), then every symbol's opening checks. Returns the bar's index."""
        t = len(self)
        for name, broker in self.brokers.items():
            market, quote = broker.market, quotes.get(name)
            if quote is None:
                last = float(market.closes[-1])
                spread = float(market.s[-1])
            else:
                last = float(quote.bid)
                if not (math.isfinite(quote.ask) and quote.ask >= quote.bid):
                    raise LiveError(
                        f"{name} quote at {when}: ask {quote.ask} cannot be traded with {quote.bid}"
                    )
                spread = market.spread_points(
                    float(broker.to_points(quote.ask) - broker.to_points(quote.bid))
                )
            try:
                market.append(when, last, last, last, last, spread)
            except ValueError as exc:
                raise LiveError(f"{name}: {exc}") from None
            broker.inside = None
            self._closed[name].append(quote is None)
            self._gaps(name)
        firsts = [b.enter(t) for b in self.brokers.values()]  # every symbol at this moment first
        for broker, first in zip(self.brokers.values(), firsts, strict=True):
            broker.open_checks(t, first)
        return t

    def set_tick(self, quotes: Mapping[str, Quote]) -> None:
        """Quotes inside the bar now forming: ``on_tick``'s orders fill there (``Broker.inside``)."""
        for name, quote in quotes.items():
            broker = self.brokers[name]
            if not (math.isfinite(quote.bid) and quote.bid > 0 and quote.ask >= quote.bid):
                raise LiveError(f"{name} quote bid {quote.bid} ask {quote.ask} cannot be traded on")
            broker.inside = (broker.to_points(quote.bid), broker.to_points(quote.ask))

    def close_bar(self, t: int, bars: Mapping[str, Closed | None]) -> None:
        """Bar ``t`` closed: each symbol's range (None: it had no bar of its own, it stays flat), then every
        symbol's stops, pending orders and stop-out on it."""
        for name, broker in self.brokers.items():
            row = bars.get(name)
            if row is None or self._closed[name][t]:
                continue
            try:
                broker.market.complete(t, row.high, row.low, row.close)
            except ValueError as exc:
                raise LiveError(f"{name}: {exc}") from None
        for broker in self.brokers.values():
            broker.bar_range(t)
