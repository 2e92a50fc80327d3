"""``optimize``: the Python entry point of the Strategy Tester's optimisation, with forward testing.

The optimisation period is the data before the forward split (all of it without one); each pass trades
that period as an in-sample backtest. The best ``top`` passes are then run again on the forward period,
with the optimisation period as their study and warm-up history, and their figures are added to the table
as ``forward_*`` columns (MetaTrader's "Forward results").
"""

from __future__ import annotations

import concurrent.futures
import hashlib
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig
from backtests.optimize import store
from backtests.optimize.criteria import Criterion, get_criterion
from backtests.optimize.engine import Engine
from backtests.optimize.lock import locked
from backtests.optimize.passes import Job, Market, Window, in_sample, make_backtest, run_curves
from backtests.optimize.results import results_table, top_passes
from backtests.optimize.search import Plan, Search
from backtests.optimize.space import ParamSpace, parse_space
from backtests.paths import check_model
from backtests.periods import PeriodError, resolve
from backtests.robustness.optimisation import (
    DEFAULT_REPS,
    DEFAULT_SPLITS,
    check_options,
    optimisation_robustness,
    passes_rows,
)
from datafeeds import meta_of
from strategies.base import ExpertAdvisor

FORWARD_STATS = (
    "final_balance",
    "total_net_profit",
    "profit_factor",
    "equity_drawdown_relative_pct",
    "total_trades",
)


@dataclass
class Setup:
    """What ``optimize`` and ``walk_forward`` share: the parsed space, the job, the plan, the store."""

    market: Market
    space: ParamSpace
    job: Job
    plan: Plan
    storage: str | None
    progress: bool
    split: str | float | None = None  # each pass's own study/judged split of its window

    @property
    def candles(self) -> pd.DataFrame:
        return self.market.candles

    def window(self, start: int, stop: int) -> Window:
        return in_sample(self.candles, self.job, start, stop, self.split)

    def identity(self, window: Window) -> dict:
        """Everything that changes the passes' figures; the study name is its hash."""
        return {
            **self.space.describe(),
            "criterion": self.job.criterion.name,
            "method": self.plan.method,
            "seed": self.plan.seed,
            "round_size": self.plan.round_size if self.plan.method in ("tpe", "genetic") else None,
            "population": self.plan.population if self.plan.method == "genetic" else None,
            "account": self.job.account.to_dict(),
            **self._specs_identity(),
            "data": fingerprint(self.candles),
            **self._model_identity(),
            **(
                {"others": {s: fingerprint(o) for s, o in self.market.others.items()}}
                if self.market.others
                else {}
            ),
            "window": [window.start, window.stop, window.trade_from],
        }

    def _specs_identity(self) -> dict:
        """A symbols file's specifications (none for the built-in table: those studies keep their names)."""
        if self.job.specs is None:
            return {}
        return {"specs": {name: spec.to_dict() for name, spec in sorted(self.job.specs.items())}}

    def _model_identity(self) -> dict:
        """The modelling mode and its data (none for open prices: those studies keep their names)."""
        if self.job.model == "open":
            return {}
        fine = self.market.m1 if self.job.model == "ohlc1m" else self.market.ticks
        columns = ["open", "high", "low", "close", "spread"] if self.job.model == "ohlc1m" else ["bid", "ask"]

        def identity(frame: pd.DataFrame) -> dict:
            prices = np.ascontiguousarray(frame[columns].to_numpy(np.float64))
            digest = hashlib.sha1(prices.tobytes() + frame.index.asi8.tobytes()).hexdigest()
            return {"rows": len(frame), "sha1": digest}

        if isinstance(fine, Mapping):  # several symbols: each one's
            return {"model": self.job.model, "model_data": {s: identity(f) for s, f in sorted(fine.items())}}
        return {"model": self.job.model, "model_data": identity(fine)}

    def study(self, window: Window) -> store.Store:
        return store.open_study(*self._study_args(window))

    def _study_args(self, window: Window) -> tuple[str | None, str, str, dict]:
        """``store.open_study``'s arguments for the window's study."""
        identity = self.identity(window)
        return self.storage, store.study_name(identity), self.job.criterion.direction, identity

    def search(self, window: Window, engine: Engine, shared: Any, label: str = "optimise") -> Search:
        """The window's search, run: its study, its passes, how many ran now (the rest were recorded).
        A study that holds no pass yet is opened on a thread while the first passes run."""
        make_backtest(self.market, self.job, window)  # bad periods or data fail here, before any pass
        args = self._study_args(window)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="open-study") as opener:
            if store.holds_no_study(self.storage, args[1]):
                study = opener.submit(store.open_study, *args)
            else:
                study = store.open_study(*args)
            plan = self.plan
            search = Search(study, self.space, self.job, window, plan, engine, shared, self.progress, label)
            search.run()
        return search


def setup(
    candles: pd.DataFrame | Mapping[str, pd.DataFrame],
    ea: type[ExpertAdvisor],
    space: ParamSpace | Mapping[str, Any] | Iterable[str],
    *,
    method: str,
    criterion: str | Criterion,
    passes: int | None,
    seed: int,
    account: AccountConfig | None,
    fixed: Mapping[str, Any] | None,
    store_path: str | None,
    progress: bool,
    round_size: int,
    population: int,
    batch: int | None,
    split: str | float | None = None,
    model: str = "open",
    m1: pd.DataFrame | Mapping[str, pd.DataFrame] | None = None,
    ticks: pd.DataFrame | None = None,
    specs: Mapping[str, Any] | None = None,
) -> Setup:
    others = None
    if isinstance(candles, Mapping):  # several symbols: the first is the main chart, whose bars count
        frames = dict(candles)
        main = next(iter(frames))
        candles, others = frames.pop(main), frames
    if not len(candles):
        raise PeriodError("no bars to optimise on (0 bars in the range); widen --from/--to")
    if not isinstance(space, ParamSpace):
        space = parse_space(ea, space, fixed)
    crit = criterion if isinstance(criterion, Criterion) else get_criterion(criterion)
    model = check_model(model, m1, ticks)
    if isinstance(m1, Mapping):
        m1 = dict(m1)
    specs = None if specs is None else dict(specs)
    job = Job(ea, crit, account or AccountConfig(), int(seed), dict(space.fixed), model, specs)
    plan = Plan(method, passes, int(seed), round_size, population, batch)
    storage = None if store_path is None else store.storage_url(store_path)
    return Setup(Market(candles, m1, ticks, others), space, job, plan, storage, progress, split)


def fingerprint(candles: pd.DataFrame) -> dict:
    """Symbol, timeframe, range and a hash of the prices: a study never resumes on other data."""
    meta = meta_of(candles)
    prices = np.ascontiguousarray(candles[["open", "high", "low", "close", "spread"]].to_numpy(np.float64))
    return {
        "symbol": meta.symbol,
        "timeframe": meta.timeframe.name,
        "bars": len(candles),
        "first": str(candles.index[0]) if len(candles) else None,
        "last": str(candles.index[-1]) if len(candles) else None,
        "sha1": hashlib.sha1(prices.tobytes() + candles.index.asi8.tobytes()).hexdigest(),
    }


@contextmanager
def session(market: Market, workers: int | None, scheduler: str | None):
    """An engine with the market data (candles, M1 bars or ticks) already on every worker, sent once."""
    with Engine(workers, scheduler) as engine:
        yield engine, engine.share(market)


def optimize(
    candles: pd.DataFrame | Mapping[str, pd.DataFrame],
    ea: type[ExpertAdvisor],
    space: ParamSpace | Mapping[str, Any] | Iterable[str],
    *,
    method: str = "grid",
    criterion: str | Criterion = "balance",
    passes: int | None = None,
    forward: str | float | pd.Timestamp | None = None,
    top: int = 10,
    seed: int = 0,
    account: AccountConfig | None = None,
    fixed: Mapping[str, Any] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    store_path: str | None = None,
    progress: bool = False,
    round_size: int = 16,
    population: int = 20,
    batch: int | None = None,
    split: str | float | None = None,
    model: str = "open",
    m1: pd.DataFrame | Mapping[str, pd.DataFrame] | None = None,
    ticks: pd.DataFrame | None = None,
    specs: Mapping[str, Any] | None = None,
    spa_reps: int = DEFAULT_REPS,
    pbo_splits: int = DEFAULT_SPLITS,
) -> pd.DataFrame:
    """Optimise ``ea``'s parameters over ``space`` and return the results table, best pass first.

    ``space``: ``{"fast": "5:50:5", "slow": [20, 30]}`` or ``["fast=5:50:5", ...]``. ``forward``: as
    ``Backtest`` (``"1/3"``, a date; None: optimise on every bar, no forward test). ``store_path``: the
    SQLite file (or an RDB URL) that keeps every pass; the same call resumes from it. ``workers=0`` runs
    inline; ``scheduler="tcp://HOST:8786"`` uses a running Dask cluster. ``split``: each pass's own
    forward split of the optimisation period (for EAs that train: score them on bars they did not learn).
    ``model``/``m1``/``ticks``: the modelling mode of every pass, as ``Backtest``'s (the M1 bars or ticks
    go to each worker once; each pass takes its window's part; several symbols: ``m1`` a frame per symbol).
    ``specs``: the symbols' specifications, as ``Backtest``'s. ``table.attrs["robustness"]``: the best
    pass's Deflated Sharpe Ratio, the PBO and the SPA p-value (``backtests.robustness.optimisation``; the
    SPA test with ``spa_reps`` bootstrap replicates, CSCV with ``pbo_splits`` blocks, seeded by ``seed``).
    """
    check_options(spa_reps, pbo_splits)
    s = setup(
        candles, ea, space, method=method, criterion=criterion, passes=passes, seed=seed, account=account,
        fixed=fixed, store_path=store_path, progress=progress, round_size=round_size,
        population=population, batch=batch, split=split, model=model, m1=m1, ticks=ticks, specs=specs,
    )  # fmt: skip
    candles = s.candles  # the main chart's (several symbols: the first's)
    n = len(candles)
    fs = n if forward is None else resolve(candles.index, forward, min_study=ea.min_study_bars).forward_start
    window = s.window(0, fs)
    with locked(s.storage), session(s.market, workers, scheduler) as (engine, shared):
        where = engine.where
        search = s.search(window, engine, shared)
        table = results_table(search.passes, s.space, s.job.criterion)
        robustness = robustness_of(search, table, seed, spa_reps, pbo_splits)
        if fs < n and top > 0:
            table = add_forward(table, s, engine, shared, Window(0, n, trade_from=fs), top)
    table.attrs.update(
        criterion=s.job.criterion.name,
        direction=s.job.criterion.direction,
        method=method,
        study=search.durable.study.study_name,
        storage=s.storage,
        optimisation=[str(candles.index[0]), str(candles.index[fs - 1])],
        forward=[str(candles.index[fs]), str(candles.index[-1])] if fs < n else None,
        where=where,
        ran=search.ran,
        robustness=robustness,
    )
    return table


def robustness_of(search: Search, table: pd.DataFrame, seed: int, reps: int, splits: int) -> dict:
    """The search's Deflated Sharpe Ratio, PBO and SPA p-value (the best pass: the table's first row)."""
    defined = table[table["criterion"].notna()]
    best = int(defined.iloc[0]["pass"]) if len(defined) else None
    return optimisation_robustness(passes_rows(search.passes), best, seed=seed, reps=reps, splits=splits)


def add_forward(
    table: pd.DataFrame, s: Setup, engine: Engine, shared: Any, window: Window, top: int
) -> pd.DataFrame:
    """Run the ``top`` best passes on the forward window and add ``forward_*`` columns."""
    chosen = top_passes(table, s.space, top)
    tasks = [(i, (s.job, [(window, p)])) for i, p in enumerate(chosen)]
    forward: dict[int, dict] = dict(engine.stream(run_curves, shared, tasks))
    table = table.copy()
    table["forward_criterion"] = np.nan
    for k in FORWARD_STATS:
        table[f"forward_{k}"] = np.nan
    for i in range(len(chosen)):
        row = forward[i][0]
        idx = table.index[i]
        table.loc[idx, "forward_criterion"] = np.nan if row["value"] is None else row["value"]
        for k in FORWARD_STATS:
            value = row["stats"].get(k)
            table.loc[idx, f"forward_{k}"] = np.nan if value is None else value
    return table
