"""The expert-advisor base class: MetaTrader's lifecycle, closed bars only, and a small trading API.

A user subclasses ``ExpertAdvisor`` in their own file, declares parameters as class attributes with
defaults (``fast = 10``), and implements ``on_bar``. The harness (``backtests``) owns the data: it hands
the EA a ``Bars`` view that grows by one closed bar per step and a trading context; the EA never receives
the full frame. Indicators declared with ``indicator()`` are computed once over the whole history for
speed, and the harness checks them for look-ahead by recomputing them on shorter prefixes.

The look-ahead guard (``strategies.bars``) is the API, not a sandbox: nothing public leads to a future
bar, but Python cannot stop code that digs through private attributes on purpose. Whatever an EA's hooks
raise reaches the caller as an ``EARuntimeError`` naming the EA, the hook and the bar (``call_hook``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronet.errors import NeuronetError
from strategies.bars import Bars, Line
from strategies.errors import EAError, EARuntimeError

# The trade types live in strategies.trade_records (re-exported by strategies.trade); they are re-exported
# here too, where EAs have always found them.
from strategies.trade import Account as Account
from strategies.trade import Order as Order
from strategies.trade import Position as Position
from strategies.trade import Tick as Tick
from strategies.trade import TradeContext, TradeMethods

# Public class attributes that describe the EA rather than configure it.
_NOT_PARAMS = frozenset({"min_study_bars", "symbols", "timeframes"})


@dataclass(frozen=True)
class ReportSection:
    """An EA's own part of the report: a title, JSON-ready data for report.json, and charts for the HTML,
    each a Bokeh model (drawn interactive, like the report's own) or PNG bytes (shown as an image)."""

    title: str
    data: dict
    charts: dict[str, object]


class ExpertAdvisor(TradeMethods):
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
    # Not parameters: the symbols the EA reads and trades and the timeframes it reads, the first of each its
    # main chart (``self.bars``); empty: the data's one symbol and timeframe. E.g. ("EURUSD", "GBPUSD").
    symbols: tuple[str, ...] = ()
    timeframes: tuple[str, ...] = ()

    def __init__(self, **params: Any):
        self.params = self.resolve_params(params)
        for key, value in self.params.items():
            setattr(self, key, value)
        self.bars: Bars | None = None
        self.training_log: list[dict] = []
        self.run_info: dict = {"complete": False, "interrupted": None}  # set by the harness at the end
        self._ctx: TradeContext | None = None
        self._epoch_hook: Callable[[dict], None] | None = None
        self._profile = False
        self._lines: list[tuple[Line, Callable[[Bars], np.ndarray]]] = []
        self._views: Any = None  # the harness's closed bars of every declared symbol and timeframe

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
                if klass is not ExpertAdvisor and key in _RESERVED:
                    raise EAError(
                        f"{cls.__name__}.{key}: a parameter of that name would hide "
                        f"ExpertAdvisor.{key}; rename it"
                    )
                out[key] = value
        return out

    @classmethod
    def resolve_params(cls, given: dict[str, Any]) -> dict[str, Any]:
        """The defaults with ``given`` applied, each converted to its default's type. An unknown name, a
        value of the wrong type and an unknown network ``backend`` raise ``EAError`` here, before any bar
        (and on the command line before any data is read); value ranges are ``on_init``'s to check."""
        defaults = cls.param_defaults()
        out = dict(defaults)
        for key, value in given.items():
            if key not in defaults:
                close = difflib.get_close_matches(key, list(defaults), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(defaults))}"
                raise EAError(f"{cls.__name__} has no parameter {key!r}{hint}")
            out[key] = _coerce(cls.__name__, key, value, defaults[key])
        if "backend" in given and isinstance(out["backend"], str):
            from nn import check_backend_name  # only when asked: the EAs that train import nn lazily

            try:
                check_backend_name(out["backend"], device=True)
            except NeuronetError as exc:
                raise EAError(f"{cls.__name__} parameter 'backend': {exc}") from None
        return out

    # -- lifecycle (override) --------------------------------------------------------------------------
    def on_init(self) -> None:
        """Declare indicators, check parameters (raise ``EAError``). No bar is closed yet."""

    def on_study(self, bars: Bars) -> None:
        """Train on the study window (closed bars only). The base EA has nothing to learn."""

    def on_bar(self) -> None:
        """Decide at the open of a new bar; ``self.bars`` holds every bar closed before it."""

    def on_tick(self, tick: Tick) -> None:
        """React to a price change inside the current bar (``--model ticks`` and live trading only).

        Optional: the harness calls it only where a subclass overrides it (``wants_ticks``), so an EA without
        it costs nothing per tick. ``self.bars`` still ends at the newest closed bar; ``on_bar`` fires as
        before when a bar closes, before the first tick of the next bar.
        """

    @classmethod
    def wants_ticks(cls) -> bool:
        """Whether this EA overrides ``on_tick`` (the harness skips the per-tick hook otherwise)."""
        return cls.on_tick is not ExpertAdvisor.on_tick

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

    # -- other symbols and timeframes ----------------------------------------------------------------------
    def data(self, symbol: str | None = None, timeframe: str | None = None) -> Bars:
        """The closed bars of ``symbol`` on ``timeframe`` (defaults: the main chart's), a view like
        ``self.bars``: a bar is in it only once it has closed at the current time (a D1 bar from the next
        day's first decision on, the M15 bars of an H1 chart up to the hour's open). Both must be declared
        in the class attributes ``symbols`` and ``timeframes``."""
        views = self._views
        if views is None:
            bars = self.bars
            if bars is None:
                raise EAError(f"{type(self).__name__}.data(): not attached to a backtest")
            meta = bars.meta
            wanted = (symbol or meta.symbol, (timeframe or meta.timeframe.name).upper())
            if wanted != (meta.symbol, meta.timeframe.name):
                raise EAError(
                    f"data({symbol!r}, {timeframe!r}): this run has {meta.symbol} {meta.timeframe.name} "
                    "only; "
                    "declare what an EA reads in its class attributes symbols and timeframes"
                )
            return bars
        return views.bars(symbol, timeframe)

    # -- indicators --------------------------------------------------------------------------------------
    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str | None = None) -> Line:
        """Declare a causal series computed from bars (e.g. ``lambda b: sma(b.close, 10)``).

        The harness evaluates ``fn`` over the whole history once and recomputes it on shorter histories to
        prove it causal (a ``LookAheadError`` otherwise); ``on_bar`` then sees it grow with the bars. The
        bars ``fn`` receives are blanked (NaN) once it returns, so keeping them leads nowhere; ``fn`` must be
        a pure function of its bars (one that copies data out on purpose is not stopped: the guard is the
        API, not a sandbox). Where this process already proved the same function (its code and the values
        it reads) on the same bars, as the passes of an optimisation do, its proved values are reused and
        ``fn`` is not called again.
        """
        ctx = self._require_ctx()
        label = name or getattr(fn, "__name__", "indicator")
        line = Line(ctx.indicator(fn, label), self.bars, label)
        self._lines.append((line, fn))
        return line

    def declared_indicators(self) -> list[tuple[Line, Callable[[Bars], np.ndarray]]]:
        """The harness's: each line ``indicator`` made and its function (live trading recomputes them as
        bars close)."""
        return list(self._lines)

    # -- harness plumbing --------------------------------------------------------------------------------
    def attach(
        self,
        ctx: TradeContext,
        bars: Bars,
        epoch_hook: Callable[[dict], None] | None = None,
        *,
        profile: bool = False,
        views: Any = None,
    ) -> None:
        """Called by the harness before ``on_init``; ``profile``: record kernel time (``nn_backend``);
        ``views``: the closed bars of every declared symbol and timeframe (``data``)."""
        self._ctx = ctx
        self._views = views
        self.bars = bars
        self._epoch_hook = epoch_hook
        self._profile = bool(profile)

    def nn_backend(self, name: Any = None) -> Any:
        """The ``nn`` backend to train on: ``name`` (default: the EA's ``backend`` parameter, else "auto")
        configured by the harness, which passes the run's choices explicitly (kernel profiling when the
        backtest records device time) instead of through process-wide state."""
        from nn import get_backend

        chosen = name if name is not None else getattr(self, "backend", "auto")
        return get_backend(chosen, profile=self._profile)

    def mark_run(self, *, complete: bool, interrupted: str | None) -> None:
        """Called by the harness when the run ends: whether it ran to the end, else the phase Ctrl-C cut."""
        self.run_info = {"complete": bool(complete), "interrupted": interrupted}

    def model_metadata(self) -> dict:
        """What a saved model should carry about its EA and run (``save_model`` puts it in the metadata).

        An interrupted run's model says so (``run.complete`` false, ``run.interrupted`` the phase), so a
        file trained by a cut-short ``on_study`` is never mistaken for a finished one.
        """
        return {"ea": type(self).__name__, "params": dict(self.params), "run": dict(self.run_info)}

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


# Names an EA's parameters must not take: the base class's API and the attributes the harness sets.
_RESERVED = frozenset(
    {k for k in dir(ExpertAdvisor) if not k.startswith("_")} | {"bars", "params", "training_log", "run_info"}
) - set(ExpertAdvisor.param_defaults())


def make_ea(ea_class: type[ExpertAdvisor], params: dict[str, Any]) -> ExpertAdvisor:
    """``ea_class(**params)`` for a run (the backtest and live trading share this): a bad parameter is the
    user's error (``EAError`` and every other ``NeuronetError`` pass as they are), any other failure of the
    EA's ``__init__`` is the EA's (``EARuntimeError``)."""
    try:
        return ea_class(**params)
    except (NeuronetError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise EARuntimeError(ea_class.__name__, "__init__", "before the first bar", exc, None, None) from exc


def call_hook(
    ea: ExpertAdvisor, hook: str, *args: Any, where: str, bar: int | None = None, time: Any = None
) -> Any:
    """Run one of the EA's own methods (or properties, like ``describe``) on the harness's behalf.

    Whatever escapes becomes an ``EARuntimeError`` naming the EA, the hook and ``where`` (the bar), with the
    original as its cause. Two exceptions pass as they are: ``KeyboardInterrupt`` (Ctrl-C ends the run, it is
    not the EA's failure), and a ``NeuronetError`` from ``on_init``, which is where an EA rejects its
    parameters (``EAError``) or finds no device: the user fixes those by changing the command, not the EA.
    ``SystemExit`` (and any other ``BaseException``) is wrapped: an EA's ``sys.exit()`` must not end the
    program with a made-up status.
    """
    try:
        value = getattr(ea, hook)
        return value(*args) if callable(value) else value
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if hook == "on_init" and isinstance(exc, NeuronetError):
            raise
        raise EARuntimeError(type(ea).__name__, hook, where, exc, bar, time) from exc


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
    except (TypeError, ValueError, OverflowError):  # OverflowError: int("inf")
        pass
    else:
        return value
    raise EAError(
        f"{cls_name} parameter {key!r} expects {type(default).__name__} like {default!r}, got {value!r}"
    )
