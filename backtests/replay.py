"""Replay history bar by bar through an expert advisor ("open prices only"), then score the run.

At each forward bar ``t`` the broker first applies swaps and stops gapped through by the open, the EA
decides with bars ``0..t-1`` visible, market orders fill at bar ``t``'s open, and stops are then checked
on bar ``t``'s high/low. Training (``on_study``) sees only the study window. Indicators are computed once
over the history and checked for causality by recomputing them on shorter prefixes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from backtests import metrics
from backtests.broker import AccountConfig, Broker
from backtests.periods import Periods, resolve
from datafeeds import meta_of
from strategies.base import Bars, ExpertAdvisor, ReportSection

log = logging.getLogger(__name__)


class LookAheadError(ValueError):
    """An indicator's past values changed when future bars were added: it peeks ahead."""


class EARuntimeError(ValueError):
    """The expert advisor's own code raised; the message names the hook, bar and time.

    A ValueError so the command line reports it in one line: the fix is in the EA, not in neuronet.
    """


@dataclass
class Result:
    """Everything a run produced; ``backtests.report`` writes it to disk."""

    ea: dict
    data: dict
    account: dict
    periods: dict
    trades: pd.DataFrame
    time: pd.DatetimeIndex  # forward bars
    balance: np.ndarray  # (F,) at each forward bar's close
    equity: np.ndarray  # (F,)
    stats: dict
    predictions: dict | None
    training: list[dict]
    timings: dict
    rejected: list[dict]
    complete: bool
    seed: int
    custom_criterion: float | None = None
    chart_data: dict = field(default_factory=dict)
    section: ReportSection | None = None
    ea_instance: ExpertAdvisor | None = None


class _Context(Broker):
    """The broker plus indicator evaluation: everything an EA may reach during a run."""

    def __init__(self, bars: Bars, probe_points: Callable[[], list[int]], *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._all = bars
        self._probe_points = probe_points

    def indicator(self, fn: Callable[[Bars], np.ndarray], name: str) -> np.ndarray:
        full = self._evaluate(fn, self._all, name)
        for m in self._probe_points():
            prefix = self._evaluate(fn, self._all.window(0, m), name)
            same = np.isclose(prefix, full[:m], rtol=1e-9, atol=1e-12, equal_nan=True)
            if not same.all():
                bad = int(np.argwhere(~same.reshape(m, -1).all(axis=1))[0, 0])
                raise LookAheadError(
                    f"indicator {name!r} looks ahead: its value on bar {bad} ({self.time[bad]}) changes when "
                    f"bars after bar {m - 1} are added"
                )
        return full

    @staticmethod
    def _evaluate(fn: Callable[[Bars], np.ndarray], bars: Bars, name: str) -> np.ndarray:
        values = np.asarray(fn(bars), dtype=np.float64)
        if values.shape[:1] != (len(bars),):
            raise ValueError(f"indicator {name!r} returned shape {values.shape} for {len(bars)} bars")
        return values


class Backtest:
    """Run an expert advisor over candles with a study/forward split.

    ``forward``: ``"1/3"`` (default), ``"1/2"``, ``"1/4"``, any fraction, a date, or None (no held-out
    split). ``walk_forward=(train, test)`` trains on ``train`` bars and retrains every ``test`` bars.
    """

    def __init__(
        self,
        candles: pd.DataFrame,
        ea: type[ExpertAdvisor],
        *,
        account: AccountConfig | None = None,
        forward: str | float | pd.Timestamp | None = "1/3",
        walk_forward: tuple[int, int] | None = None,
        seed: int = 0,
        progress: bool = False,
    ):
        if not (isinstance(ea, type) and issubclass(ea, ExpertAdvisor)):
            raise TypeError(f"{ea!r} is not an ExpertAdvisor subclass")
        self.candles = candles
        self.meta = meta_of(candles)
        self.ea_class = ea
        self.account = account or AccountConfig()
        self.seed = int(seed)
        self.progress = progress
        min_study = int(ea.min_study_bars)
        self.periods: Periods = resolve(candles.index, forward, walk_forward, min_study=min_study)

    def run(self, **params) -> Result:
        """Replay the forward period; ``params`` override the EA's class-attribute parameters.

        A KeyboardInterrupt ends the replay early: the result is kept and marked incomplete.
        """
        timings: dict[str, float] = {}
        clock = time.perf_counter()
        if "seed" in self.ea_class.param_defaults() and "seed" not in params:
            params["seed"] = self.seed
        ea = self.ea_class(**params)
        periods = self.periods
        if periods.retrain_every == 0 and ea.retrain_every > 0:  # the EA asks for periodic retraining
            periods = replace(periods, retrain_every=int(ea.retrain_every))
        df = self.candles
        bars = Bars.from_frame(df, self.meta, end=0)
        fs, n = periods.forward_start, periods.n
        rng = np.random.default_rng(self.seed)

        def probes() -> list[int]:
            points = {fs, n // 2, int(rng.integers(max(2, n // 4), n))}
            return sorted(m for m in points if 2 <= m < n)

        ctx = _Context(
            bars.window(0, n),
            probes,
            bars._cols["open"],
            bars._cols["high"],
            bars._cols["low"],
            bars._cols["close"],
            bars._cols["spread"],
            df.index,
            self.meta.point,
            self.account,
        )
        epoch_bar = _EpochProgress(self.progress)
        ea.attach(ctx, bars, epoch_bar.update)
        complete = True
        try:
            _guard(ea, "on_init", ea.on_init)
            timings["init_s"] = _lap(clock)
            clock = time.perf_counter()
            a, b = periods.study_range(fs)
            bars._end = fs
            ctx.t = fs
            _guard(ea, "on_study", ea.on_study, bars.window(a, b), when=f" before bar {fs} ({df.index[fs]})")
            epoch_bar.close()
            timings["study_s"] = _lap(clock)
            clock = time.perf_counter()
            self._replay(ea, ctx, bars, periods, timings)
            timings["replay_s"] = round(_lap(clock) - timings.get("retrain_s", 0.0), 6)  # bars only
        except KeyboardInterrupt:
            complete = False
            log.warning(
                "interrupted at bar %d (%s): keeping the partial run", ctx.t, df.index[min(ctx.t, n - 1)]
            )
        finally:
            epoch_bar.close()
        # An interrupted bar already had its open; close the run at that bar's close.
        last = n - 1 if complete else max(fs, min(ctx.t, n - 1))
        timings.setdefault("replay_s", _lap(clock))
        clock = time.perf_counter()
        ctx.finish(last)
        _guard(ea, "on_deinit", ea.on_deinit)
        return self._score(ea, ctx, bars, periods, last, complete, timings, clock)

    def _replay(self, ea: ExpertAdvisor, ctx: _Context, bars: Bars, periods: Periods, timings: dict) -> None:
        fs, n, every = periods.forward_start, periods.n, periods.retrain_every
        study_s = 0.0
        progress = _BarProgress(self.progress, n - fs)
        on_bar, bar_open, bar_range = ea.on_bar, ctx.bar_open, ctx.bar_range
        try:
            for t in range(fs, n):
                if every and t > fs and (t - fs) % every == 0:
                    tick = time.perf_counter()
                    bars._end = t
                    ctx.t = t
                    a, b = periods.study_range(t)
                    _guard(
                        ea,
                        "on_study",
                        ea.on_study,
                        bars.window(a, b),
                        when=f" before bar {t} ({bars._time[t]})",
                    )
                    study_s += time.perf_counter() - tick
                bar_open(t)
                bars._end = t
                try:
                    on_bar()
                except KeyboardInterrupt:
                    raise
                except Exception as exc:
                    raise EARuntimeError(
                        f"{type(ea).__name__}.on_bar raised at bar {t} ({bars._time[t]}): "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                bar_range(t)
                if progress.enabled and (t - fs) % 2048 == 0:
                    progress.to(t - fs)
        finally:
            progress.close()
        if every:
            timings["retrain_s"] = study_s

    def _score(self, ea, ctx, bars, periods: Periods, last, complete, timings, clock) -> Result:
        fs = periods.forward_start
        df = self.candles
        balance, equity, margin = ctx.curves(fs)
        balance, equity, margin = balance[: last - fs + 1], equity[: last - fs + 1], margin[: last - fs + 1]
        times = df.index[fs : last + 1]
        trades = ctx.trades_frame()
        close = bars._cols["close"]
        stats = metrics.trade_stats(
            trades,
            balance,
            equity,
            margin,
            times,
            deposit=self.account.deposit,
            deals=ctx.deals,
            first_open=float(bars._cols["open"][fs]),
            last_close=float(close[last]),
        )
        predictions = None
        evaluated = ea.evaluate_predictions(bars.window(0, last + 1))
        if evaluated is not None:
            predictions = metrics.prediction_report(evaluated, fs, last + 1)
        section = ea.report_section(bars.window(0, last + 1))
        timings["evaluate_s"] = _lap(clock)
        criterion = ea.on_tester(stats)
        return Result(
            ea=ea.describe,
            data={
                **self.meta.to_dict(),
                "bars": len(df),
                "first": str(df.index[0]),
                "last": str(df.index[-1]),
                "forward_first": str(df.index[fs]),
                "forward_last": str(df.index[last]),
            },
            account=self.account.to_dict(),
            periods=periods.to_dict(),
            trades=trades,
            time=times,
            balance=balance,
            equity=equity,
            stats=stats,
            predictions=predictions,
            training=list(ea.training_log),
            timings=timings,
            rejected=list(ctx.rejected),
            complete=complete,
            seed=self.seed,
            custom_criterion=None if criterion is None else float(criterion),
            chart_data=_chart_data(bars, evaluated, fs, last),
            section=section,
            ea_instance=ea,
        )


def _chart_data(bars: Bars, evaluated: dict | None, fs: int, last: int, span: int = 160) -> dict:
    """The last ``span`` forward bars for the price chart: OHLC plus true/predicted classes if any."""
    a = max(fs, last + 1 - span)
    out = {
        "index": np.arange(a, last + 1),
        "time": bars._time[a : last + 1],
        "open": bars._cols["open"][a : last + 1],
        "high": bars._cols["high"][a : last + 1],
        "low": bars._cols["low"][a : last + 1],
        "close": bars._cols["close"][a : last + 1],
    }
    if evaluated is not None:
        out["y_true"] = np.asarray(evaluated["y_true"])[a : last + 1]
        out["y_pred"] = np.asarray(evaluated["y_pred"])[a : last + 1]
    return out


def _guard(ea: ExpertAdvisor, hook: str, fn: Callable, *args, when: str = "") -> None:
    """Run an EA hook; errors that are not already user errors are reported with the hook's name."""
    try:
        fn(*args)
    except (KeyboardInterrupt, ValueError, OSError, LookupError):
        raise
    except Exception as exc:
        raise EARuntimeError(f"{type(ea).__name__}.{hook} raised{when}: {type(exc).__name__}: {exc}") from exc


def _lap(start: float) -> float:
    return round(time.perf_counter() - start, 6)


class _BarProgress:
    """A tqdm bar over replayed bars, updated every few thousand bars so it costs nothing per bar."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="bar", desc="replay", leave=False)

    def to(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.update(self._bar.total - self._bar.n)
            self._bar.close()
            self._bar = None


class _EpochProgress:
    """Epoch progress from the EA's training records: loss and seconds per epoch.

    One bar per training round (walk-forward retrains, or a record count reaching the announced total, start
    a new one), so the count never runs past its total."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._bar = None
        self._round = None

    def update(self, record: dict) -> None:
        if not self.enabled:
            return
        total = record.get("epochs")
        full = self._bar is not None and total is not None and self._bar.n >= (self._bar.total or 0)
        if self._bar is not None and (record.get("round") != self._round or full):
            self.close()
        if self._bar is None:
            from tqdm import tqdm

            self._round = record.get("round")
            desc = "training" if self._round is None else f"training round {self._round}"
            self._bar = tqdm(total=total, unit="epoch", desc=desc, leave=False)
        self._bar.update(1)
        shown = {"loss": f"{record.get('loss') or float('nan'):.4f}", "s": f"{record.get('wall_s') or 0:.2f}"}
        for key, label in (("train_hit_rate", "forecast"), ("train_missed_rate", "undefine")):
            if record.get(key) is not None:
                shown[label] = f"{100 * record[key]:.1f}%"
        self._bar.set_postfix(shown)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
