"""The expert-advisor base class: MetaTrader's lifecycle, closed bars only, and a small trading API.

A user subclasses ``ExpertAdvisor`` in their own file, declares parameters as class attributes with
defaults (``fast = 10``), and implements ``on_bar``. The harness (``backtests``) owns the data: it hands
the EA a ``Bars`` view that grows by one closed bar per step and a trading context; the EA never receives
the full frame. Indicators declared with ``indicator()`` are computed once over the whole history for
speed, and the harness checks them for look-ahead by recomputing them on shorter prefixes.

The guard is the API, not a sandbox: nothing public leads to a future bar, but Python cannot stop code
that digs through private attributes on purpose.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

# Public class attributes that describe the EA rather than configure it.
_NOT_PARAMS = frozenset({"min_study_bars"})


class EAError(ValueError):
    """An EA was configured or used wrongly (bad parameter, trading outside a backtest)."""


class Bars:
    """A read-only, growing view of closed candles, oldest first (unlike MQL5's series indexing).

    ``bars.close[-1]`` is the newest closed bar's close. Arrays are views of the visible bars only;
    ``len(bars)`` is their count. ``start`` hides older bars (a study window).
    """

    __slots__ = ("_cols", "_end", "_start", "_time", "meta")

    COLUMNS = ("open", "high", "low", "close", "tick_volume", "spread", "real_volume")

    def __init__(
        self, cols: dict[str, np.ndarray], time: pd.DatetimeIndex, meta: Any, end: int, start: int = 0
    ):
        self._cols = cols
        self._time = time
        self.meta = meta
        self._start = start
        self._end = end

    @classmethod
    def from_frame(cls, df: pd.DataFrame, meta: Any, end: int | None = None) -> Bars:
        cols = {}
        for name in cls.COLUMNS:
            arr = np.ascontiguousarray(df[name].to_numpy(dtype=np.float64))
            arr.flags.writeable = False
            cols[name] = arr
        return cls(cols, df.index, meta, len(df) if end is None else end)

    def window(self, start: int, end: int) -> Bars:
        """Bars ``start..end-1`` (absolute indices) as a new view sharing the same arrays."""
        return Bars(self._cols, self._time, self.meta, end, start)

    def __len__(self) -> int:
        return self._end - self._start

    @property
    def open(self) -> np.ndarray:
        return self._cols["open"][self._start : self._end]

    @property
    def high(self) -> np.ndarray:
        return self._cols["high"][self._start : self._end]

    @property
    def low(self) -> np.ndarray:
        return self._cols["low"][self._start : self._end]

    @property
    def close(self) -> np.ndarray:
        return self._cols["close"][self._start : self._end]

    @property
    def tick_volume(self) -> np.ndarray:
        return self._cols["tick_volume"][self._start : self._end]

    @property
    def spread(self) -> np.ndarray:
        return self._cols["spread"][self._start : self._end]

    @property
    def real_volume(self) -> np.ndarray:
        return self._cols["real_volume"][self._start : self._end]

    @property
    def time(self) -> pd.DatetimeIndex:
        return self._time[self._start : self._end]

    @property
    def offset(self) -> int:
        """Absolute index of the first visible bar in the tested history (0 unless this is a window)."""
        return self._start

    def frame(self) -> pd.DataFrame:
        """The visible bars as a new DataFrame (a copy; convenient, not fast)."""
        return pd.DataFrame(
            {c: self._cols[c][self._start : self._end] for c in self.COLUMNS}, index=self.time
        )


class Line:
    """An indicator revealed bar by bar: ``line[-1]`` is its value on the newest closed bar.

    Values are computed once over the history by the harness; indexing is clipped to the visible bars.
    """

    __slots__ = ("_bars", "_values", "name")

    def __init__(self, values: np.ndarray, bars: Bars, name: str):
        values.flags.writeable = False
        self._values = values
        self._bars = bars
        self.name = name

    def __getitem__(self, key: int | slice) -> Any:
        end = self._bars._end
        if isinstance(key, int) and key < 0:
            if -key > end:
                raise IndexError(f"{self.name}[{key}]: only {end} bars are closed")
            return self._values[end + key]
        return self._values[:end][key]

    def __len__(self) -> int:
        return self._bars._end

    @property
    def values(self) -> np.ndarray:
        return self._values[: self._bars._end]


@dataclass(frozen=True)
class ReportSection:
    """An EA's own part of the report: a title, JSON-ready data for report.json, PNG charts for the HTML."""

    title: str
    data: dict
    charts: dict[str, bytes]


@dataclass(frozen=True)
class Position:
    """An open position as the EA sees it (volume in lots, prices as filled)."""

    ticket: int
    side: int  # +1 long, -1 short
    lots: float
    price_open: float
    time_open: pd.Timestamp
    bar_open: int
    sl: float | None
    tp: float | None
    magic: int
    comment: str
    profit: float  # floating profit at the last closed bar's close, in deposit currency


@dataclass(frozen=True)
class Account:
    """Account state at the current decision time (deposit currency)."""

    balance: float
    equity: float
    margin: float
    free_margin: float
    leverage: float
    currency: str


class TradeContext(Protocol):
    """What the harness gives an EA to trade with (the broker of ``backtests`` plus indicator evaluation)."""

    point: float

    def order(
        self, side: int, lots: float, sl: float | None, tp: float | None, magic: int, comment: str
    ) -> int | None: ...

    def close(self, ticket: int | None, magic: int | None, reason: str = "signal") -> int: ...

    def positions(self) -> list[Position]: ...

    def account(self) -> Account: ...

    def price(self, side: int) -> float: ...

    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str) -> np.ndarray: ...


class ExpertAdvisor:
    """Base class of every expert advisor.

    Lifecycle (MetaTrader names): ``on_init`` once before the run; ``on_study(bars)`` with the study window
    before the forward period (and again every ``retrain_every`` bars when set); ``on_bar`` at each new
    bar's open with the closed bars in ``self.bars``; ``on_deinit`` at the end; ``on_tester(stats)`` may
    return a custom criterion, recorded in the report.

    Parameters are public class attributes with defaults; ``EA(fast=5)`` overrides them, rejecting unknown
    names with a suggestion and converting values to the default's type.
    """

    magic: int = 0
    retrain_every: int = 0  # bars between retrainings in the forward period; 0 = train once
    min_study_bars = 1  # not a parameter: the harness refuses study periods shorter than this

    def __init__(self, **params: Any):
        self.params = self.resolve_params(params)
        for key, value in self.params.items():
            setattr(self, key, value)
        self.bars: Bars | None = None
        self.training_log: list[dict] = []
        self._ctx: TradeContext | None = None
        self._epoch_hook: Callable[[dict], None] | None = None

    # -- parameters ------------------------------------------------------------------------------------
    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        """Every public, non-callable class attribute along the MRO (subclass values win)."""
        out: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            if klass is object:
                continue
            for key, value in vars(klass).items():
                if key.startswith("_") or key in _NOT_PARAMS or callable(value):
                    continue
                if isinstance(value, (classmethod, staticmethod, property)):
                    continue
                out[key] = value
        return out

    @classmethod
    def resolve_params(cls, given: dict[str, Any]) -> dict[str, Any]:
        defaults = cls.param_defaults()
        out = dict(defaults)
        for key, value in given.items():
            if key not in defaults:
                close = difflib.get_close_matches(key, list(defaults), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(defaults))}"
                raise EAError(f"{cls.__name__} has no parameter {key!r}{hint}")
            out[key] = _coerce(cls.__name__, key, value, defaults[key])
        return out

    # -- lifecycle (override) --------------------------------------------------------------------------
    def on_init(self) -> None:
        """Declare indicators, check parameters. Bars are not visible yet beyond ``self.bars.meta``."""

    def on_study(self, bars: Bars) -> None:
        """Train on the study window (closed bars only). The base EA has nothing to learn."""

    def on_bar(self) -> None:
        """Decide at the open of a new bar; ``self.bars`` holds every bar closed before it."""

    def on_deinit(self) -> None:
        """Release resources at the end of the run."""

    def on_tester(self, stats: dict) -> float | None:
        """A custom optimisation criterion from the final statistics (MetaTrader's OnTester)."""
        return None

    def evaluate_predictions(self, bars: Bars) -> dict | None:
        """After the run: ``{"classes", "y_true", "y_pred", "proba"}`` arrays indexed by bar, or None.

        Called once the run is over with every bar, so labels may use later bars; the harness scores only
        the forward period. EAs that do not classify return None.
        """
        return None

    def report_section(self, bars: Bars) -> ReportSection | None:
        """After the run, with every bar: an EA-specific report section (e.g. forecast vs actual), or None."""
        return None

    def save_model(self, path: str) -> str | None:
        """Write the trained model under ``path`` (no extension) and return the file written, or None."""
        return None

    @property
    def describe(self) -> dict:
        """JSON-ready description for the report: class name and parameters."""
        return {"class": type(self).__name__, "params": dict(self.params)}

    # -- indicators --------------------------------------------------------------------------------------
    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str | None = None) -> Line:
        """Declare a causal series computed from bars (e.g. ``lambda b: sma(b.close, 10)``).

        The harness evaluates ``fn`` over the whole history once and recomputes it on shorter histories to
        prove it causal (a ``LookAheadError`` otherwise); ``on_bar`` then sees it grow with the bars.
        """
        ctx = self._require_ctx()
        label = name or getattr(fn, "__name__", "indicator")
        return Line(ctx.indicator(fn, label), self.bars, label)

    # -- trading -----------------------------------------------------------------------------------------
    def buy(
        self,
        lots: float,
        *,
        sl: float | None = None,
        tp: float | None = None,
        sl_points: float | None = None,
        tp_points: float | None = None,
        magic: int | None = None,
        comment: str = "",
    ) -> int | None:
        """Market buy at the ask. Stops by price or by points from the fill; returns a ticket or None."""
        return self._order(+1, lots, sl, tp, sl_points, tp_points, magic, comment)

    def sell(
        self,
        lots: float,
        *,
        sl: float | None = None,
        tp: float | None = None,
        sl_points: float | None = None,
        tp_points: float | None = None,
        magic: int | None = None,
        comment: str = "",
    ) -> int | None:
        """Market sell at the bid; see ``buy``."""
        return self._order(-1, lots, sl, tp, sl_points, tp_points, magic, comment)

    def close(self, ticket: int | None = None, *, magic: int | None = None, reason: str = "signal") -> int:
        """Close one position by ticket, or all (of one magic number); returns how many were closed.
        ``reason`` is the trade's exit reason in the report (e.g. "time" for a holding-time exit)."""
        return self._require_ctx().close(ticket, magic, reason)

    def positions(self) -> list[Position]:
        return self._require_ctx().positions()

    @property
    def position(self) -> float:
        """Net open volume in lots: positive long, negative short, 0 flat."""
        return sum(p.side * p.lots for p in self._require_ctx().positions())

    @property
    def account(self) -> Account:
        return self._require_ctx().account()

    @property
    def bid(self) -> float:
        """The current bar's opening bid (known at decision time in "open prices only")."""
        return self._require_ctx().price(-1)

    @property
    def ask(self) -> float:
        return self._require_ctx().price(+1)

    @property
    def point(self) -> float:
        return self._require_ctx().point

    # -- harness plumbing --------------------------------------------------------------------------------
    def attach(self, ctx: TradeContext, bars: Bars, epoch_hook: Callable[[dict], None] | None = None) -> None:
        """Called by the harness before ``on_init``."""
        self._ctx = ctx
        self.bars = bars
        self._epoch_hook = epoch_hook

    def record_epoch(self, record: dict) -> None:
        """Training code reports each epoch here (loss, wall and device s) for the progress bar and report."""
        self.training_log.append(record)
        if self._epoch_hook is not None:
            self._epoch_hook(record)

    def _require_ctx(self) -> TradeContext:
        if self._ctx is None:
            raise EAError(
                f"{type(self).__name__} is not attached to a backtest; run it through backtests.Backtest"
            )
        return self._ctx

    def _order(self, side, lots, sl, tp, sl_points, tp_points, magic, comment) -> int | None:
        ctx = self._require_ctx()
        if (sl is not None and sl_points is not None) or (tp is not None and tp_points is not None):
            raise EAError("give a stop as a price or in points, not both")
        if sl_points is not None or tp_points is not None:
            price = ctx.price(side)
            if sl_points is not None and sl_points > 0:
                sl = price - side * sl_points * ctx.point
            if tp_points is not None and tp_points > 0:
                tp = price + side * tp_points * ctx.point
        return ctx.order(side, float(lots), sl, tp, self.magic if magic is None else int(magic), comment)


def _coerce(cls_name: str, key: str, value: Any, default: Any) -> Any:
    """Convert a parameter to its default's type (CLI values arrive as strings)."""
    if default is None or type(value) is type(default):
        return value
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                low = value.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            return bool(value)
        if isinstance(default, int):
            as_float = float(value)
            if as_float != int(as_float):
                raise ValueError(value)
            return int(as_float)
        if isinstance(default, float):
            return float(value)
        if isinstance(default, str):
            return str(value)
        if isinstance(default, tuple) and isinstance(value, str):
            return (
                tuple(type(default[0])(v) for v in value.split(",")) if default else tuple(value.split(","))
            )
        if isinstance(default, (tuple, list)) and isinstance(value, Sequence):
            return type(default)(value)
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise EAError(
        f"{cls_name} parameter {key!r} expects {type(default).__name__} like {default!r}, got {value!r}"
    )
