"""Paper trading: the backtest broker, as it is, over a history that grows while the terminal quotes.

``PaperBroker`` is ``backtests.broker.Broker`` whose price arrays grow by one bar at a time: ``open_bar``
starts the bar now forming at the terminal's live bid and ask (the decision's prices: market orders fill
there, as the backtest fills them at the bar's open), ``close_bar`` completes it with the terminal's high,
low and close once it closed (stops and pending orders are then checked on its range, as in the
backtest), and ``add_bar`` brings in a whole bar seen only after it closed (a bar missed while the
terminal was unreachable). So a paper run and a backtest over the same bars give the same trades.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig, Broker
from backtests.broker.config import check_currency
from backtests.broker.terms import SymbolTerms
from datafeeds.candles import CandleMeta
from datafeeds.clock import UTC
from neuronet.live.errors import LiveError

_FIELDS = ("open", "high", "low", "close", "spread")


class PaperBroker(Broker):
    """The backtest broker over a growing history (``history``: a candle frame of closed bars, UTC)."""

    def __init__(self, history: pd.DataFrame, point: float, config: AccountConfig):
        if not len(history):
            raise LiveError("paper trading needs at least one closed bar of history")
        # Copies: the bars grow in the broker's own buffers, never in the caller's frame.
        cols = (history[name].to_numpy(dtype=np.float64, copy=True) for name in _FIELDS)
        meta = history.attrs.get("candles")
        known = isinstance(meta, CandleMeta)
        clock = meta.clock if known else UTC  # the server clock of the bars
        terms = SymbolTerms(meta.symbol) if known else None  # its records name the symbol, as a backtest's
        if known:
            check_currency(meta.symbol, config)  # paper money is booked as a backtest's is
        super().__init__(*cols, history.index.as_unit("ns"), point, config, clock, terms=terms)

    def set_tick(self, bid: float, ask: float) -> None:
        """A quote inside the bar now forming: ``on_tick``'s orders fill there (``Broker.inside``)."""
        if not (math.isfinite(bid) and bid > 0 and math.isfinite(ask) and ask >= bid):
            raise LiveError(f"quote bid {bid} ask {ask} cannot be traded on")
        self.inside = (self.to_points(bid), self.to_points(ask))

    def _append(self, when: pd.Timestamp, o: float, spread: float) -> int:
        """A new bar opening at ``o`` with ``spread`` points (its range filled in by ``close_bar``)."""
        try:
            t = self.market.append(when, o, o, o, o, self.market.spread_points(spread))
        except ValueError as exc:
            raise LiveError(str(exc)) from None
        self.inside = None
        return t

    # -- the bar now forming ---------------------------------------------------------------------------------
    def open_bar(self, when: pd.Timestamp, bid: float, ask: float) -> int:
        """A new bar begins at ``when`` with the live ``bid``/``ask``: swaps, expiries, gaps and pending
        orders at that price, as ``Broker.bar_open`` does at a backtest bar's open. Returns its index."""
        if not (math.isfinite(bid) and bid > 0):
            raise LiveError(f"quote at {when}: bid {bid} cannot be traded on")
        if not (math.isfinite(ask) and ask >= bid):
            raise LiveError(f"quote at {when}: ask {ask} cannot be traded on with bid {bid}")
        t = self._append(when, bid, self.to_points(ask) - self.to_points(bid))
        self.bar_open(t)
        return t

    def close_bar(self, t: int, high: float, low: float, close: float) -> None:
        """Bar ``t`` closed: its range (widened to the decision's price) is checked for stops and orders."""
        try:
            self.market.complete(t, high, low, close)
        except ValueError as exc:
            raise LiveError(str(exc)) from None
        self.bar_range(t)

    def add_bar(self, when: pd.Timestamp, o: float, spread_points: float) -> int:
        """A bar seen only once closed: opened at its own open and spread (``bar_open``); the caller lets the
        EA decide, then calls ``close_bar`` with its range."""
        t = self._append(when, o, spread_points)
        self.bar_open(t)
        return t
