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
from neuronet.live.errors import LiveError

_FIELDS = ("open", "high", "low", "close", "spread")


class PaperBroker(Broker):
    """The backtest broker over a growing history (``history``: a candle frame of closed bars, UTC)."""

    def __init__(self, history: pd.DataFrame, point: float, config: AccountConfig):
        if not len(history):
            raise LiveError("paper trading needs at least one closed bar of history")
        n = len(history)
        self._cap = max(64, 2 * n)
        self._buf = {name: np.zeros(self._cap) for name in _FIELDS}
        for name in _FIELDS[:4]:
            self._buf[name][:n] = history[name].to_numpy(dtype=np.float64)
        self._buf["spread"][:n] = history["spread"].to_numpy(dtype=np.float64)
        self._ns = list(history.index.as_unit("ns").asi8)
        super().__init__(*(self._buf[f][:n] for f in _FIELDS), history.index.as_unit("ns"), point, config)
        self._buf["spread"][:n] = self.spread  # the base class's choice: price units, fixed or missing
        self._views(n)
        self._tick: tuple[float, float] | None = None  # a quote inside the bar (on_tick), else the open

    def price(self, side: int) -> float:
        """Fill price now: the latest tick inside the bar when the EA trades on ticks, else the bar's open."""
        if self._tick is None:
            return super().price(side)
        return self._tick[1] if side > 0 else self._tick[0]

    def set_tick(self, bid: float, ask: float) -> None:
        """A quote inside the bar now forming: ``on_tick``'s orders fill there."""
        if not (math.isfinite(bid) and bid > 0 and math.isfinite(ask) and ask >= bid):
            raise LiveError(f"quote bid {bid} ask {ask} cannot be traded on")
        self._tick = (bid, ask)

    # -- growth ------------------------------------------------------------------------------------------
    def _views(self, n: int) -> None:
        self.opens, self.highs, self.lows, self.closes = (self._buf[f][:n] for f in _FIELDS[:4])
        self.spread = self._buf["spread"][:n]
        self.time = pd.DatetimeIndex(np.array(self._ns, dtype="datetime64[ns]")).tz_localize("UTC")
        self._day = (np.asarray(self._ns, dtype=np.int64) // 86_400_000_000_000).astype(np.int64)

    def _append(self, when: pd.Timestamp, o: float, h: float, lo: float, c: float, spread: float) -> int:
        for name, value in (("open", o), ("high", h), ("low", lo), ("close", c)):
            if not (math.isfinite(value) and value > 0):
                raise LiveError(f"bar {when}: {name} {value} cannot be traded on")
        if not (math.isfinite(spread) and spread >= 0):
            raise LiveError(f"bar {when}: spread {spread} cannot be traded on")
        stamp = int(pd.Timestamp(when).as_unit("ns").value)
        if stamp <= self._ns[-1]:
            raise LiveError(f"bar {when} does not follow the last bar {self.time[-1]}")
        t = len(self._ns)
        self._tick = None
        if t == self._cap:
            self._cap *= 2
            for name in _FIELDS:
                grown = np.zeros(self._cap)
                grown[:t] = self._buf[name][:t]
                self._buf[name] = grown
        for name, value in zip(_FIELDS, (o, h, lo, c, spread), strict=True):
            self._buf[name][t] = value
        self._ns.append(stamp)
        self._views(t + 1)
        return t

    def _spread_price(self, spread: float) -> float:
        """Price units: the account's fixed spread when set, else the quoted one."""
        cfg = self.config
        return cfg.spread * self.point if cfg.spread is not None else spread

    # -- the bar now forming ---------------------------------------------------------------------------------
    def open_bar(self, when: pd.Timestamp, bid: float, ask: float) -> int:
        """A new bar begins at ``when`` with the live ``bid``/``ask``: swaps, expiries, gaps and pending
        orders at that price, as ``Broker.bar_open`` does at a backtest bar's open. Returns its index."""
        if not (math.isfinite(bid) and bid > 0):
            raise LiveError(f"quote at {when}: bid {bid} cannot be traded on")
        if not (math.isfinite(ask) and ask >= bid):
            raise LiveError(f"quote at {when}: ask {ask} cannot be traded on with bid {bid}")
        t = self._append(when, bid, bid, bid, bid, self._spread_price(ask - bid))
        self.bar_open(t)
        return t

    def close_bar(self, t: int, high: float, low: float, close: float) -> None:
        """Bar ``t`` closed: its range (widened to the decision's price) is checked for stops and orders."""
        if t != len(self._ns) - 1:
            raise LiveError(f"bar {t} is not the bar forming (that is {len(self._ns) - 1})")
        o = self.opens[t]
        self.highs[t], self.lows[t], self.closes[t] = max(high, o), min(low, o), close
        self.bar_range(t)

    def add_bar(self, when: pd.Timestamp, o: float, spread_points: float) -> int:
        """A bar seen only once closed: opened at its own open and spread (``bar_open``); the caller lets the
        EA decide, then calls ``close_bar`` with its range."""
        t = self._append(when, o, o, o, o, self._spread_price(spread_points * self.point))
        self.bar_open(t)
        return t
