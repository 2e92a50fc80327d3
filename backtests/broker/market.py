"""One symbol's bars as the broker trades them: bid OHLC and spreads in whole points, UTC times, days.

MetaTrader keeps prices as integers of points; so does the broker. ``o``, ``h``, ``lo``, ``c`` (bid) and the
spreads ``s`` are whole numbers of points held in float64 arrays (exact up to 2^53), so ``bid + spread`` is
exact and a level 10 points above 1.11851 is reached at 1.11861, where as floats ``1.11851 + 10 points`` is
1.1186099999... and never reaches it. Prices leave the broker as ``points / scale``, the double nearest to
the decimal price (the same double as the literal ``1.11861``). ``opens``, ``highs``, ``lows``, ``closes``
and ``spread`` are those prices (``spread`` in price units) for readers of the bars.

The arrays are built once for a backtest; a paper account grows them one bar at a time through ``append``
and ``complete``, so the broker never needs to know where its bars come from.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from backtests.broker.config import AccountConfig
from datafeeds.clock import UTC, BrokerClock
from neuronet.errors import NeuronetError

_FIELDS = ("o", "h", "lo", "c", "s")


def server_days(utc_ns: np.ndarray, clock: BrokerClock) -> np.ndarray:
    """The broker's server day (days since 1970-01-01 in its clock) of each UTC time: a UTC+2 server's day
    begins at 22:00 UTC, and its rollover is then (swap, "today")."""
    seconds = np.asarray(utc_ns, dtype=np.int64) // 1_000_000_000
    return (clock.to_broker_seconds(seconds) // 86_400).astype(np.int64)


def scale_of(point: float) -> int:
    """Points per price unit: 100,000 for a point of 0.00001."""
    return round(1.0 / point)


TAIL = 64  # bars per step of ``Extremes.tails``


class Extremes(NamedTuple):
    """Per bar, in points: the lowest and highest bid of its open and range, the same for the ask (the open
    at its opening spread, the range at the bar's), and the widest spread of any bar. ``tails`` holds the
    same four from every ``TAIL``-th bar to the last, one row each: ``tails[t // TAIL]`` bounds every bar
    from ``t`` on (and a few before it) at once."""

    bid_low: np.ndarray
    bid_high: np.ndarray
    ask_low: np.ndarray
    ask_high: np.ndarray
    widest: float
    tails: list[tuple[float, float, float, float]]


class Market:
    """Bars of one symbol in whole points (see the module docstring), with ``day`` the day each bar opens
    on. ``spread_points`` are the candles' spreads: the account's fixed ``spread`` replaces them, and
    candles that carry none at all trade with its ``missing_spread`` (``spread_source`` says which:
    "fixed", "missing" or "bars").

    ``s_open`` and ``s_close`` are the spreads at each bar's open (its decision) and at its close (its
    valuation). They are the bar's own spread until finer data gives them (``use_spreads``): a bar's
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
        clock: BrokerClock = UTC,
    ):
        n = len(open_)
        pts = np.asarray(spread_points, float)
        self.spread_source = "fixed" if config.spread is not None else "bars" if pts.any() else "missing"
        if self.spread_source != "bars":
            pts = np.full(n, float(config.missing_spread if config.spread is None else config.spread))
        check_prices(time, open_, high, low, close, pts, point)
        self.point = point
        self.scale = scale_of(point)
        self.fixed_spread = config.spread
        self.o, self.h, self.lo, self.c = (
            self.to_points(np.asarray(a, float)) for a in (open_, high, low, close)
        )
        self.s = np.rint(pts)
        self.s_open = self.s_close = self.s
        self.s_wide = self.s  # the widest spread of any price the bar models (its minutes' or ticks')
        self.time = time
        self.clock = clock
        self.day = server_days(time.as_unit("ns").asi8, clock)
        # Where the symbol has no bar of its own (bars of an account's timeline where only its other symbols
        # traded: flat at the last close, no trading; ``close_gaps``), and the last bar before each it had
        self.closed: np.ndarray | None = None
        self.prev: np.ndarray | None = None
        self.first = 0  # the symbol's first bar of its own: before it, it has no quote yet
        self._buffers: dict[str, np.ndarray] | None = None  # made by the first ``append``
        self._ns: list[int] = []
        self.changes = 0  # counts changes of the prices (a paper account's bars): ``extremes`` follows them
        self._extremes: Extremes | None = None

    def __len__(self) -> int:
        return len(self.o)

    def close_gaps(self, closed: np.ndarray) -> None:
        """Mark the bars at which the symbol had none of its own (``backtests.alignment``): requests there
        are refused (market closed), nothing is checked on them, and a swap is charged from the last bar the
        symbol had."""
        closed = np.asarray(closed, dtype=bool)
        if not closed.any():
            return
        self.closed = closed
        self.first = int(np.argmin(closed))
        own = np.where(~closed, np.arange(len(closed)), -1)
        last = np.maximum.accumulate(own)
        self.prev = np.concatenate(([0], np.maximum(last[:-1], 0)))

    # -- prices ----------------------------------------------------------------------------------------------
    def to_points(self, prices: np.ndarray) -> np.ndarray:
        """Prices to whole points (rounded to the nearest: the grid a quote lies on)."""
        scaled = np.multiply(prices, self.scale, dtype=float)
        return np.rint(scaled, out=scaled)

    opens = property(lambda self: self.o / self.scale)
    highs = property(lambda self: self.h / self.scale)
    lows = property(lambda self: self.lo / self.scale)
    closes = property(lambda self: self.c / self.scale)
    spread = property(lambda self: self.s / self.scale)  # price units

    def use_spreads(
        self, at_open: np.ndarray, at_close: np.ndarray, widest: np.ndarray | None = None
    ) -> None:
        """Each bar's spread at its open and at its close from finer data (points; NaN where the bar has
        none, which keeps its own spread), and the widest of its minutes or ticks (``s_wide``: the highest
        ask inside the bar is its high at that spread, not at the bar's own). A fixed spread stays fixed."""
        if self.fixed_spread is None:
            self.s_open = np.where(np.isnan(at_open), self.s, at_open)
            self.s_close = np.where(np.isnan(at_close), self.s, at_close)
            if widest is not None:
                self.s_wide = np.fmax(self.s, widest)
            self._changed()

    def extremes(self) -> Extremes:
        """Each bar's lowest and highest bid and ask over its open and its range, made once (per change of
        the prices): what a position's levels are screened against (``backtests.broker.calm``)."""
        if self._extremes is None:
            o, h, lo, s, s_open = self.o, self.h, self.lo, self.s, self.s_open
            widest = float(max(s.max(), s_open.max())) if len(s) else 0.0
            columns = _extreme_columns(o, h, lo, s, s_open)
            self._extremes = Extremes(*columns, widest, _tails(columns))
        return self._extremes

    def release(self) -> None:
        """Let the extremes go once the bar loop is over (a finished run's report never reads them): they
        are made again, the same, if asked for later."""
        self._extremes = None

    def _changed(self) -> None:
        self.changes += 1
        self._extremes = None

    def close_quote(self, t: int) -> tuple[float, float]:
        """Bar ``t``'s bid and ask at its close (points), where its end-of-test deals are made."""
        return self.c.item(t), self.c.item(t) + self.s_close.item(t)

    # -- growth (a paper account's bars) ---------------------------------------------------------------------
    def spread_points(self, quoted: float) -> float:
        """The spread a new bar trades with, in points: the account's fixed spread when set, else the
        quoted one (points)."""
        if self.fixed_spread is not None:
            return float(self.fixed_spread)
        return float(round(quoted)) if math.isfinite(quoted) else quoted

    def append(self, when: pd.Timestamp, o: float, h: float, lo: float, c: float, spread: float) -> int:
        """A new bar after the last one (prices, ``spread`` in points); returns its index. Raises ValueError
        naming the bar for a price that cannot be traded on or a time that does not follow."""
        for name, value in (("open", o), ("high", h), ("low", lo), ("close", c)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"bar {when}: {name} {value} cannot be traded on")
        if not (math.isfinite(spread) and spread >= 0):
            raise ValueError(f"bar {when}: spread {spread} cannot be traded on")
        if self._buffers is None:
            n = len(self.o)
            self._buffers = {f: np.zeros(max(64, 2 * n)) for f in _FIELDS}
            for name in _FIELDS:
                self._buffers[name][:n] = getattr(self, name)
            self._ns = list(self.time.as_unit("ns").asi8)
        stamp = int(pd.Timestamp(when).as_unit("ns").value)
        if stamp <= self._ns[-1]:
            raise ValueError(f"bar {when} does not follow the last bar {self.time[-1]}")
        t = len(self._ns)
        capacity = len(self._buffers["o"])
        if t == capacity:
            for name in _FIELDS:
                grown = np.zeros(2 * capacity)
                grown[:t] = self._buffers[name][:t]
                self._buffers[name] = grown
        prices = (round(v * self.scale) for v in (o, h, lo, c))
        for name, value in zip(_FIELDS, (*prices, spread), strict=True):
            self._buffers[name][t] = value
        self._ns.append(stamp)
        self._views(t + 1)
        return t

    def complete(self, t: int, high: float, low: float, close: float) -> None:
        """Bar ``t``, the last one, closed: its range (widened to its open) and close (prices)."""
        if t != len(self.o) - 1:
            raise ValueError(f"bar {t} is not the bar forming (that is {len(self.o) - 1})")
        o = self.o[t]
        self.h[t] = max(round(high * self.scale), o)
        self.lo[t] = min(round(low * self.scale), o)
        self.c[t] = round(close * self.scale)
        self._changed()

    def _views(self, n: int) -> None:
        buf = self._buffers
        self.o, self.h, self.lo, self.c, self.s = (buf[f][:n] for f in _FIELDS)
        self.s_open = self.s_close = self.s_wide = self.s
        self.time = pd.DatetimeIndex(np.array(self._ns, dtype="datetime64[ns]")).tz_localize("UTC")
        self.day = server_days(np.asarray(self._ns, dtype=np.int64), self.clock)
        self._changed()


def _extreme_columns(o, h, lo, s, s_open) -> tuple[np.ndarray, ...]:
    """``Extremes``' four columns. Where every bar's range holds its open (the low at or below it, the
    high at or above it) and the open's spread is the bar's, the bid's are the low and the high themselves
    and the ask's the low and the high plus the spread (a sum is monotone: ``lo <= o`` gives
    ``lo + s <= o + s``), the same values without the four columns and their sums made whole."""
    inside = bool((lo <= o).all() and (h >= o).all())
    if inside and s_open is s:
        return lo, h, lo + s, h + s
    return (np.minimum(o, lo), np.maximum(o, h), np.minimum(o + s_open, lo + s),
            np.maximum(o + s_open, h + s))  # fmt: skip


def _tails(columns: tuple[np.ndarray, ...]) -> list[tuple[float, float, float, float]]:
    """``Extremes.tails`` of the four columns (lowest, highest, lowest, highest): each step's extreme, then
    accumulated from the last step back."""
    n = len(columns[0])
    if not n:
        return []
    starts = np.arange(0, n, TAIL)
    out = []
    for values, pick in zip(columns, (np.minimum, np.maximum, np.minimum, np.maximum), strict=True):
        steps = pick.reduceat(values, starts)
        out.append(pick.accumulate(steps[::-1])[::-1].tolist())
    return list(zip(*out, strict=True))


class BarPriceError(NeuronetError, ValueError):
    """Bars the broker cannot trade on: a price that is not a price, or one off the symbol's point grid."""


def off_grid(prices: np.ndarray, point: float) -> np.ndarray:
    """Where prices do not lie on the grid of ``point`` (beyond a millionth of a point of float noise)."""
    scaled = np.asarray(prices, dtype=float) * scale_of(point)
    return np.abs(scaled - np.rint(scaled)) > 1e-6


def check_prices(time: pd.DatetimeIndex, o, h, lo, c, spread_points, point: float) -> None:
    """Refuse bars a fill could read garbage from: a NaN, infinite or non-positive price, a bad spread, a
    price between the symbol's points (its digits say otherwise: 1.0939734 is no 5-digit price)."""
    for name, values in (("open", o), ("high", h), ("low", lo), ("close", c), ("spread", spread_points)):
        values = np.asarray(values, dtype=float)
        bad = ~np.isfinite(values) | ((values < 0) if name == "spread" else (values <= 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise BarPriceError(f"bar {i} ({time[i]}): {name} {values[i]} cannot be traded on")
        between = off_grid(values, 1.0 if name == "spread" else point)
        if between.any():
            i = int(np.argmax(between))
            digits = max(0, round(-math.log10(point)))
            unit = "whole points" if name == "spread" else f"{digits}-digit prices (point {point:g})"
            raise BarPriceError(
                f"bar {i} ({time[i]}): {name} {float(values[i])!r} is not on the symbol's grid of {unit}; "
                "round the prices to the symbol's digits, or give the digits they have"
            )
