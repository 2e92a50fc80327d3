"""Replay history bar by bar through an expert advisor ("open prices only"), then score the run.

At each forward bar ``t`` the broker first applies swaps and stops gapped through by the open, the EA
decides with bars ``0..t-1`` visible, market orders fill at bar ``t``'s open, and stops are then checked
on bar ``t``'s high/low. Training (``on_study``) sees only the study window. Indicators are computed once
over the history and checked for causality by recomputing them on shorter prefixes.

The harness holds the ``BarFeed`` and moves its visible end (``advance``); the EA gets only its ``Bars``
(``strategies.bars`` keeps every route to them at the newest closed bar). Every EA method the harness
calls goes through ``call_hook``, so whatever the EA raises names the EA, the hook and the bar.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from backtests import metrics
from backtests.broker import AccountConfig, Broker
from backtests.broker.config import check_currency
from backtests.broker.terms import SymbolTerms
from backtests.context import TradingContext
from backtests.errors import StatisticError, SymbolsError
from backtests.heap import settled_heap
from backtests.indicator_cache import PROVEN
from backtests.lookahead_probes import before_pauses, typical_magnitude
from backtests.paths import (
    COVERAGE,
    M1Path,
    ModelDataError,
    check_inside,
    check_market,
    check_model,
    model_data,
)
from backtests.periods import Periods, resolve
from backtests.progress import BarProgress, EpochProgress
from backtests.result import PassFigures, Result
from backtests.scoring import broker_figures, groups_of, pass_figures
from backtests.ticks import TickPath
from datafeeds import meta_of
from neuronet.errors import NeuronetError
from strategies.bars import BarFeed, Bars
from strategies.base import ExpertAdvisor, call_hook, make_ea
from strategies.errors import EARuntimeError

log = logging.getLogger(__name__)
_PREDICTION_KEYS = frozenset({"classes", "y_true", "y_pred", "proba"})

__all__ = ["Backtest", "EARuntimeError", "IndicatorError", "LookAheadError", "Result", "broker_figures"]


_RUN = 24  # consecutive prefixes of the look-ahead check (``causal_indicator``)
_PAUSES = 4  # and prefixes ending before a pause in trading (``before_pauses``)
# The look-ahead check's relative tolerance, live too: a few float32 ulps (``causal_indicator``)
CAUSAL_TOLERANCE = 1e-5


class IndicatorError(NeuronetError, ValueError):
    """An indicator function returned something that is not one number (or row) per bar."""


class LookAheadError(IndicatorError):
    """An indicator's past values changed when future bars were added: it peeks ahead."""


def indicators_on(
    feed: BarFeed, probe_points: Callable[[], list[int]]
) -> Callable[[Callable[[Bars], np.ndarray], str], np.ndarray]:
    """The run's indicator evaluator (``TradingContext``'s): ``fn`` over the whole history of ``feed``,
    proved causal on shorter prefixes (``probe_points`` and a run of them), or the values of an identical
    proof made before in this process (``backtests.indicator_cache``), read-only: no one writes them."""
    return lambda fn, name: PROVEN.proved(fn, feed, name, probe_points(), causal_indicator)


def causal_indicator(
    fn: Callable[[Bars], np.ndarray], feed: BarFeed, name: str, probes: list[int]
) -> np.ndarray:
    """``fn`` over every bar of ``feed``, recomputed on the prefixes of ``probes`` bars and on a run of
    ``_RUN`` prefixes each one bar longer than the last, from where its values begin: a value that changes
    when later bars are added is a ``LookAheadError`` (the backtest and live trading share this).

    A look-ahead that shows at some bars only (a centred window that marks a top two bars after it) leaves
    most single prefixes unchanged; the run ends a prefix at each of ``_RUN`` bars in a row, early in the
    history where prefixes are cheap, so it is met whatever the random probes are; the prefixes ending
    before the first pauses in trading meet one written on the bar before a weekend. Every prefix compares
    at a float32's precision (``CAUSAL_TOLERANCE``, live too): a network's float32 outputs for another
    batch's rows round a few units in the last place apart (a GPU's product tiles by the rows: 1.6e-6
    relative between 4,439 and 5,000 bars on an H200), where a look-ahead moves a value by far more."""
    n = len(feed)
    full = evaluate_indicator(fn, feed.snapshot(n), name)
    typical = typical_magnitude(full)
    for m in probes:
        prefix = evaluate_indicator(fn, feed.snapshot(m), name)
        check_causal(name, prefix, full, feed.time, typical=typical)
    rows = np.isfinite(full.reshape(n, -1)).all(axis=1) if n else np.zeros(0, dtype=bool)
    first = int(np.argmax(rows)) if rows.any() else n
    run = set(range(max(first + 1, 2), min(first + 1 + _RUN, n))) | before_pauses(feed.time, first, _PAUSES)
    for m in sorted(run - set(probes)):
        prefix = evaluate_indicator(fn, feed.snapshot(m), name)
        check_causal(name, prefix, full, feed.time, typical=typical)
    return full


def check_causal(
    name: str,
    prefix: np.ndarray,
    full: np.ndarray,
    time: pd.DatetimeIndex,
    tolerance: float = CAUSAL_TOLERANCE,
    typical: np.ndarray | None = None,
) -> None:
    """Raise ``LookAheadError`` unless ``full`` starts with ``prefix`` (NaN equal to NaN; ``tolerance``
    relative, and a tenth of it absolute in units of the column's typical magnitude: ``typical``, else
    ``typical_magnitude(full)``, a median over the whole history that a caller comparing many prefixes
    with one ``full`` finds once)."""
    m = len(prefix)
    atol = tolerance * 0.1 * (typical_magnitude(full) if typical is None else typical)
    same = np.isclose(prefix, full[:m], rtol=tolerance, atol=atol, equal_nan=True)
    if not same.all():
        bad = int(np.argwhere(~same.reshape(m, -1).all(axis=1))[0, 0])
        raise LookAheadError(
            f"indicator {name!r} looks ahead: its value on bar {bad} ({time[bad]}) changes when "
            f"bars after bar {m - 1} are added"
        )


def evaluate_indicator(fn: Callable[[Bars], np.ndarray], feed: BarFeed, name: str) -> np.ndarray:
    """One evaluation on ``feed``'s bars, which are blanked afterwards so ``fn`` cannot keep them."""
    try:
        raw = fn(feed.bars)
        try:
            values = np.array(raw, dtype=np.float64)  # a copy: the blanking below must not reach it
        except (TypeError, ValueError) as exc:
            raise IndicatorError(
                f"indicator {name!r} returned {type(raw).__name__}, not numbers: {exc}"
            ) from None
    finally:
        feed.blank()
    if values.shape[:1] != (len(feed),):
        raise IndicatorError(f"indicator {name!r} returned shape {values.shape} for {len(feed)} bars")
    return values


def held(candles: Any) -> Any:
    """The candles (a frame or a mapping of frames) as they are now, for every run of a ``Backtest``: each
    run reads its bars again, while the broker's bars, minutes and ticks are made once, so a frame changed
    in place between two runs would hand the EA the new bars and fill its orders at the old prices. A
    shallow copy costs nothing: pandas copies on write, so the caller's later writes land in their own
    copy and the runs keep trading the candles the Backtest was made with."""
    if isinstance(candles, pd.DataFrame):
        return candles.copy(deep=False)
    if isinstance(candles, Mapping):
        return {k: v.copy(deep=False) if isinstance(v, pd.DataFrame) else v for k, v in candles.items()}
    return candles


class Backtest:
    """Run an expert advisor over candles with a study/forward split.

    ``forward``: ``"1/3"``, ``"1/2"``, ``"1/4"``, any fraction, a date, or None (no held-out split: every
    bar is traded). The default, ``"auto"``, holds out the last third for an EA that studies (overrides
    ``on_study``: it trains on the bars before) and trades every bar with one that does not, as
    backtesting.py does; ``forward_rule`` says which and why. ``walk_forward=(train, test)`` trains on
    ``train`` bars and retrains every ``test`` bars.
    ``model``: ``"open"`` (open prices only), ``"ohlc1m"`` (fills worked through ``m1``, the M1 candles of
    the same symbol; see ``backtests.paths``) or ``"ticks"`` (through ``ticks``, a tick frame of
    ``datafeeds.ticks``; an EA's ``on_tick`` runs on each; see ``backtests.ticks``).
    ``profile=True`` hands the EA an nn backend that records OpenCL kernel time
    (``ExpertAdvisor.nn_backend``), so each training epoch reports device seconds.
    ``on_ready`` is called once per run when the EA has accepted its parameters (after ``on_init``), before
    it studies: the command line announces the run there, so a refused parameter is all a user sees.
    """

    def __init__(
        self,
        candles: pd.DataFrame,
        ea: type[ExpertAdvisor],
        *,
        account: AccountConfig | None = None,
        forward: str | float | pd.Timestamp | None = "auto",
        walk_forward: tuple[int, int] | None = None,
        seed: int = 0,
        progress: bool = False,
        model: str = "open",
        m1: pd.DataFrame | None = None,
        profile: bool = False,
        ticks: pd.DataFrame | None = None,
        on_ready: Callable[[], None] | None = None,
        specs: Mapping[str, Any] | None = None,
    ):
        if not (isinstance(ea, type) and issubclass(ea, ExpertAdvisor)):
            raise TypeError(f"{ea!r} is not an ExpertAdvisor subclass")
        self.multi = None
        candles = held(candles)
        forward, self.forward_rule = default_forward(ea, forward, walk_forward)
        if isinstance(candles, Mapping) or len(ea.symbols) > 1 or len(ea.timeframes) > 1:
            from backtests.multi_replay import MultiBacktest  # imports this module: built on demand

            frames = candles if isinstance(candles, Mapping) else {meta_of(candles).symbol: candles}
            if m1 is not None and not isinstance(m1, Mapping):
                m1 = {meta_of(m1).symbol: m1}
            if ticks is not None and not isinstance(ticks, Mapping):
                ticks = {_tick_symbol(ticks, frames): ticks}
            self.multi = MultiBacktest(
                frames,
                ea,
                account=account or AccountConfig(),
                forward=forward,
                walk_forward=walk_forward,
                seed=int(seed),
                model=model,
                specs=specs,
                m1=m1,
                ticks=ticks,
                on_ready=on_ready,
            )
            self.periods, self.meta, self.ea_class = self.multi.periods, self.multi.meta, ea
            self.account, self.seed, self.model = self.multi.account, self.multi.seed, model
            self.candles = frames[self.multi.setup.main[0]]
            return
        self.candles = candles
        self.meta = meta_of(candles)
        _check_declared(ea, self.meta)
        self.ea_class = ea
        self.account = account or AccountConfig()
        check_currency(self.meta.symbol, self.account)
        self.seed = int(seed)
        self.progress = progress
        self.profile = bool(profile)
        self.on_ready = on_ready
        self.model = check_model(model, m1, ticks)
        for fine, what in ((m1, "M1 bars"), (ticks, "ticks")):
            if fine is not None:
                check_market(candles, self.meta, fine, what)
        self.m1, self.ticks = m1, ticks
        self.price_path = self._price_path()  # built and checked once; each run takes its own copy
        if self.price_path is not None:
            fine = m1 if m1 is not None else ticks
            check_inside(candles, self.meta, fine, self.price_path.starts, COVERAGE[self.model])
        min_study = int(ea.min_study_bars)
        self.periods: Periods = resolve(candles.index, forward, walk_forward, min_study=min_study)

    def run(self, **params) -> Result:
        """Replay the forward period; ``params`` override the EA's class-attribute parameters.

        A KeyboardInterrupt ends the run early: the result is kept, marked incomplete, and names the phase
        it cut (``Result.interrupted``); each phase's time stays in its own timing (training is never
        counted as replay).
        """
        if self.multi is not None:
            return self.multi.run(**params)
        return self._run(params, None)

    def run_pass(self, params: dict, keys: Iterable[str]) -> PassFigures:
        """One optimisation pass with ``params``: the run's statistics ``keys`` (all of them for an EA that
        scores itself in ``on_tester``, which is handed every figure), its ``on_tester`` value and its
        equity at each close, the same numbers as ``run()``'s. What a pass does not read is not built: the
        orders, deals and trades tables, the price chart, the prediction scores; like MetaTrader's
        optimisation passes, it calls ``on_tester`` and ``on_deinit`` but not the report's hooks
        (``evaluate_predictions``, ``report_section``, ``describe``). Several symbols run in full."""
        if isinstance(keys, str):
            raise StatisticError(f"give the statistics' names as a list, not the string {keys!r}")
        keys = frozenset(keys)
        groups_of(keys)  # an unknown name is refused before the run
        if self.multi is not None:
            return PassFigures.of_result(self.multi.run(**params))
        return self._run(params, keys)

    def _run(self, params: dict, keys: frozenset[str] | None) -> Result | PassFigures:
        timings: dict[str, float] = {}
        clock = time.perf_counter()
        if "seed" in self.ea_class.param_defaults() and "seed" not in params:
            params["seed"] = self.seed
        ea = make_ea(self.ea_class, params)
        periods = self.periods.for_ea(int(ea.retrain_every))  # the EA may ask for periodic retraining
        df = self.candles
        feed = BarFeed.from_frame(df, self.meta)
        fs, n = periods.forward_start, periods.n
        rng = np.random.default_rng(self.seed)

        def probes() -> list[int]:
            points = {fs, n // 2, int(rng.integers(max(2, n // 4), n))}
            return sorted(m for m in points if 2 <= m < n)

        columns = (feed.column(c) for c in ("open", "high", "low", "close", "spread"))
        ctx = Broker(*columns, feed.time, self.meta.point, self.account, self.meta.clock,
                     terms=SymbolTerms(self.meta.symbol))  # fmt: skip
        if ea.wants_ticks() and self.model != "ticks":
            name = type(ea).__name__
            log.warning("%s.on_tick runs only with model 'ticks'; this run calls on_bar only", name)
        if self.price_path is not None:
            ctx.attach_path(self.price_path.for_run(ea if ea.wants_ticks() else None))
        epoch_bar = EpochProgress(self.progress)
        trading = TradingContext({ctx.symbol: ctx}, ctx.symbol, indicators_on(feed, probes))
        ea.attach(trading, feed.bars, epoch_bar.update, profile=self.profile)
        phase, interrupted = "on_init", None
        try:
            call_hook(ea, "on_init", where="before the first bar")
            if self.on_ready is not None:
                self.on_ready()
            timings["init_s"] = _lap(clock)
            clock, phase = time.perf_counter(), "on_study"
            a, b = periods.study_range(fs)
            feed.advance(fs)
            ctx.t = fs
            when = df.index[fs]
            call_hook(
                ea, "on_study", feed.bars.window(a, b), where=f"before bar {fs} ({when})", bar=fs, time=when
            )
            epoch_bar.close()
            timings["study_s"] = _lap(clock)
            clock, phase = time.perf_counter(), "replay"
            with settled_heap():
                self._replay(ea, ctx, feed, periods, timings)
        except KeyboardInterrupt:
            interrupted = phase
            log.warning(
                "interrupted in %s at bar %d (%s): keeping the partial run",
                phase,
                ctx.t,
                df.index[min(ctx.t, n - 1)],
            )
        finally:
            epoch_bar.close()
            if phase == "replay":  # the bars only: retraining inside the forward period has its own timing
                timings["replay_s"] = round(_lap(clock) - timings.get("retrain_s", 0.0), 6)
            else:  # the phase that ended early keeps its time
                timings.setdefault("init_s" if phase == "on_init" else "study_s", _lap(clock))
        complete = interrupted is None
        # An interrupted bar already had its open; close the run at that bar's close.
        last = n - 1 if complete else max(fs, min(ctx.t, n - 1))
        clock = time.perf_counter()
        ctx.finish(last)
        feed.advance(max(feed.visible, last + 1))  # the run is over: its last bar has closed
        ea.mark_run(complete=complete, interrupted=interrupted)
        when = df.index[last]
        call_hook(ea, "on_deinit", where=f"after bar {last} ({when})", bar=last, time=when)
        with settled_heap():  # the report's tables make as many objects as the bars did (``backtests.heap``)
            if keys is None:
                result = self._score(ea, ctx, feed, periods, last, complete, timings, clock)
            else:
                result = self._score_pass(ea, ctx, periods, last, complete, keys)
        result.interrupted = interrupted
        return result

    def _price_path(self) -> M1Path | TickPath | None:
        """The finer prices of the ohlc1m or ticks model, grouped by bar (None in open-prices mode)."""
        if self.model == "ohlc1m":
            fixed = self.account.spread
            if fixed is None and "spread" in self.m1 and not self.m1["spread"].to_numpy().any():
                fixed = self.account.missing_spread  # minutes without spreads trade as such candles do
            return M1Path(self.candles.index, self.m1, self.meta.point, fixed)
        if self.model == "ticks":
            return TickPath(self.candles.index, self.ticks, self.meta.point, self.account.spread)
        return None

    def _replay(self, ea: ExpertAdvisor, ctx: Broker, feed: BarFeed, periods: Periods, timings: dict) -> None:
        fs, n, every = periods.forward_start, periods.n, periods.retrain_every
        if every:
            timings["retrain_s"] = 0.0
        progress = BarProgress(self.progress, n - fs)
        on_bar, bar_open, bar_range, advance, times = (
            ea.on_bar,
            ctx.bar_open,
            ctx.bar_range,
            feed.advance,
            feed.time,
        )
        # Quiet bars (``Calm.span``): while the state stays ``key``, the bars before ``end`` need no check at
        # their open or range, and the loop only moves the broker's clock; the state is read inline.
        book, market, funds, span, shown = ctx.book, ctx.market, ctx.funds, ctx.calm.span, progress.enabled
        end, key, quiet = 0, -1, ctx.price_path is None  # a price path checks its bars' prices itself
        try:
            for t in range(fs, n):
                same = True  # nothing ran since the last bar's state was read: it still holds
                if every and periods.retrains_at(t):
                    same = False  # ``on_study`` may trade
                    tick = time.perf_counter()
                    advance(t)
                    ctx.t = t
                    a, b = periods.study_range(t)
                    try:
                        when = times[t]
                        call_hook(
                            ea,
                            "on_study",
                            feed.bars.window(a, b),
                            where=f"before bar {t} ({when})",
                            bar=t,
                            time=when,
                        )
                    finally:  # an interrupted retraining is still training time, not replay
                        timings["retrain_s"] += time.perf_counter() - tick
                if t < end and (same or book.changes + ctx.revision + market.changes + funds.changes == key):
                    ctx.t = t
                else:
                    bar_open(t)
                advance(t)
                try:
                    on_bar()
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:
                    raise EARuntimeError(
                        type(ea).__name__, "on_bar", f"at bar {t} ({times[t]})", exc, t, times[t]
                    ) from exc
                if t >= end or book.changes + ctx.revision + market.changes + funds.changes != key:
                    bar_range(t)
                    if quiet:
                        end, key = span(t)
                if shown and (t - fs) % 2048 == 0:
                    progress.to(t - fs)
        finally:
            progress.close()

    def _score_pass(self, ea, ctx, periods: Periods, last, complete, keys: frozenset[str]) -> PassFigures:
        fs = periods.forward_start
        scores_itself = _scores_itself(ea)  # and is handed every figure
        stats, curve = pass_figures(ctx, fs, last, self.account, None if scores_itself else keys)
        # the base class's on_tester scores nothing: no copy of the figures for it to read
        value = (
            call_hook(ea, "on_tester", copy.deepcopy(stats), where="after the run") if scores_itself else None
        )
        return PassFigures(
            stats=stats,
            custom_criterion=_criterion(ea, value),
            time=self.candles.index[fs : last + 1],
            equity=curve.equity[1:],
            curve_time=curve.time,
            curve_equity=curve.equity,
            complete=complete,
        )

    def _score(self, ea, ctx, feed: BarFeed, periods: Periods, last, complete, timings, clock) -> Result:
        fs = periods.forward_start
        df = self.candles
        records = ctx.ledger.snapshot()  # the tables built on first read: the records the figures are of
        trades, curves, stats, balance, equity, equity_path = broker_figures(
            ctx, fs, last, self.account, tables=records
        )  # the tables built on first read
        ctx.market.release()  # the bar loop's screen and the curves the figures came from: the result
        ctx.ledger.release()  # holds its own, and a next run's arrays can take their memory
        times = df.index[fs : last + 1]
        after = "after the run"
        predictions = None
        evaluated = call_hook(ea, "evaluate_predictions", feed.bars.window(0, last + 1), where=after)
        if evaluated is not None and not (
            isinstance(evaluated, dict) and evaluated.keys() >= _PREDICTION_KEYS
        ):
            problem = TypeError(
                f"returned {type(evaluated).__name__}, not a dict with {sorted(_PREDICTION_KEYS)}"
            )
            raise EARuntimeError(type(ea).__name__, "evaluate_predictions", after, problem, None, None)
        if evaluated is not None:
            predictions = metrics.prediction_report(evaluated, fs, last + 1)
        section = call_hook(ea, "report_section", feed.bars.window(0, last + 1), where=after)
        timings["evaluate_s"] = _lap(clock)
        criterion = None  # ExpertAdvisor's own on_tester returns None: its copy of the figures is not made
        if _scores_itself(ea):
            criterion = _criterion(ea, call_hook(ea, "on_tester", copy.deepcopy(stats), where=after))
        return Result(
            ea=call_hook(ea, "describe", where=after),
            data={
                **self.meta.to_dict(),
                "bars": len(df),
                "first": str(df.index[0]),
                "last": str(df.index[-1]),
                "forward_first": str(df.index[fs]),
                "forward_last": str(df.index[last]),
                **model_data(self.model, ctx, fs, last, self.m1 is None or bool(self.m1["spread"].any())),
            },
            account=self.account.to_dict(),
            periods={**periods.to_dict(), "forward_rule": self.forward_rule},
            trades=trades,
            time=times,
            balance=balance,
            equity=equity,
            stats=stats,
            predictions=predictions,
            training=list(ea.training_log),
            timings=timings,
            rejected=list(records.rejected),
            complete=complete,
            seed=self.seed,
            custom_criterion=criterion,
            chart_data=chart_data(feed, evaluated, fs, last, indicators=ea.declared_indicators()),
            section=section,
            ea_instance=ea,
            orders=records.orders_frame,  # built on first read (``Result``) from the records at the end
            deals=records.deals_frame,
            curves=curves,
            equity_path=equity_path,
        )


def _tick_symbol(ticks: pd.DataFrame, frames: Mapping[str, pd.DataFrame]) -> str:
    """The symbol one tick frame given to a multi-symbol run belongs to: its own name, else the only
    symbol loaded."""
    name = getattr(ticks.attrs.get("ticks"), "symbol", None)
    if name:
        return str(name).upper()
    if len(frames) == 1:
        return next(iter(frames))
    raise ModelDataError("ticks without a symbol name: give ticks={symbol: ticks, ...} for several symbols")


def _check_declared(ea: type[ExpertAdvisor], meta) -> None:
    """An EA that declares one symbol or timeframe runs on candles of that symbol and timeframe only."""
    if ea.symbols and ea.symbols[0] != meta.symbol:
        raise SymbolsError(f"{ea.__name__} trades {ea.symbols[0]}, but the candles given are {meta.symbol}'s")
    if ea.timeframes and str(ea.timeframes[0]).strip().upper() != meta.timeframe.name:
        raise SymbolsError(
            f"{ea.__name__} reads {ea.timeframes[0]}, but the candles given are {meta.timeframe.name} bars"
        )


def _scores_itself(ea: ExpertAdvisor) -> bool:
    """Whether the EA has an ``on_tester`` of its own, in its class or set on the instance."""
    return getattr(ea.on_tester, "__func__", None) is not ExpertAdvisor.on_tester


def _criterion(ea: ExpertAdvisor, value: Any) -> float | None:
    """``on_tester``'s return as a number (None when it returns None); anything else is the EA's failure."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        problem = TypeError(f"returned {value!r}, not a number")
        raise EARuntimeError(type(ea).__name__, "on_tester", "after the run", problem, None, None) from None


def chart_data(
    feed: BarFeed, evaluated: dict | None, fs: int, last: int, span: int | None = None, indicators=()
) -> dict:
    """The forward bars (the last ``span`` of them, if given) for the price chart: OHLC, the bar spread
    (points), true/predicted classes if any, and the indicator lines the EA declared (``(name, values)``
    of each 1-D line or column)."""
    a = fs if span is None else max(fs, last + 1 - span)
    out = {"index": np.arange(a, last + 1), "time": feed.time[a : last + 1]}
    for name in ("open", "high", "low", "close"):
        out[name] = feed.column(name)[a : last + 1]
    if evaluated is not None:
        out["y_true"] = np.asarray(evaluated["y_true"])[a : last + 1]
        out["y_pred"] = np.asarray(evaluated["y_pred"])[a : last + 1]
    lines: dict[str, np.ndarray] = {}
    for line, _ in indicators:
        values = line.closed()[a : last + 1]  # the bars closed by the run's end, no copy
        if values.ndim == 1:
            lines[line.name] = values
        elif values.ndim == 2:
            lines.update({f"{line.name}[{k}]": values[:, k] for k in range(values.shape[1])})
    out["indicators"] = lines
    return out


def default_forward(ea: type[ExpertAdvisor], forward, walk_forward) -> tuple[object, str]:
    """The forward period a run uses and a line saying why: ``"auto"`` is the last third for an EA that
    studies (it would otherwise be judged on bars it trained on) and every bar for one that does not."""
    if walk_forward is not None:
        return forward, "walk-forward: each test window is traded by the EA trained on the bars before it"
    if not (isinstance(forward, str) and forward.strip().lower() == "auto"):
        return forward, f"forward {forward}" if forward is not None else "no forward split: every bar traded"
    if ea.on_study is not ExpertAdvisor.on_study:
        return "1/3", f"the last third (default: {ea.__name__} studies the bars before it)"
    return None, f"every bar (default: {ea.__name__} does not study, so no bars are held out)"


def _lap(start: float) -> float:
    return round(time.perf_counter() - start, 6)
