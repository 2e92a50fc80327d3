"""MetaTrader's "1 minute OHLC" model: each bar's fills worked through its M1 bars.

Prices are whole points of the symbol, as in the broker (``backtests.broker.market``).

The EA still decides at the open of each bar of its own timeframe (market orders fill at that open). After
the decision, pending orders, SL/TP and the stop-out are checked along the bar's M1 bars in time order, each
M1 bar as four prices in the order MetaTrader's tester generates them (MetaTrader 5 Help, "Strategy Tester >
Generation of Ticks": a bull candlestick goes open, low, high, close; a bear one open, high, low, close; a
doji, close = open, the other way than the candlestick before it). Between two prices the path is a
straight move, so a level it crosses fills at the level and the order of events is known: the pessimistic
"stop-loss first" rule of the open-prices model is not needed. A jump from one M1 bar's close to the next
one's open is a gap (a stop fills at the open). Spreads are each M1 bar's own (or the fixed spread).

A bar without M1 data falls back to the open-prices rules on its own high and low; the share of bars with
M1 data is the history quality the report states (MetaTrader's "History Quality"). A fill inside a bar is
recorded at the time of the M1 bar it happened in (orders, deals and trades tables).

``PricePath`` is what the M1 path and the tick path (``backtests.ticks``) share: the grouping of their
rows by the bars of the EA's timeframe, the coverage, and the broker's hooks.

Only minutes that can matter are walked: a vectorised test finds the next M1 bar whose range (with the
gap from the previous close, widened by the spread) reaches any working level — a pending price, an SL or
TP, the stop-out price — so a bar with nothing near its levels costs a few NumPy operations.
"""

from __future__ import annotations

import bisect
import copy
import itertools

import numpy as np
import pandas as pd

from backtests.broker.market import scale_of, server_days
from neuronet.errors import NeuronetError

MODELS = {"open": "Open prices only", "ohlc1m": "1 minute OHLC", "ticks": "Every tick based on real ticks"}
COVERAGE = {"ohlc1m": "M1 bars", "ticks": "ticks"}  # what the history quality counts, per model


# The finer data must be of the candles' market: a bar's first M1 open or tick bid more than this share
# away from the bar's open (median over the bars) is another instrument or another price scale. Bars whose
# first prices sit typically more than SHIFTED_CLOCK of a bar's range from the opens, while moving the finer
# data by whole hours brings a quarter of the bars within half that gap, are a file read in another clock.
OTHER_MARKET = 0.01
SHIFTED_CLOCK = 0.5
CLOCK_SHIFTS_H = [h for h in range(-14, 15) if h]  # broker clocks run UTC-12 .. UTC+14


class ModelDataError(NeuronetError, ValueError):
    """The modelling mode's data is missing, of another symbol, or does not fit the candles."""


def check_model(model: str, m1: pd.DataFrame | None, ticks: pd.DataFrame | None = None) -> str:
    """The modelling mode by its command-line name; "ohlc1m" needs M1 candles, "ticks" needs ticks."""
    if model not in MODELS:
        raise ModelDataError(f"unknown model {model!r}: choose {', '.join(MODELS)}")
    if model == "ohlc1m" and m1 is None:
        raise ModelDataError("model 'ohlc1m' needs M1 candles of the same symbol (m1=...)")
    if model == "ticks" and ticks is None:
        raise ModelDataError(
            "model 'ticks' needs ticks of the same symbol (ticks=..., see datafeeds.load_ticks)"
        )
    if model != "ohlc1m" and m1 is not None:
        raise ModelDataError("M1 candles are only used by model 'ohlc1m'")
    if model != "ticks" and ticks is not None:
        raise ModelDataError("ticks are only used by model 'ticks'")
    return model


def check_market(candles: pd.DataFrame, meta, fine: pd.DataFrame, what: str) -> None:
    """Refuse M1 bars or ticks (``what``) that are not the candles' market: another symbol by name, another
    timeframe than M1, or prices that cannot be the candles' (another instrument, other digits, times in
    another clock). Only bars with finer data are compared; an empty frame is refused."""
    if not len(fine):
        raise ModelDataError(f"the {what} are empty: nothing to work the fills through")
    fine_meta = fine.attrs.get("ticks") or fine.attrs.get("candles")
    name = getattr(fine_meta, "symbol", None)
    if name and meta.symbol and name.upper() != meta.symbol.upper():
        raise ModelDataError(
            f"the {what} are of {name}, the candles of {meta.symbol}: give {what} of {meta.symbol}"
        )
    frame = getattr(fine_meta, "timeframe", None)
    if frame is not None and getattr(frame, "name", "M1") != "M1":
        raise ModelDataError(f"the {what} are {frame.name} bars, not M1")
    column = "bid" if "bid" in fine.columns else "open"
    if column not in fine.columns or not isinstance(fine.index, pd.DatetimeIndex):
        return  # the path refuses it, naming what is missing
    price = fine[column].to_numpy(dtype=np.float64)
    index = fine.index if fine.index.tz is not None else fine.index.tz_localize("UTC")
    fine_ns, bar_ns = index.as_unit("ns").asi8, candles.index.as_unit("ns").asi8
    ok, seen = _first_prices(fine_ns, price, bar_ns, 0)
    if not ok.any():
        return  # no bar covered: the history quality says 0 %
    opens = candles["open"].to_numpy(dtype=np.float64)
    gap = np.abs(seen[ok] - opens[ok])
    rel = float(np.median(gap / opens[ok]))
    if rel > OTHER_MARKET:
        # the first bar whose first row is that far off: the file, its row and the symbol, so a user with
        # several symbols' files knows which one to look at
        far = np.zeros(len(ok), dtype=bool)
        far[ok] = gap / opens[ok] > OTHER_MARKET
        k = int(np.argmax(far)) if far.any() else int(np.argmax(ok))
        row = int(np.searchsorted(fine_ns, bar_ns[k], side="left"))
        origin = getattr(fine_meta, "source", "") or what
        raise ModelDataError(
            f"{origin}: row {row + 1} ({fine.index[row]}): the {what} do not fit the {meta.symbol} candles: "
            f"the {meta.symbol} bar {candles.index[k]} opens at {opens[k]:.{meta.digits}f} but its first row "
            f"is at {seen[k]:.{meta.digits}f} (median gap {100 * rel:.1f}% over {int(ok.sum())} bars); "
            "another symbol or other price digits?"
        )
    bar_range = float(np.median((candles["high"] - candles["low"]).to_numpy(dtype=np.float64)[ok]))
    typical = float(np.median(gap))
    if not (bar_range > 0 and typical > SHIFTED_CLOCK * bar_range):
        return
    fits = {}  # hours moved -> (median, lower quartile) of the gaps
    for hours in CLOCK_SHIFTS_H:
        moved, at = _first_prices(fine_ns, price, bar_ns, hours * 3_600_000_000_000)
        if moved.sum() >= 4:
            gaps = np.abs(at[moved] - opens[moved])
            fits[hours] = (float(np.median(gaps)), float(np.quantile(gaps, 0.25)))
    best = min(fits, key=lambda h: fits[h][0], default=None)
    if best is not None and fits[best][1] < 0.5 * typical:
        raise ModelDataError(
            f"the {what} do not line up with the {meta.symbol} candles: the first of each bar is "
            f"typically {typical / meta.point:.0f} points from the bar's open (median bar range "
            f"{bar_range / meta.point:.0f} points), and they fit best moved {-best:+d} h: are they "
            "stamped in another clock? (--broker-tz applies to candle, M1 and tick files alike)"
        )


def _first_prices(fine_ns: np.ndarray, price: np.ndarray, bar_ns: np.ndarray, shift: int):
    """``(covered, price)`` per bar: whether rows fall in ``[open, next open)`` moved by ``shift`` ns, and
    the first such row's price (NaN where none)."""
    starts = bar_ns + shift
    first = np.searchsorted(fine_ns, starts, side="left")
    nxt = np.append(starts[1:], np.iinfo(np.int64).max)
    ok = first < len(price)
    ok[ok] &= fine_ns[first[ok]] < nxt[ok]
    seen = np.full(len(bar_ns), np.nan)
    seen[ok] = price[first[ok]]
    return ok, seen


def check_inside(candles: pd.DataFrame, meta, fine: pd.DataFrame, starts: np.ndarray, what: str) -> None:
    """Refuse M1 bars or ticks (``what``; grouped by bar: rows ``starts[t]:starts[t + 1]`` are bar t's)
    that reach outside their bar's range, compared on the symbol's point grid: MetaTrader builds its bars
    from its minutes and ticks, so the two always agree, and one spike beyond a bar's high must not fill an
    order the bars never reached. The message names the file, the row and both prices."""
    rows = np.arange(int(starts[0]), int(starts[-1]))
    if not len(rows):
        return
    scale = round(1.0 / meta.point)
    bar = np.searchsorted(starts, rows, side="right") - 1
    ticks = "bid" in fine.columns
    _check_grid(meta, fine, rows, scale, what, ("bid", "ask") if ticks else ("open", "high", "low", "close"))
    cols = ("bid", "bid") if ticks else ("high", "low")
    high, low = (np.rint(fine[c].to_numpy(dtype=np.float64)[rows] * scale) for c in cols)
    bar_high = np.rint(candles["high"].to_numpy(dtype=np.float64) * scale)[bar]
    bar_low = np.rint(candles["low"].to_numpy(dtype=np.float64) * scale)[bar]
    above, below = high > bar_high, low < bar_low
    bad = np.flatnonzero(above | below)
    if not len(bad):
        return
    k = int(bad[0])
    row, t = int(rows[k]), int(bar[k])
    fine_meta = fine.attrs.get("ticks") or fine.attrs.get("candles")
    origin = getattr(fine_meta, "source", "") or what
    up = bool(above[k])
    name = "bid" if ticks else ("high" if up else "low")
    price, limit = (high[k], bar_high[k]) if up else (low[k], bar_low[k])
    more = f" ({len(bad) - 1} more rows outside their bars)" if len(bad) > 1 else ""
    d = meta.digits
    raise ModelDataError(
        f"{origin}: row {row + 1} ({fine.index[row]}): {meta.symbol} {name} {price / scale:.{d}f} lies "
        f"{'above' if up else 'below'} the {'high' if up else 'low'} {limit / scale:.{d}f} of its "
        f"{meta.timeframe.name} bar {candles.index[t]}{more}: the {what} and the candles must be the same "
        f"market (MetaTrader builds its bars from its minutes and ticks); give the bars and the {what} of "
        f"one feed, or build the bars from the {what}"
    )


def _check_grid(meta, fine: pd.DataFrame, rows: np.ndarray, scale: int, what: str, cols: tuple) -> None:
    """Refuse M1 bars or ticks whose prices lie between the symbol's points (1.300005 is no 5-digit price):
    the bars are refused so (``backtests.broker.market.check_prices``), and rounding a minute or a tick
    to the grid silently would make a level it never reached (a take-profit at 1.30001) a fill."""
    for col in cols:
        if col not in fine.columns:
            continue
        values = fine[col].to_numpy(dtype=np.float64)[rows]
        scaled = values * scale
        between = np.abs(scaled - np.rint(scaled)) > 1e-6  # beyond float noise (NaN compares False)
        if between.any():
            k = int(np.argmax(between))
            row = int(rows[k])
            fine_meta = fine.attrs.get("ticks") or fine.attrs.get("candles")
            origin = getattr(fine_meta, "source", "") or what
            raise ModelDataError(
                f"{origin}: row {row + 1} ({fine.index[row]}): {meta.symbol} {col} {float(values[k])!r} is "
                f"not on the symbol's grid of {meta.digits}-digit prices (point {meta.point:g}): the {what} "
                "must be prices of the symbol's digits, as the candles are; round them, or give the digits "
                "they have"
            )


def model_data(model: str, broker, first: int, last: int, fine_spreads: bool = True) -> dict:
    """The report's modelling line: the mode by MetaTrader's name, the history quality in percent (the
    share of forward bars covered by M1 bars or ticks; the others fell back to their own OHLC) and which
    spread was traded (``spread_note``; ``fine_spreads``: whether the minutes carry spreads)."""
    path = broker.price_path
    quality = path.quality(first, last) if path is not None else None
    return {
        "model": model,
        "model_name": MODELS[model],
        "history_quality": quality,
        "history_quality_of": COVERAGE.get(model),
        "spread": spread_note(model, broker.market.spread_source, broker.config, fine_spreads),
    }


def spread_note(model: str, source: str, config, fine_spreads: bool = True) -> str:
    """Which spread a run traded with, and why (``source``: the candles' spreads were "fixed" by the
    account, "missing" or the "bars"' own)."""
    if source == "fixed":
        return f"fixed: {config.spread} points at every price (--spread)"
    if model == "ticks":
        return "each tick's own bid and ask (a bar without ticks: the bar's own spread)"
    if model == "ohlc1m" and fine_spreads:
        return (
            "each minute's own spread, at that minute; a decision at a bar's open takes its first "
            "minute's (a bar without minutes: the bar's own spread)"
        )
    if source == "missing" or model == "ohlc1m":
        what = "candles" if source == "missing" else "minutes"
        return f"{config.missing_spread} points at every price: the {what} carry no spread (missing_spread)"
    return (
        "each bar's own spread, at its open: open prices only knows nothing finer at a bar's open, and a "
        "bar's spread is the lowest MetaTrader saw during the bar (the terminal keeps each minute's lowest "
        "and builds its bars from the minutes), so it can be narrower than the spread at the open; "
        "--model ohlc1m or ticks trades the spread of the moment"
    )


def ohlc_points(o: np.ndarray, h: np.ndarray, lo: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(n, 4) prices per M1 bar in the order MetaTrader's tester walks them: a rising bar (close above its
    open) open, low, high, close; a falling bar open, high, low, close; a doji (close = open) as the
    opposite of the last bar before it that was not a doji ("If the previous candlestick was rising, this
    one is considered falling, and vice versa", MetaTrader 5 Help, "Generation of Ticks"), and as a rising
    one when no bar before it was."""
    return ohlc_rows(o, h, lo, c, ohlc_rising(o, c))


def ohlc_rising(o: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Whether ``ohlc_points`` walks each bar as a rising one (low before high): a bar's rows can then be
    made for any bars alone (``ohlc_rows``), the direction of a doji coming from the bars before it."""
    change = np.subtract(c, o)  # its sign is the bar's direction
    moved = change != 0
    # the latest bar that moved strictly before each bar (-1: none), in one array of n + 1 marks
    marks = np.arange(-1, len(o), dtype=np.int64)
    marks[1:][~moved] = -1
    before = np.maximum.accumulate(marks, out=marks)[:-1]
    fell = np.take(change < 0, before)  # a bar that did not move rises where the one before it fell
    fell[before < 0] = True  # ... or where none moved before it
    return np.where(moved, change > 0, fell)


def ohlc_rows(o: np.ndarray, h: np.ndarray, lo: np.ndarray, c: np.ndarray, rising: np.ndarray) -> np.ndarray:
    """``ohlc_points``' rows of bars given with their ``ohlc_rising``."""
    first = np.where(rising, lo, h)
    second = np.where(rising, h, lo)
    return np.column_stack([o, first, second, c])


class PricePath:
    """Rows of finer prices (M1 bars, ticks) grouped by the bars of the EA's timeframe: ``starts[t]`` to
    ``starts[t + 1]`` are bar t's. ``hook`` is the EA's per-tick hook (tick paths only)."""

    hook = None
    starts: np.ndarray

    def for_run(self, hook) -> PricePath:
        """This path for one run: a shallow copy (the price arrays shared, read-only) with the EA's per-tick
        hook and fresh per-run caches, so one ``Backtest`` builds and checks its path once for every pass."""
        run = copy.copy(self)
        run.hook = hook
        run.reset()
        return run

    def reset(self) -> None:
        """Clear what a run caches (nothing here; the tick path keeps the current bar's spread)."""

    def group(self, bar_time: pd.DatetimeIndex, row_ns: np.ndarray) -> None:
        """``starts`` from the rows' sorted UTC ns: a row belongs to the last bar opening at or before it."""
        bar_ns = bar_time.as_unit("ns").asi8
        step = int(np.median(np.diff(bar_ns))) if len(bar_ns) > 1 else 60_000_000_000
        self.edges_ns = np.append(bar_ns, bar_ns[-1] + step)  # bar opens, then the last bar's close
        self.starts = np.searchsorted(row_ns, self.edges_ns, side="left")
        self.row_ns = row_ns

    def opening_days(self, clock) -> np.ndarray:
        """The broker's server day of each bar's opening moment: its first row's (minute's or tick's), else
        the bar's opening time. A bar opening late, after the server's midnight (a missing bar before it),
        opens on the new day: the rollover's swap falls at that opening (MetaTrader charges it to the
        positions held over midnight, none opened after it), never at the next bar's."""
        first, end = self.starts[:-1], self.starts[1:]
        rows = np.append(self.row_ns, 0)[first]
        return server_days(np.where(end > first, rows, self.edges_ns[:-1]), clock)

    def midnights(self, clock) -> dict[int, int]:
        """The rows that open a new server day, with that day: inside a bar running over midnight because the
        next bar is missing, or a bar's first row. A walk stops at each, where the rollover's swap falls
        (``Broker.midnight``): a bar's opening has charged its own symbol's positions already
        (``opening_days``), but in an account of several symbols a position opened before it at a decision
        of the bar before (a symbol whose bar opens after the decision) owes that night there, and another
        symbol's bar may have opened before the midnight."""
        first, end = int(self.starts[0]), int(self.starts[-1])
        if end - first < 2:
            return {}
        days = server_days(self.row_ns[first:end], clock)
        rows = np.flatnonzero(days[1:] != days[:-1]) + first + 1
        return dict(zip(rows.tolist(), days[rows - first].tolist(), strict=True))

    @staticmethod
    def next_midnight(broker, m: int, end: int) -> int:
        """The first of ``broker``'s ``midnights`` rows in ``m..end-1`` (``end``: none)."""
        rows = broker.midnight_rows
        if not rows:
            return end
        i = bisect.bisect_left(rows, m)
        return rows[i] if i < len(rows) and rows[i] < end else end

    def opening_ns(self, t: int) -> int:
        """UTC ns of bar ``t``'s first row, else of the bar's opening: where an EA decides in bar ``t``."""
        s = self.starts[t]
        return int(self.row_ns[s]) if self.starts[t + 1] > s else int(self.edges_ns[t])

    def covers(self, t: int) -> bool:
        return self.starts[t + 1] > self.starts[t]

    def quality(self, first: int, last: int) -> float:
        """Share of bars ``first..last`` with data, in percent."""
        covered = self.starts[first + 1 : last + 2] > self.starts[first : last + 1]
        return round(100.0 * float(covered.mean()), 2) if len(covered) else 0.0

    def open_bar(self, broker, t: int) -> tuple | None:
        """The quote bar ``t`` opens at, where the path sets it (None: the bar's own open)."""
        return None

    def bar_spreads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each bar's spread (points) at its first and at its last row, and the widest of its rows; NaN for
        bars without rows."""
        first, end = self.starts[:-1], self.starts[1:]
        covered = end > first
        spread = self.row_spreads()
        at_open, at_close, widest = (np.full(len(first), np.nan) for _ in range(3))
        at_open[covered] = spread[first[covered]]
        at_close[covered] = spread[end[covered] - 1]
        if covered.any():
            widest[covered] = np.maximum.reduceat(spread[: int(end[-1])], first[covered])
        return at_open, at_close, widest

    def row_spreads(self) -> np.ndarray:
        """The spread of each row, price units."""
        raise NotImplementedError

    def walk(self, broker, t: int) -> None:
        raise NotImplementedError


class M1Path(PricePath):
    """M1 prices grouped by the bars of the EA's timeframe (``starts[t]:starts[t + 1]`` are bar t's)."""

    def __init__(self, bar_time: pd.DatetimeIndex, m1: pd.DataFrame, point: float, fixed_spread: int | None):
        missing = [c for c in ("open", "high", "low", "close", "spread") if c not in m1.columns]
        if missing or not isinstance(m1.index, pd.DatetimeIndex):
            need = "a time index and columns open, high, low, close, spread"
            raise ValueError(f"M1 candles need {need} (missing: {', '.join(missing) or 'time index'})")
        cols = {c: m1[c].to_numpy(dtype=np.float64) for c in ("open", "high", "low", "close")}
        bad = ~np.isfinite(np.column_stack(list(cols.values()))).all(axis=1)
        if bad.any() or (cols["low"] <= 0).any():
            i = int(np.argmax(bad | (cols["low"] <= 0)))
            raise ValueError(f"M1 bar {i} ({m1.index[i]}): prices cannot be traded on")
        if not m1.index.is_monotonic_increasing:
            raise ValueError("M1 bars must be in time order")
        self.group(bar_time, m1.index.as_unit("ns").asi8)
        self.time_ns = m1.index.as_unit("ns").asi8
        scale = scale_of(point)
        grid = (np.rint(cols[c] * scale) for c in ("open", "high", "low", "close"))
        self.points = ohlc_points(*grid)  # (n, 4) whole points
        if fixed_spread is None:
            self.spread = np.rint(m1["spread"].to_numpy(dtype=np.float64))  # points
        else:
            self.spread = np.full(len(m1), float(fixed_spread))
        self.time = m1.index
        self.lows = np.minimum(self.points.min(axis=1), np.append(self.points[:1, 0], self.points[:-1, 3]))
        self.highs = np.maximum(self.points.max(axis=1), np.append(self.points[:1, 0], self.points[:-1, 3]))
        self.reach = self._reach()
        first, end = self.starts[:-1], self.starts[1:]
        # each bar's first minute (UTC ns; -1: none), read once a bar as a Python int
        self.first_ns = np.where(end > first, np.append(self.time_ns, -1)[first], -1).tolist()

    def open_bar(self, broker, t: int) -> None:
        """Bar ``t`` opens at its first minute: the tester's first tick of the bar is that minute's open, at
        its time (MetaTrader 5 Help, "Real and Generated Ticks": the ticks are generated from the minute
        bars), so the checks at the open and the EA's decision are made at that moment, not at the bar's
        opening time (an order expired between the two is retired there, never filled by the gap). The
        quote is the bar's own open, the same price (None); a bar without minutes opens at its time."""
        ns = self.first_ns[t]
        if ns >= 0:
            broker.now_ns = ns

    def _reach(self) -> tuple[list[float], list[float]]:
        """Per bar, the lowest and highest price any of its minutes spans (with the gap from the previous
        close) widened by its widest spread (the previous minute's included): a bar none of whose levels lies
        inside needs no minute search (bars without minutes: an empty span)."""
        first, end = self.starts[:-1], self.starts[1:]
        covered = end > first
        low, high = np.full(len(first), np.inf), np.full(len(first), -np.inf)
        if covered.any():
            rows = slice(0, int(end[-1]))
            at = first[covered]
            # the minute before the bar's first too: its close is in ``lows``, its ask at its own spread
            # (``_next_level``)
            wide = np.maximum(np.maximum.reduceat(self.spread[rows], at), self.spread[np.maximum(at - 1, 0)])
            low[covered] = np.minimum.reduceat(self.lows[rows], at) - wide
            high[covered] = np.maximum.reduceat(self.highs[rows], at) + wide
        return low.tolist(), high.tolist()

    def row_spreads(self) -> np.ndarray:
        return self.spread

    def quote_before(self, t: int) -> tuple[float, float] | None:
        """(bid, ask) in points at the close of the last minute before bar ``t``; None before the first."""
        r = int(self.starts[t]) - 1
        if r < 0:
            return None
        close = float(self.points[r, 3])
        return close, close + float(self.spread[r])

    def walk(self, broker, t: int) -> None:
        """Bar ``t`` after the decision: every M1 bar that can reach a working level, in time order."""
        m, end = int(self.starts[t]), int(self.starts[t + 1])
        broker.walking = True
        book = broker.book
        kept = broker.inside
        try:
            while m < end and book:
                m = self._next_touch(broker, t, m, end)
                if m >= end:
                    break
                self._minute(broker, t, m)
                m += 1
        finally:
            broker.walking = False
            broker.now_ns = None
            broker.inside = kept

    def minute(self, broker, t: int, m: int) -> tuple[float, float]:
        """Work row ``m`` of bar ``t`` on ``broker`` (the caller set ``walking``), as ``walk`` does; the
        minute's closing bid and ask in points (several symbols' walks are merged in time order)."""
        if broker.book:
            broker.now_ns = int(self.time_ns[m])
            self._minute(broker, t, m)
        elif m in broker.midnights:  # nothing of its own to check: the account's night is charged
            broker.midnight(broker.midnights[m], int(self.time_ns[m]))
        close = self.points[m, 3]
        return close, close + self.spread[m]

    def next_touch(self, broker, m: int, end: int, stop_out: bool, t: int | None = None) -> int:
        """The first row of ``m..end-1`` (rows of bar ``t``, when given: its whole span is screened first)
        whose range can reach one of ``broker``'s levels (``end``: none); the stop-out level counts only
        where ``stop_out`` (a caller that has ruled it out says False)."""
        return self._next_touch(broker, t, m, end, stop_out)

    def _next_touch(self, broker, t: int | None, m: int, end: int, stop_out: bool = True) -> int:
        """The first minute from ``m`` (rows up to ``end``, of bar ``t`` when known) that can reach a working
        level, cross the stop-out level, pass an order's expiry or open a new server day (``midnights``)."""
        stop = self.next_midnight(broker, m, end)
        return stop if stop <= m else self._next_level(broker, t, m, stop, stop_out)

    def _next_level(self, broker, t: int | None, m: int, end: int, stop_out: bool) -> int:
        """``_next_touch`` but for the midnights."""
        levels = broker.book.levels()
        stop_out = bool(stop_out and broker.stop_out_on and broker.book.positions)
        first_expiry = broker.book.first_expiry() if broker.book.orders else None
        if t is not None and not stop_out and first_expiry is None:
            low, high = self.reach[0][t], self.reach[1][t]
            if not any(low <= v <= high for v in levels):
                return end  # no level inside the bar's whole span: no minute of it reaches one
        lo, hi = self.lows[m:end], self.highs[m:end]
        if levels:
            # ask-side levels: any minute's spread either way, the minute before ``m``'s too: its closing ask
            # is where the ask comes from, and a spread that narrows drops the ask through a buy limit or a
            # short's take-profit that the bids (its close is in ``lows``) never reach
            wide = self.spread[max(m - 1, 0) : end].max()
            lo_w, hi_w = lo - wide, hi + wide
            if len(levels) == 1:  # one stop, one pending price: no (minutes, levels) table to reduce
                touched = (levels[0] >= lo_w) & (levels[0] <= hi_w)
            else:
                at = np.asarray(levels, dtype=np.float64)
                touched = ((at >= lo_w[:, None]) & (at <= hi_w[:, None])).any(axis=1)
        else:
            touched = np.zeros(end - m, dtype=bool)
        if stop_out:
            # One-sided, at each minute's own spread: a price beyond the level stops out as much as one at
            # it, and a minute of wide spread stops out a hedged account that no price moves.
            touched |= broker.funds.levels_crossed(lo, hi, self.spread[m:end])
        if first_expiry is not None:
            touched |= self.time[m:end] >= first_expiry
        hit = int(np.argmax(touched))  # the first minute touched, if any is
        return m + hit if touched[hit] else end

    def _minute(self, broker, t: int, m: int) -> None:
        """Row ``m``: its expiries, then its four prices. The broker's price now is the minute's open at the
        minute's own spread (a fill's profit converted at the symbol's own price, USDJPY's yen, reads that
        spread: MetaTrader's ticks of the minute each carry its spread, never the bar's opening one)."""
        pts, spr = self.points[m], self.spread[m]
        broker.inside = (pts[0], pts[0] + spr)
        broker.now_ns = int(self.time_ns[m])
        if m in broker.midnights:  # the rollover, at the day's first price: before anything of the minute
            broker.midnight(broker.midnights[m], int(self.time_ns[m]))
        book = broker.book
        if book.orders:
            broker.expire(t, now=self.time[m])
        broker.quote = (pts[0], pts[0], pts[0], spr)
        broker.at_open_checks(t)
        for i in range(3):
            p, q = pts[i], pts[i + 1]
            if p == q:
                continue
            for a, b in _pieces(book, p, q, spr):
                if not book:
                    return
                broker.quote = (a, max(a, b), min(a, b), spr)
                broker.range_checks(t)


def _pieces(book, p: float, q: float, spread: float) -> list[tuple[float, float]]:
    """The move p -> q cut at the pending prices inside it (bid terms), so each fill ends a piece."""
    inside = sorted(
        {o.price - (spread if o.side > 0 else 0.0) for o in book.orders} - {p, q},
        reverse=bool(q < p),
    )
    cuts = [v for v in inside if min(p, q) < v < max(p, q)]
    ends = [p, *cuts, q]
    return list(itertools.pairwise(ends))
