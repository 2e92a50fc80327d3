"""One symbol's bars as the broker trades them: bid OHLC, the spread in price units, UTC times, days.

The arrays are the candles' own columns (views, not copies) for a backtest; a paper account grows them one
bar at a time through ``append`` and ``complete``, so the broker never needs to know where its bars come
from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from backtests.broker.config import AccountConfig

DAY_NS = 86_400_000_000_000
_FIELDS = ("open", "high", "low", "close", "spread")


class Market:
    """Bars of one symbol: ``opens``, ``highs``, ``lows``, ``closes`` (bid), ``spread`` (price units) and
    ``time`` (UTC), with ``day`` the day each bar opens on. ``spread_points`` are the candles' spreads:
    the account's fixed ``spread`` replaces them, and candles that carry none at all trade with its
    ``missing_spread`` (``spread_source`` says which: "fixed", "missing" or "bars").

    ``open_spread`` and ``close_spread`` are the spreads at each bar's open (its decision) and at its close
    (its valuation). They are the bar's own spread until finer data gives them (``use_spreads``): a bar's
    spread is the lowest MetaTrader saw during the bar (the terminal keeps each minute's lowest and builds
    higher timeframes from the minutes), which at the bar's open is information from later.
    """

    def __init__(
        self,
        open_: np.ndarray,
        high: np.ndarray,
        low: np.ndarray,
        close: np.ndarray,
        spread_points: np.ndarray,
        time: pd.DatetimeIndex,
        point: float,
        config: AccountConfig,
    ):
        n = len(open_)
        pts = np.asarray(spread_points, float)
        self.spread_source = "fixed" if config.spread is not None else "bars" if pts.any() else "missing"
        if self.spread_source != "bars":
            pts = np.full(n, float(config.missing_spread if config.spread is None else config.spread))
        check_prices(time, open_, high, low, close, pts)
        self.point = point
        self.fixed_spread = config.spread
        self.opens, self.highs, self.lows, self.closes = open_, high, low, close
        self.spread = pts * point  # price units
        self.open_spread = self.close_spread = self.spread
        self.time = time
        self.day = (time.as_unit("ns").asi8 // DAY_NS).astype(np.int64)
        self._buffers: dict[str, np.ndarray] | None = None  # made by the first ``append``
        self._ns: list[int] = []

    def __len__(self) -> int:
        return len(self.opens)

    def use_spreads(self, at_open: np.ndarray, at_close: np.ndarray) -> None:
        """Each bar's spread at its open and at its close from finer data (price units; NaN where the bar
        has none, which keeps its own spread). A fixed spread stays fixed."""
        if self.fixed_spread is None:
            self.open_spread = np.where(np.isnan(at_open), self.spread, at_open)
            self.close_spread = np.where(np.isnan(at_close), self.spread, at_close)

    # -- growth (a paper account's bars) ---------------------------------------------------------------------
    def spread_price(self, quoted: float) -> float:
        """The spread a new bar trades with, in price units: the account's fixed spread when set, else the
        quoted one."""
        return self.fixed_spread * self.point if self.fixed_spread is not None else quoted

    def append(self, when: pd.Timestamp, o: float, h: float, lo: float, c: float, spread: float) -> int:
        """A new bar after the last one (``spread`` in price units); returns its index. Raises ValueError
        naming the bar for a price that cannot be traded on or a time that does not follow."""
        for name, value in (("open", o), ("high", h), ("low", lo), ("close", c)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"bar {when}: {name} {value} cannot be traded on")
        if not (math.isfinite(spread) and spread >= 0):
            raise ValueError(f"bar {when}: spread {spread} cannot be traded on")
        if self._buffers is None:
            n = len(self.opens)
            self._buffers = {f: np.zeros(max(64, 2 * n)) for f in _FIELDS}
            for name, values in zip(_FIELDS, self._columns(), strict=True):
                self._buffers[name][:n] = values
            self._ns = list(self.time.as_unit("ns").asi8)
        stamp = int(pd.Timestamp(when).as_unit("ns").value)
        if stamp <= self._ns[-1]:
            raise ValueError(f"bar {when} does not follow the last bar {self.time[-1]}")
        t = len(self._ns)
        capacity = len(self._buffers["open"])
        if t == capacity:
            for name in _FIELDS:
                grown = np.zeros(2 * capacity)
                grown[:t] = self._buffers[name][:t]
                self._buffers[name] = grown
        for name, value in zip(_FIELDS, (o, h, lo, c, spread), strict=True):
            self._buffers[name][t] = value
        self._ns.append(stamp)
        self._views(t + 1)
        return t

    def complete(self, t: int, high: float, low: float, close: float) -> None:
        """Bar ``t``, the last one, closed: its range (widened to its open) and close."""
        if t != len(self.opens) - 1:
            raise ValueError(f"bar {t} is not the bar forming (that is {len(self.opens) - 1})")
        o = self.opens[t]
        self.highs[t], self.lows[t], self.closes[t] = max(high, o), min(low, o), close

    def _columns(self) -> tuple[np.ndarray, ...]:
        return self.opens, self.highs, self.lows, self.closes, self.spread

    def _views(self, n: int) -> None:
        buf = self._buffers
        self.opens, self.highs, self.lows, self.closes = (buf[f][:n] for f in _FIELDS[:4])
        self.spread = buf["spread"][:n]
        self.open_spread = self.close_spread = self.spread
        self.time = pd.DatetimeIndex(np.array(self._ns, dtype="datetime64[ns]")).tz_localize("UTC")
        self.day = (np.asarray(self._ns, dtype=np.int64) // DAY_NS).astype(np.int64)


def check_prices(time: pd.DatetimeIndex, o, h, lo, c, spread_points) -> None:
    """Refuse bars a fill could read garbage from: a NaN, infinite or non-positive price, a bad spread."""
    for name, values in (("open", o), ("high", h), ("low", lo), ("close", c), ("spread", spread_points)):
        values = np.asarray(values, dtype=float)
        bad = ~np.isfinite(values) | ((values < 0) if name == "spread" else (values <= 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"bar {i} ({time[i]}): {name} {values[i]} cannot be traded on")
