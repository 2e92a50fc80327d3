"""Closed candles as an expert advisor sees them, and the harness's handle that decides how many are closed.

The look-ahead guard is this module's job. The harness owns a ``BarFeed`` (the whole history) and moves its
visible end with ``advance``; the EA only ever gets ``Bars`` views and indicator ``Line``s. Every array they
return is a read-only view of a *revealed copy*: a buffer of the history's size that holds the values of the
bars closed so far and NaN (NaT for times) after them, filled in lazily as the end moves. So ``.base``,
negative indexes, a ``Bars`` or array kept from an earlier bar, ``frame()`` and ``window()`` all stop at the
newest closed bar, and revealing costs one small copy per column per bar actually read (no per-bar copy of
the history). ``window`` refuses a range beyond the visible bars rather than clamping it: an EA that asks for
bars that do not exist yet has a bug that a silently shorter window would hide.

The guard is the API, not a sandbox: nothing public leads to a future bar, but Python cannot stop code that
digs through private attributes (or the garbage collector) on purpose.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pandas as pd

from strategies.errors import EAError

COLUMNS = ("open", "high", "low", "close", "tick_volume", "spread", "real_volume")
_NAT = np.iinfo(np.int64).min


class _Revealed:
    """A copy of ``source`` holding only the rows (axis 0) revealed so far; the rest is ``fill``.

    The buffer is private and writeable (revealing one row is one store); callers get slices of a read-only
    view of it, cached for the current stop, so reading a column many times in one bar costs one slice.
    """

    __slots__ = ("_buffer", "_fill", "_readonly", "_source", "_stop", "_view", "count")

    def __init__(self, source: np.ndarray, fill: Any):
        self._source = source
        self._fill = fill
        self._buffer: np.ndarray | None = None  # allocated on first use: most columns are never read
        self._readonly: np.ndarray | None = None
        self._stop = -1
        self._view: np.ndarray | None = None
        self.count = 0

    def buffer(self) -> np.ndarray:
        if self._buffer is None:
            self._buffer = np.full_like(self._source, self._fill)
            self._readonly = self._buffer.view()
            self._readonly.flags.writeable = False
        return self._buffer

    def upto(self, stop: int) -> np.ndarray:
        """The read-only rows ``0..stop-1``, revealing the ones not shown yet."""
        if stop == self._stop:
            return self._view
        buffer, count = self._buffer if self._buffer is not None else self.buffer(), self.count
        if stop == count + 1:  # the common step: one more bar closed
            buffer[count] = self._source[count]
            self.count = stop
        elif stop > count:
            buffer[count:stop] = self._source[count:stop]
            self.count = stop
        self._stop, self._view = stop, self._readonly[:stop]
        return self._view

    def grow(self, source: np.ndarray) -> None:
        """Take a longer ``source`` whose first rows are the old ones (a live history that grew).

        The revealed rows move to a new buffer; views handed out before keep the old one, which never
        shows more than it did.
        """
        self._source = source
        if self._buffer is not None:
            old, count = self._buffer, self.count
            self._buffer = np.full_like(source, self._fill)
            self._buffer[:count] = old[:count]
            self._readonly = self._buffer.view()
            self._readonly.flags.writeable = False
        self._stop, self._view = -1, None

    def blank(self) -> None:
        """Forget everything, revealed or not (after a one-off evaluation): kept views show ``fill``."""
        self._source = np.broadcast_to(np.array(self._fill, dtype=self._source.dtype), self._source.shape)
        if self._buffer is not None:
            self._buffer[...] = self._fill


class BarFeed:
    """The harness's side of the candles: the whole history and how much of it is closed.

    The EA never receives a feed, only its ``bars`` (a live view that grows as ``advance`` moves the end)
    and windows of it. ``column``/``time`` give the harness (broker, charts) the full history.
    """

    __slots__ = ("_cols", "_index", "_n", "_shown", "_time", "_time_index", "_visible", "bars", "meta")

    def __init__(self, cols: dict[str, np.ndarray], time: pd.DatetimeIndex, meta: Any, visible: int = 0):
        self._cols = {}
        for name in COLUMNS:
            arr = np.asarray(cols[name], dtype=np.float64)
            if arr.flags.writeable:
                arr = arr.copy()
                arr.flags.writeable = False
            self._cols[name] = arr
        self._index = time
        self._n = len(time)
        self.meta = meta
        self._shown = {name: _Revealed(arr, np.nan) for name, arr in self._cols.items()}
        self._time = _Revealed(np.asarray(time.asi8, dtype=np.int64), _NAT)
        self._time_index: pd.DatetimeIndex | None = None
        self._visible = 0
        self.bars = Bars(self, 0, None)
        self.advance(visible)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, meta: Any, visible: int = 0) -> BarFeed:
        cols = {}
        for name in COLUMNS:
            column = df[name]
            values = column.to_numpy(dtype=np.float64)
            if column.dtype != np.float64:  # converted: a new array no one else holds, kept as it is
                values.flags.writeable = False
            cols[name] = values
        return cls(cols, df.index, meta, visible)

    def __len__(self) -> int:
        return self._n

    @property
    def visible(self) -> int:
        """How many bars are closed: the EA's bars are ``0..visible-1``."""
        return self._visible

    def advance(self, visible: int) -> None:
        """Close bars up to ``visible`` (never backwards: a revealed bar cannot be taken back)."""
        if not self._visible <= visible <= self._n:
            raise ValueError(f"cannot move the visible end from {self._visible} to {visible} of {self._n}")
        self._visible = visible

    def extend(self, cols: dict[str, np.ndarray], time: pd.DatetimeIndex) -> None:
        """Append bars that closed after the history (live trading: the history grows as bars close).

        The new bars are not visible until ``advance`` reaches them; ``time`` must follow the last bar's.
        """
        if not len(time):
            return
        if self._n and time[0] <= self._index[-1]:
            raise ValueError(f"bar {time[0]} does not follow the last bar {self._index[-1]}")
        for name in COLUMNS:
            arr = np.concatenate([self._cols[name], np.asarray(cols[name], dtype=np.float64)])
            arr.flags.writeable = False
            self._cols[name] = arr
            self._shown[name].grow(arr)
        self._index = self._index.append(time)
        self._n = len(self._index)
        self._time.grow(np.asarray(self._index.asi8, dtype=np.int64))
        self._time_index = None

    def column(self, name: str) -> np.ndarray:
        """The whole read-only history of one column, for the harness only."""
        return self._cols[name]

    @property
    def time(self) -> pd.DatetimeIndex:
        """The whole history's bar times, for the harness only."""
        return self._index

    def snapshot(self, stop: int) -> BarFeed:
        """A separate feed of bars ``0..stop-1``, all visible, over its own copies (indicator evaluation)."""
        return BarFeed({n: a[:stop] for n, a in self._cols.items()}, self._index[:stop], self.meta, stop)

    def blank(self) -> None:
        """Blank every value this feed revealed: an indicator function that kept its bars sees NaN."""
        for shown in self._shown.values():
            shown.blank()
        self._time.blank()

    def _column(self, name: str, start: int, stop: int) -> np.ndarray:
        view = self._shown[name].upto(stop)
        return view[start:] if start else view

    def _times(self, start: int, stop: int) -> pd.DatetimeIndex:
        self._time.upto(stop)
        if self._time_index is None:
            # One tz-aware index over the revealed times, sharing their memory: a slice of it is no copy.
            naive = pd.array(self._time.buffer().view(f"M8[{self._index.unit}]"), copy=False)
            self._time_index = pd.DatetimeIndex(naive.view(self._index.dtype), copy=False)
        return self._time_index[start:stop]


class Bars:
    """A read-only view of closed candles, oldest first (unlike MQL5's series indexing).

    ``bars.close[-1]`` is the newest closed bar's close and ``len(bars)`` the count of visible bars. The EA's
    ``self.bars`` grows by one bar per step; a ``window`` (the study window of ``on_study``) stays fixed.
    Arrays never lead past the newest closed bar (see the module docstring).
    """

    __slots__ = ("_end", "_feed", "_start", "_time_cache")

    COLUMNS = COLUMNS

    def __init__(self, feed: BarFeed, start: int, stop: int | None):
        self._feed = feed
        self._start = start
        # What holds ``end`` in ``_visible`` (read per bar): the feed (``stop`` None: its visible end), or
        # the fixed end of a window
        self._end = feed if stop is None else _FixedEnd(stop)
        self._time_cache: tuple[int, pd.DatetimeIndex] | None = None

    @classmethod
    def from_frame(cls, df: pd.DataFrame, meta: Any, end: int | None = None) -> Bars:
        """Bars ``0..end-1`` of a candle frame (all by default), outside a backtest: e.g. to test features."""
        return BarFeed.from_frame(df, meta, len(df) if end is None else end).bars

    @property
    def meta(self) -> Any:
        return self._feed.meta

    @property
    def offset(self) -> int:
        """Absolute index of the first visible bar in the tested history (0 unless this is a window)."""
        return self._start

    @property
    def end(self) -> int:
        """Absolute index one past the newest visible bar (``offset + len(bars)``)."""
        return self._end._visible

    def __len__(self) -> int:
        return self._end._visible - self._start

    def window(self, start: int, end: int) -> Bars:
        """Bars ``start..end-1`` (absolute indices) as a fixed view; the range must lie within these bars.

        An ``end`` past the newest closed bar (or a ``start`` before ``offset``) is an ``EAError``: those bars
        are in the future (or outside this study window), and a silently shorter window would hide the bug.
        """
        try:
            start, end = operator.index(start), operator.index(end)
        except TypeError:
            raise EAError(f"bars.window({start!r}, {end!r}): bar indices are integers") from None
        if not self._start <= start <= end <= self.end:
            shown = f"only bars {self._start}..{self.end - 1} are" if len(self) else "no bar is"
            raise EAError(
                f"bars.window({start}, {end}): {shown} visible here "
                "(absolute indices; a window cannot reach past the newest closed bar)"
            )
        return Bars(self._feed, start, end)

    def _col(self, name: str) -> np.ndarray:
        return self._feed._column(name, self._start, self.end)

    @property
    def open(self) -> np.ndarray:
        return self._col("open")

    @property
    def high(self) -> np.ndarray:
        return self._col("high")

    @property
    def low(self) -> np.ndarray:
        return self._col("low")

    @property
    def close(self) -> np.ndarray:
        return self._col("close")

    @property
    def tick_volume(self) -> np.ndarray:
        return self._col("tick_volume")

    @property
    def spread(self) -> np.ndarray:
        return self._col("spread")

    @property
    def real_volume(self) -> np.ndarray:
        return self._col("real_volume")

    @property
    def time(self) -> pd.DatetimeIndex:
        end = self.end
        cached = self._time_cache
        if cached is None or cached[0] != end:  # one index per bar, however often the EA asks
            cached = self._time_cache = (end, self._feed._times(self._start, end))
        return cached[1]

    def frame(self) -> pd.DataFrame:
        """The visible bars as a new DataFrame (a copy; convenient, not fast)."""
        cols = {c: self._col(c).copy() for c in COLUMNS}
        return pd.DataFrame(cols, index=self.time.copy(deep=True))


def _immutable(values: np.ndarray) -> bool:
    """Whether no one can write ``values``: read-only down to an immutable ``bytes`` it is a view of."""
    base = values
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, bytes)


class Line:
    """An indicator revealed bar by bar: ``line[-1]`` is its value on the newest closed bar.

    Values are computed once over the history by the harness. An integer index of a one-column line returns a
    Python float (a number: it has no ``.base``) and checks it against the closed bars; an integer index of a
    line of several columns, slices and ``values`` read a revealed copy that ends at the newest closed bar,
    like ``Bars``.
    """

    __slots__ = ("_bars", "_end", "_items", "_shown", "_values", "name")

    def __init__(self, values: np.ndarray, bars: Bars, name: str):
        self._bars = bars
        # What holds ``bars.end`` in ``_visible``, read per bar without the view: the feed (its visible end),
        # or the fixed end of a window
        self._end = bars._end
        self.name = name
        values = np.asarray(values, dtype=np.float64)
        if not _immutable(values):
            values = values.copy()  # the caller's array stays the caller's
        # else the harness's proved values (``backtests.indicator_cache.frozen``): no one can write them, so
        # the line reads them as they are
        self._shown = _Revealed(values, np.nan)
        self._take(values)

    def _take(self, values: np.ndarray) -> None:
        values.flags.writeable = False
        self._values = values
        # Item ``i`` (0 <= i < the closed bars) of the line: a one-column line's as a Python float straight
        # from its values (a memoryview: no copy, no NumPy scalar made per read), a row of several columns
        # from the revealed copy
        self._items = memoryview(values) if values.ndim == 1 else _Rows(self)

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int:  # the per-bar case (line[-1]): checked against the closed bars, then read
            stop = self._end._visible
            if key < 0:
                if key >= -stop:
                    return self._items[key + stop]
            elif key < stop:
                return self._items[key]
            raise IndexError(f"{self.name}[{key}]: only {stop} bars are closed")
        return self._shown.upto(self._end._visible)[key]

    def __len__(self) -> int:
        return self._bars.end

    def closed(self) -> np.ndarray:
        """The harness's: the values of the closed bars as a read-only view of the line's own array, not
        a revealed copy (the report's chart reads every line once the run is over; the array is never
        written again: ``extend`` replaces it)."""
        return self._values[: self._end._visible]

    def extend(self, values: np.ndarray) -> None:
        """The harness's: the line recomputed over a history that grew (live trading); the caller has
        checked that the values already revealed did not change."""
        values = np.array(values, dtype=np.float64)
        if values.shape[1:] != self._values.shape[1:] or len(values) < len(self._values):
            raise ValueError(f"{self.name}: cannot extend {self._values.shape} with {values.shape}")
        self._take(values)
        self._shown.grow(values)

    @property
    def values(self) -> np.ndarray:
        """The line up to the newest closed bar (read-only)."""
        return self._shown.upto(self._end._visible)


class _FixedEnd:
    """The end of a line over a fixed window of bars, in the place of a feed's visible end."""

    __slots__ = ("_visible",)

    def __init__(self, end: int):
        self._visible = end


class _Rows:
    """A line of several columns by row: row ``i`` (already checked against the closed bars) as a read-only
    view of the revealed copy, which ends at the newest closed bar."""

    __slots__ = ("_line",)

    def __init__(self, line: Line):
        self._line = line

    def __getitem__(self, i: int) -> np.ndarray:
        line = self._line
        return line._shown.upto(line._end._visible)[i]
