"""One optimisation pass and batches of them: the code that runs on a Dask worker.

A pass is one ``Backtest.run`` of the EA with one parameter set over one window of the candles. Workers
get the market data once (``Market``: the candles and, for the ohlc1m and ticks models, the M1 bars or
ticks; scattered by the client) and a batch of parameter sets per task; each pass takes its window's part
of the finer data as a view, never a copy. Workers return plain dicts and never touch the study store, so
only the client writes to the database.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig
from backtests.optimize.criteria import PASS_STATS, Criterion
from backtests.peers import day_closes
from backtests.periods import resolve
from backtests.replay import Backtest
from backtests.result import PassFigures
from datafeeds import meta_of
from strategies.base import ExpertAdvisor


@dataclass(frozen=True)
class Job:
    """What every pass of one optimisation shares (picklable: sent with each task)."""

    ea: type[ExpertAdvisor]
    criterion: Criterion
    account: AccountConfig = field(default_factory=AccountConfig)
    seed: int = 0
    fixed: dict = field(default_factory=dict)
    model: str = "open"  # the modelling mode (backtests.paths.MODELS); its data travels in the Market
    specs: dict | None = None  # symbol specifications of a multi-symbol EA (None: the built-in table)


@dataclass(frozen=True)
class Market:
    """What every pass reads, sent to each worker once: the EA's candles and the finer data of the
    modelling mode (``m1`` for ohlc1m, ``ticks`` for ticks) over the same span or more."""

    candles: pd.DataFrame
    m1: pd.DataFrame | dict[str, pd.DataFrame] | None = None  # several symbols: one frame each
    ticks: pd.DataFrame | None = None
    # A multi-symbol EA's other symbols (``backtests.multi``): each pass takes their bars of its window's
    # time span; the windows count the main chart's bars (``candles``)
    others: dict[str, pd.DataFrame] | None = None


def market_of(data: Market | pd.DataFrame) -> Market:
    """A ``Market`` from itself or from bare candles (the open-prices model)."""
    return data if isinstance(data, Market) else Market(data)


@dataclass(frozen=True)
class Window:
    """Bars ``[start, stop)`` of the candles; trading starts at ``trade_from`` (None: as soon as the EA may).

    With ``trade_from`` set, the bars before it are the study period (training, indicator warm-up), as a
    backtest's forward split; without it the whole window is traded, as an in-sample optimisation pass.
    """

    start: int
    stop: int
    trade_from: int | None = None


def in_sample(candles: pd.DataFrame, job: Job, start: int, stop: int, split: str | float | None) -> Window:
    """The optimisation window ``[start, stop)``; with ``split`` (``"1/3"``, a fraction, a date) each pass
    trains on the first part and is judged on the last, so an EA that learns is scored on bars it did
    not train on. Without it the whole window is traded after the EA's ``min_study_bars``."""
    if split is None:
        return Window(start, stop)
    periods = resolve(candles.index[start:stop], split, min_study=job.ea.min_study_bars)
    return Window(start, stop, trade_from=start + periods.forward_start)


def make_backtest(data: Market | pd.DataFrame, job: Job, window: Window) -> Backtest:
    """The window's backtest in the job's modelling mode, with the finer data of the window's span."""
    market = market_of(data)
    df = market.candles.iloc[window.start : window.stop]
    forward = None if window.trade_from is None else df.index[window.trade_from - window.start]
    end = df.index[-1] + pd.Timedelta(seconds=meta_of(df).timeframe.seconds)  # the last bar's close
    if window.stop < len(market.candles):
        end = min(end, market.candles.index[window.stop])
    data: pd.DataFrame | dict[str, pd.DataFrame] = df
    if market.others:
        data = {meta_of(df).symbol: df, **{s: _span(o, df.index[0], end) for s, o in market.others.items()}}
    m1 = market.m1
    if isinstance(m1, dict):
        m1 = {s: _span(f, df.index[0], end) for s, f in m1.items()}
    else:
        m1 = _span(m1, df.index[0], end)
    return Backtest(
        data, job.ea, account=job.account, forward=forward, seed=job.seed, model=job.model, m1=m1,
        ticks=_span(market.ticks, df.index[0], end), **({} if job.specs is None else {"specs": job.specs}),
    )  # fmt: skip


def _span(fine, start: pd.Timestamp, end: pd.Timestamp):
    """Rows of ``fine`` in ``[start, end)``: a positional slice (a view of the worker's copy); of each
    symbol's frame where ``fine`` holds one per symbol."""
    if fine is None:
        return None
    if isinstance(fine, Mapping):
        return {name: _span(frame, start, end) for name, frame in fine.items()}
    a, b = fine.index.searchsorted([start, end], side="left")
    out = fine.iloc[a:b]
    out.attrs = dict(fine.attrs)
    return out


def pass_keys(job: Job) -> frozenset[str]:
    """The statistics a pass computes: those the results table keeps and the criterion reads."""
    return frozenset((*PASS_STATS, *([job.criterion.field] if job.criterion.field else [])))


def run_one(bt: Backtest, job: Job, params: dict) -> PassFigures:
    """Run one pass, computing only the figures it keeps (``Backtest.run_pass``: the same numbers as a
    backtest's report); a Ctrl-C inside the replay must stop the optimisation, not record a partial pass."""
    result = bt.run_pass({**job.fixed, **params}, pass_keys(job))
    if not result.complete:
        raise KeyboardInterrupt
    return result


def daily_returns(index: pd.DatetimeIndex, equity: np.ndarray) -> list[float]:
    """The pass's equity returns per trading day, from its curve (``index``, ``equity``: the start row, the
    deposit, then each forward bar's close): the last equity of each day, from the start row's deposit, on
    trading days as ``backtests.peers`` counts them (weekend bars go to Monday unless the data trades at
    weekends). One row of the pass × period matrix of the Probability of Backtest Overfitting, and the
    series of the Deflated Sharpe Ratio and the SPA test (``backtests.robustness.optimisation``)."""
    if len(index) < 2:
        return []
    daily = day_closes(pd.DatetimeIndex(index), np.asarray(equity, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        returns = np.where(daily[:-1] > 0, daily[1:] / daily[:-1] - 1.0, 0.0)
    return [round(float(r), 12) for r in returns]


def summarize(result: PassFigures, job: Job) -> dict[str, Any]:
    """The figures the results table keeps for one pass (JSON-ready), with its daily returns."""
    stats = {k: result.stats.get(k) for k in PASS_STATS}
    stats["custom"] = result.custom_criterion
    stats["daily_returns"] = daily_returns(result.curve_time, result.curve_equity)
    return {"value": job.criterion.value(result.stats, result.custom_criterion), "stats": stats}


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C inside a batch (``args[0]``: the ``(params, row)`` of its passes that finished before it),
    so that they are recorded as every finished pass is; picklable, as a task's exception travels."""

    @property
    def finished(self) -> list[tuple[dict, dict]]:
        return self.args[0] if self.args else []


def run_batch(market: Market, job: Job, window: Window, batch: list[dict]) -> list[dict]:
    """Run parameter sets one after another; a set the EA refuses is a failed pass, not a failed task.

    Each output dict has ``value`` (the criterion or None), ``stats``, ``seconds`` and ``error`` (None, or
    the EA's one-line complaint such as ``fast < slow`` violated). Ctrl-C in a pass raises
    ``BatchInterrupted`` with the passes finished before it.
    """
    bt = make_backtest(market, job, window)
    out = []
    for params in batch:
        tick = time.perf_counter()
        try:
            row = summarize(run_one(bt, job, params), job)
            row["error"] = None
        except (ValueError, LookupError, ArithmeticError) as exc:
            row = {"value": None, "stats": {}, "error": f"{type(exc).__name__}: {exc}"}
        except KeyboardInterrupt:
            raise BatchInterrupted(list(zip(batch, out, strict=False))) from None
        row["seconds"] = time.perf_counter() - tick
        out.append(row)
    return out


def run_curve(market: Market, job: Job, window: Window, params: dict) -> dict[str, Any]:
    """One pass with its equity curve (forward tests and walk-forward test windows)."""
    bt = make_backtest(market, job, window)
    result = run_one(bt, job, params)
    row = summarize(result, job)
    row["time"] = np.asarray(result.time.asi8)
    row["equity"] = np.asarray(result.equity, dtype=np.float64)
    return row


def run_curves(market: Market, job: Job, tasks: list[tuple[Window, dict]]) -> list[dict]:
    """Several ``run_curve`` calls in one task; a refused parameter set gives ``{"error": ...}``."""
    out = []
    for window, params in tasks:
        try:
            out.append(run_curve(market, job, window, params))
        except (ValueError, LookupError, ArithmeticError) as exc:
            out.append({"value": None, "stats": {}, "error": f"{type(exc).__name__}: {exc}"})
    return out
