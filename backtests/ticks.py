"""MetaTrader's "Every tick based on real ticks" model: fills, pending orders and SL/TP worked through ticks.

The broker works in whole points (``backtests.broker.market``): each tick's bid and ask as points, and the
same prices as decimals for the EA's ``on_tick``.

The EA still decides on the bars of its own timeframe: ``on_bar`` runs at each bar's first tick, whose bid
and ask are then the market (market orders fill there). After it, the bar's ticks are worked in time
order, and an EA that overrides ``on_tick`` gets each of them (``strategies.trade.Tick``), the first one
included, after ``on_bar``. Each tick is a price the market jumped to, so the broker's rules for an
opening price apply to it (``Broker.at_open_checks``, the same code as a bar's open): a stop order or a
stop-loss reached by a tick fills at that tick's price (with the slippage of the jump), a limit order or
a take-profit at that price too (never worse than its own), as MetaTrader's tester fills on real ticks.
Buy orders and short positions' stops compare the ask, the rest the bid; the spread is each tick's own
(or the fixed ``--spread``). A bar without ticks falls back to the open-prices rules on its own high and
low; the share of bars with ticks is the history quality the report states.

Ticks are arrays, never rows: without ``on_tick`` only the ticks that can change something are visited. The
working levels are reduced to four thresholds (the lowest level the bid or the ask may rise to, the
highest it may fall to; the stop-out price taken at the bar's widest spread), plus the first expiry, and
a vectorised search over windows of growing size finds the first tick that reaches one. With ``on_tick``
the hook runs on every tick (the user's choice) and the search runs again only after the EA changed an
order or a position (``Broker.revision``).
"""

from __future__ import annotations

import math
from itertools import repeat

import numpy as np
import pandas as pd

from backtests.broker.market import scale_of
from backtests.paths import PricePath
from datafeeds.ticks import TickDataError
from strategies.errors import EARuntimeError
from strategies.trade import Tick

_NAN = float("nan")
_FIRST_WINDOW = 64  # ticks searched at once at first; each further window is 8 times as long


class TickPath(PricePath):
    """Ticks grouped by the bars of the EA's timeframe; ``hook`` is the EA when it overrides ``on_tick``."""

    def __init__(
        self, bar_time: pd.DatetimeIndex, ticks: pd.DataFrame, point: float, fixed_spread: int | None
    ):
        missing = [c for c in ("bid", "ask") if c not in ticks.columns]
        if missing or not isinstance(ticks.index, pd.DatetimeIndex):
            need = "a time index and columns bid, ask"
            raise ValueError(f"ticks need {need} (missing: {', '.join(missing) or 'time index'})")
        meta = ticks.attrs.get("ticks")
        origin = getattr(meta, "source", "ticks")
        index = ticks.index if ticks.index.tz is not None else ticks.index.tz_localize("UTC")
        self.ns = index.as_unit("ns").asi8
        bid = ticks["bid"].to_numpy(dtype=np.float64)
        ask = ticks["ask"].to_numpy(dtype=np.float64)
        bad = ~(np.isfinite(bid) & np.isfinite(ask) & (bid > 0) & (ask >= bid))
        back = np.r_[False, self.ns[1:] < self.ns[:-1]]
        for rows, problem in ((bad, "prices cannot be traded on"), (back, "ticks out of time order")):
            if rows.any():
                raise TickDataError(origin, problem, ticks.iloc[np.flatnonzero(rows)[:5]][["bid", "ask"]])
        # Whole points for the broker; the same prices as the decimals they are for the EA's ticks.
        scale = scale_of(point)
        self.bid_points = np.rint(bid * scale)
        if fixed_spread is None:
            self.ask_points = np.rint(ask * scale)
        else:
            self.ask_points = self.bid_points + fixed_spread
        self.bid, self.ask = self.bid_points / scale, self.ask_points / scale
        self.group(bar_time, self.ns)
        outside = (self.ns < self.edges_ns[0]) | (self.ns >= self.edges_ns[-1])
        if outside.any():
            raise TickDataError(
                origin,
                f"ticks outside the bars ({bar_time[0]} .. the close of the bar of {bar_time[-1]})",
                ticks.iloc[np.flatnonzero(outside)[:5]][["bid", "ask"]],
            )
        self.reset()

    reach = None  # per bar: (bid low, bid high, ask low, ask high, last tick's ns), after ``screen_bars``

    def reset(self) -> None:
        self._bar_spread: tuple[int, float] = (-1, 0.0)

    def row_spreads(self) -> np.ndarray:
        return self.ask_points - self.bid_points

    def quote_before(self, t: int) -> tuple[float, float] | None:
        """(bid, ask) in points of the last tick before bar ``t``; None before the first."""
        r = int(self.starts[t]) - 1
        return None if r < 0 else (float(self.bid_points[r]), float(self.ask_points[r]))

    # -- the broker's hooks ----------------------------------------------------------------------------
    def open_bar(self, broker, t: int) -> tuple | None:
        """Bar ``t`` opens at its first tick: it is the market for ``on_bar`` and the checks at the open."""
        s = self.starts[t]
        if s == self.starts[t + 1]:
            return None
        broker.now = Tick.at(int(self.ns[s]), float(self.bid[s]), float(self.ask[s]))
        bid = float(self.bid_points[s])
        return (bid, bid, bid, float(self.ask_points[s]) - bid)

    def walk(self, broker, t: int) -> None:
        """Bar ``t`` after ``on_bar``: its ticks in time order (its first tick was checked at the open)."""
        s, e = int(self.starts[t]), int(self.starts[t + 1])
        broker.walking = True
        try:
            if self.hook is None:
                i = s + 1
                while i < e and broker.book:
                    j = self._next_touch(broker, t, i, e)
                    if j >= e:
                        break
                    self._tick(broker, t, j)
                    i = j + 1
            else:
                self._walk_hooked(broker, t, s, e)
        finally:
            broker.walking = False
            broker.now = None

    # -- walking -----------------------------------------------------------------------------------------
    def _walk_hooked(self, broker, t: int, s: int, e: int) -> None:
        """Every tick of the bar through ``on_tick``; the levels are searched between the EA's changes."""
        rows = (self.ns[s:e].tolist(), self.bid[s:e].tolist(), self.ask[s:e].tolist())
        i = s  # the next tick whose hook has not run
        while i < e:
            busy = bool(broker.book)
            a = max(i, s + 1)
            # nothing held: only a midnight stops it (the EA may open a position after it, owing no night)
            j = self._next_touch(broker, t, a, e) if busy else self.next_midnight(broker, a, e)
            k = self._hooks(broker, t, s, i, j, rows)
            if k < j:  # the EA changed an order or a position at tick k - 1: search its levels again
                i = k
                continue
            if j >= e:
                break
            self._tick(broker, t, j)
            self._hooks(broker, t, s, j, j + 1, rows)
            i = j + 1

    def _hooks(self, broker, t: int, s: int, i: int, j: int, rows) -> int:
        """``on_tick`` for ticks ``i..j-1``; returns where it stopped: ``j``, or the tick after one at which
        the EA changed something (its levels must be searched again)."""
        ns, bid, ask = rows
        ea = self.hook
        hook = ea.on_tick
        revision = broker.revision
        a, b = i - s, j - s
        # The ticks are built in C (zip, map): the loop body is the hook and one comparison.
        fields = zip(ns[a:b], bid[a:b], ask[a:b], repeat(_NAN), repeat(0.0))
        k = i
        try:
            for k, tick in enumerate(map(tuple.__new__, repeat(Tick), fields), i):
                broker.now = tick
                hook(tick)
                if broker.revision != revision:
                    return k + 1
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # as call_hook words it, without its cost on every tick
            when = pd.Timestamp(ns[k - s], tz="UTC")
            raise EARuntimeError(
                type(ea).__name__, "on_tick", f"at tick {when} of bar {t} ({broker.time[t]})", exc, t, when
            ) from exc
        return j

    def tick(self, broker, t: int, j: int) -> None:
        """Work tick ``j`` of bar ``t`` on ``broker`` (the caller set ``walking``), as ``walk`` does."""
        self._tick(broker, t, j)

    def _tick(self, broker, t: int, j: int) -> None:
        """Tick ``j``: expiries, then pending orders, stops and the stop-out at its prices."""
        broker.now = Tick.at(int(self.ns[j]), float(self.bid[j]), float(self.ask[j]))
        if j in broker.midnights:  # the rollover, at the day's first tick: before anything at that tick
            broker.midnight(broker.midnights[j], int(self.ns[j]))
        if broker.book.orders and broker.book.first_expiry() is not None:
            broker.expire(t, now=pd.Timestamp(int(self.ns[j]), tz="UTC"))
        bid = float(self.bid_points[j])
        broker.quote = (bid, bid, bid, float(self.ask_points[j]) - bid)
        broker.at_open_checks(t)

    def next_touch(self, broker, t: int, i: int, e: int, stop_out: bool) -> int:
        """The first tick in ``i..e-1`` of bar ``t`` that can reach one of ``broker``'s levels (``e``: none);
        the stop-out counts only where ``stop_out`` (several symbols' walk rules it out for the bar). With
        ``screen_bars`` done, a bar none of whose ticks reaches a level is answered without a search. A tick
        that opens a new server day inside the bar (``midnights``) is one: the rollover falls there."""
        e = self.next_midnight(broker, i, e)
        reach = self.reach
        if reach is not None:
            up_bid, up_ask, down_bid, down_ask, expiry, wide = self._thresholds(broker, t, stop_out)
            bid_low, bid_high, ask_low, ask_high, last_ns = (r[t] for r in reach)
            if (
                up_bid > bid_high
                and up_ask > ask_high
                and down_bid < bid_low
                and down_ask < ask_low
                and (expiry is None or expiry > last_ns)
                and wide > ask_high - bid_low
            ):
                return e
        return self._next_touch(broker, t, i, e, stop_out)

    def screen_bars(self) -> None:
        """Per bar, its ticks' lowest and highest bid and ask and its last tick's time (``reach``), so that
        ``next_touch`` passes over a bar whose ticks reach no level (a multi-symbol walk searches each
        symbol's bar again after every event of any symbol)."""
        first, end = self.starts[:-1], self.starts[1:]
        covered = np.flatnonzero(end > first)
        n = len(first)
        lows, highs = np.full((2, n), np.inf), np.full((2, n), -np.inf)
        last = np.full(n, np.iinfo(np.int64).max)
        if len(covered):
            rows = slice(0, int(end[-1]))
            at = first[covered]
            for k, side in enumerate((self.bid_points[rows], self.ask_points[rows])):
                lows[k, covered] = np.minimum.reduceat(side, at)
                highs[k, covered] = np.maximum.reduceat(side, at)
            last[covered] = self.ns[end[covered] - 1]
        self.reach = (lows[0].tolist(), highs[0].tolist(), lows[1].tolist(), highs[1].tolist(), last.tolist())

    def _next_touch(self, broker, t: int, i: int, e: int, stop_out: bool = True) -> int:
        """The first tick in ``i..e-1`` at which something can happen now (``e`` when none can)."""
        e = self.next_midnight(broker, i, e)
        up_bid, up_ask, down_bid, down_ask, expiry, wide = self._thresholds(broker, t, stop_out)
        window = _FIRST_WINDOW
        while i < e:
            k = min(e, i + window)
            hit = np.zeros(k - i, dtype=bool)
            bid, ask = self.bid_points[i:k], self.ask_points[i:k]
            if up_bid < math.inf:
                hit |= bid >= up_bid
            if up_ask < math.inf:
                hit |= ask >= up_ask
            if down_bid > -math.inf:
                hit |= bid <= down_bid
            if down_ask > -math.inf:
                hit |= ask <= down_ask
            if expiry is not None:
                hit |= self.ns[i:k] >= expiry
            if wide < math.inf:
                hit |= ask - bid >= wide
            first = int(np.argmax(hit))
            if hit[first]:
                return i + first
            i, window = k, window * 8
        return e

    def _thresholds(
        self, broker, t: int, stop_out: bool = True
    ) -> tuple[float, float, float, float, int | None, float]:
        """(lowest level the bid / ask may rise to, highest level the bid / ask may fall to, first expiry
        in UTC ns, the spread at which a hedged account is stopped out): what ``at_open_checks`` reacts to."""
        up_bid = up_ask = math.inf
        down_bid = down_ask = -math.inf
        expiry = None
        book, funds = broker.book, broker.funds
        for o in book.orders:
            rises = o.type.above  # buy stop, sell limit: reached from below
            if o.side > 0:
                up_ask, down_ask = (
                    (min(up_ask, o.price), down_ask) if rises else (up_ask, max(down_ask, o.price))
                )
            else:
                up_bid, down_bid = (
                    (min(up_bid, o.price), down_bid) if rises else (up_bid, max(down_bid, o.price))
                )
            if o.expiration is not None:
                ns = int(o.expiration.value)
                expiry = ns if expiry is None else min(expiry, ns)
        net = 0.0
        for p in book.positions:
            net += p.side * p.lots
            if p.side > 0:  # a long closes at the bid
                if p.sl is not None:
                    down_bid = max(down_bid, p.sl)
                if p.tp is not None:
                    up_bid = min(up_bid, p.tp)
            else:  # a short at the ask
                if p.sl is not None:
                    up_ask = min(up_ask, p.sl)
                if p.tp is not None:
                    down_ask = max(down_ask, p.tp)
        wide = math.inf
        if stop_out and book.positions and broker.stop_out_on:
            spread = self._widest(t)
            if abs(net) > 1e-12:
                cross = funds.stop_out_price(spread, broker)  # the widest spread brings it nearest
                if cross is not None and net > 0:
                    down_bid = max(down_bid, cross)
                elif cross is not None:
                    up_bid = min(up_bid, cross)
            else:  # hedged: only the spread moves the equity
                cross = funds.stop_out_spread(broker)
                wide = math.inf if cross is None else cross
        return up_bid, up_ask, down_bid, down_ask, expiry, wide

    def _widest(self, t: int) -> float:
        """The widest spread among bar ``t``'s ticks (cached for the bar)."""
        if self._bar_spread[0] != t:
            s, e = self.starts[t], self.starts[t + 1]
            spreads = self.ask_points[s:e] - self.bid_points[s:e]
            self._bar_spread = (t, float(spreads.max()) if e > s else 0.0)
        return self._bar_spread[1]
