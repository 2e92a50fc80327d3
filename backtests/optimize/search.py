"""The search loop: an Optuna sampler proposes passes, the engine runs them, the store keeps them.

Interrupted and resumed equals uninterrupted. The durable study is a record of finished passes keyed by
their parameters, never the sampler's memory: every run starts the seeded sampler afresh and replays the
search from the first round, answering each proposal that the store already holds from the record and
running only the others. The sampler is told every result of a round in proposal order once the whole
round is back, whatever order the workers finish in, so the sequence of proposals and results it sees is
the same in an uninterrupted run, a resumed one and one on any number of workers: the same seed gives
the same passes, the same pass numbers and the same best pass. (Restoring a sampler from saved state
would depend on each sampler's internals; a replay depends only on its seed.)

- ``grid``: every point of the grid, run in a seeded random order (an interrupted grid is an even sample
  of the space); points already in the store are skipped. Pass ``k`` is grid point ``k`` in the order of
  the ``--param`` options, the last one varying fastest (MetaTrader's numbering of a complete search).
- ``random`` / ``tpe`` / ``genetic`` (``RandomSampler``, ``TPESampler``, ``NSGAIISampler``): proposals come
  in rounds of ``round_size``. A proposal equal to a pass already told is not run again: the sampler is
  told the recorded figure at once. Passes are numbered in the order the sampler first proposed them.

The sampler works on an in-memory study (asking on SQLite costs tens of milliseconds a pass, more than a
cheap backtest); finished passes are written to the durable study as they arrive. A study that cannot
hold a pass yet (a new store or a new study in it: ``store.holds_no_study``) is opened on a thread while
the first passes run (opening a SQLite store makes its tables and waits on the disk: 0.6-0.9 s on a busy
machine, as long as 40 passes of a cheap EA on two workers); the first batch is written once it is open.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from backtests.optimize import store
from backtests.optimize.engine import Engine
from backtests.optimize.errors import OptimizeError
from backtests.optimize.passes import BatchInterrupted, Job, Window, run_batch
from backtests.optimize.space import ParamSpace

log = logging.getLogger(__name__)

METHODS = ("grid", "genetic", "random", "tpe")
TPE_STARTUP = 10  # random passes before TPE models the results (Optuna's default); fixed, so that a
# study resumed with a larger --passes continues the same sequence of proposals


@dataclass(frozen=True)
class Plan:
    """How to search: ``passes`` bounds the non-grid methods (the grid always runs every point)."""

    method: str = "grid"
    passes: int | None = None
    seed: int = 0
    round_size: int = 16
    population: int = 20
    batch: int | None = None  # passes per task; None: sized from the work left and the workers

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise OptimizeError(f"unknown method {self.method!r}: choose from {', '.join(METHODS)}")
        if self.method != "grid" and (self.passes is None or self.passes < 1):
            raise OptimizeError(f"--method {self.method} needs --passes N (N >= 1)")
        for name in ("round_size", "population"):
            if getattr(self, name) < 2:
                raise OptimizeError(f"{name} must be at least 2")
        if self.batch is not None and self.batch < 1:
            raise OptimizeError("batch must be at least 1")


@dataclass(frozen=True)
class Pass:
    """One pass of a search: its stable number and its durable record."""

    number: int
    trial: FrozenTrial


@dataclass(frozen=True)
class _Proposal:
    trial: optuna.Trial  # the sampler's trial, told once the round is back
    params: dict
    key: str


def make_sampler(plan: Plan) -> optuna.samplers.BaseSampler:
    """The seeded sampler of a non-grid method (a fresh one replays the same proposals)."""
    if plan.method == "random":
        return optuna.samplers.RandomSampler(seed=plan.seed)
    if plan.method == "tpe":
        return optuna.samplers.TPESampler(seed=plan.seed, n_startup_trials=TPE_STARTUP)
    if plan.method == "genetic":
        return optuna.samplers.NSGAIISampler(population_size=plan.population, seed=plan.seed)
    raise OptimizeError(f"--method {plan.method} has no sampler")


class Search:
    """One optimisation over one window: the plan's passes, from the durable study or run now.

    ``durable``: the study's store, or the future of one being opened that holds none of the study's
    passes yet (a new study: nothing to read back, the first batch waits for it)."""

    def __init__(
        self,
        durable: store.Store | concurrent.futures.Future,
        space: ParamSpace,
        job: Job,
        window: Window,
        plan: Plan,
        engine: Engine,
        shared: object,
        progress: bool = True,
        label: str = "optimise",
    ):
        self._durable, self.space, self.job, self.window = durable, space, job, window
        self.plan, self.engine, self.shared = plan, engine, shared
        self.progress, self.label = progress, label
        self.recorded: dict[str, FrozenTrial] = {}  # every pass in the durable study, by parameters
        self.passes: list[Pass] = []  # this search's passes by number, once ``run`` returns
        self.ran = 0  # passes run now (the others were in the store)
        self.best: float | None = None
        self._bar = None

    @property
    def durable(self) -> store.Store:
        """The study's store, waiting for it if it is being opened."""
        if isinstance(self._durable, concurrent.futures.Future):
            self._durable = self._durable.result()
        return self._durable

    @property
    def target(self) -> int:
        grid = self.space.grid_size
        return grid if self.plan.method == "grid" else min(self.plan.passes, grid)

    def run(self) -> int:
        """Fill ``passes``; returns ``ran``. Ctrl-C keeps every finished pass in the store."""
        if not isinstance(self._durable, concurrent.futures.Future):  # one being opened holds none
            for t in self.durable.finished():
                self.recorded[store.params_key(t.params)] = t
        before = len(self.recorded)
        self._open_bar()
        try:
            if self.plan.method == "grid":
                self._grid()
            else:
                self._sample()
            self.durable.study  # noqa: B018  (waits for a study being opened: nothing may have run)
        finally:
            if self._bar is not None:
                self._bar.close()
            if isinstance(self._durable, concurrent.futures.Future):  # never left writing unlocked
                concurrent.futures.wait([self._durable])
        self.ran = len(self.recorded) - before
        return self.ran

    # -- grid ------------------------------------------------------------------------------------------
    def _grid(self) -> None:
        """Every grid point, in a seeded random order; recorded points are not run again. Every pass of
        this study's store is a point of this grid (the space is part of the study's identity)."""
        n = self.space.grid_size
        self._advance(len(self.recorded), self.recorded.values())
        order = np.random.default_rng(self.plan.seed).permutation(n)

        def missing() -> Iterator[tuple[dict, str]]:
            for index in order:
                params = self.space.point(int(index))
                key = store.params_key(params)
                if key not in self.recorded:
                    yield params, key

        self._execute(missing(), n - len(self.recorded))
        self.passes = [Pass(i, self.recorded[store.params_key(self.space.point(i))]) for i in range(n)]

    # -- samplers --------------------------------------------------------------------------------------
    def _sample(self) -> None:
        driver = optuna.create_study(direction=self.job.criterion.direction, sampler=make_sampler(self.plan))
        told: dict[str, FrozenTrial] = {}  # passes told to the sampler, in pass-number order
        while len(told) < self.target:
            proposals, twins = self._round(driver, min(self.plan.round_size, self.target - len(told)), told)
            if not proposals:
                log.warning("the sampler proposes only passes already run: stopping early")
                break
            new = [(p.params, p.key) for p in proposals if p.key not in self.recorded]
            cached = [self.recorded[p.key] for p in proposals if p.key in self.recorded]
            self._advance(len(cached), cached)
            self._execute(iter(new), len(new))
            for p in proposals:  # in proposal order, whatever order the passes finished in
                told[p.key] = self.recorded[p.key]
                self._tell(driver, p.trial, told[p.key])
            for trial, key in twins:  # proposed twice in one round: the first one's figure
                self._tell(driver, trial, told[key])
        self.passes = [Pass(i, t) for i, t in enumerate(told.values())]

    def _round(
        self, driver: optuna.Study, n: int, told: dict[str, FrozenTrial]
    ) -> tuple[list[_Proposal], list[tuple[optuna.Trial, str]]]:
        """Up to ``n`` new proposals, and the round's repeats of them; a repeat of a pass told in an
        earlier round is answered from the record at once."""
        out: list[_Proposal] = []
        keys: set[str] = set()
        twins: list[tuple[optuna.Trial, str]] = []
        for _ in range(50 * n):
            if len(out) == n:
                break
            trial = driver.ask(self.space.distributions())
            key = store.params_key(trial.params)
            if key in told:
                self._tell(driver, trial, told[key])
            elif key in keys:
                twins.append((trial, key))
            else:
                keys.add(key)
                out.append(_Proposal(trial, trial.params, key))
        return out, twins

    def _tell(self, driver: optuna.Study, trial: optuna.Trial, recorded: FrozenTrial) -> None:
        """The recorded figure; a refused or undefined pass as the worst value (ranked last)."""
        value = recorded.value if recorded.state == TrialState.COMPLETE else None
        driver.tell(trial, self.job.criterion.worst() if value is None else value)

    # -- execution -------------------------------------------------------------------------------------
    def _execute(self, proposals: Iterable[tuple[dict, str]], count: int) -> None:
        """Run ``count`` parameter sets in batches; each finished batch is recorded at once, whole, and
        after Ctrl-C in a batch the passes of it that finished (inline: Ctrl-C does not reach workers)."""
        try:
            for chunk, rows in self.engine.stream(run_batch, self.shared, self._tasks(proposals, count)):
                self._keep([(params, key, row) for (params, key), row in zip(chunk, rows, strict=True)])
        except BatchInterrupted as stop:
            self._keep([(params, store.params_key(params), row) for params, row in stop.finished])
            raise

    def _keep(self, done: list[tuple[dict, str, dict]]) -> None:
        """Record finished passes ``(params, key, row)`` in one transaction."""
        trials = [self._record(params, row) for params, _, row in done]
        self.durable.record(trials)
        for (_, key, _), t in zip(done, trials, strict=True):
            self.recorded[key] = t
        self._advance(len(trials), trials)

    def _tasks(self, proposals: Iterable[tuple[dict, str]], count: int) -> Iterator[tuple[list, tuple]]:
        """The ``count`` proposals as tasks of ``plan.batch`` passes or, without one, batches by factoring
        (Hummel, Schonberg and Flynn, "Factoring: a method for scheduling parallel loops", CACM 35(8),
        1992): each takes half an even share of the passes left (1 to 32), so batches are large while
        much is left (few tasks, few store transactions: each costs the client about 9 ms of CPU) and
        single passes at the end (every worker busy until the last pass). A quarter of a share gave 29
        tasks for 200 passes on two workers instead of 17, and no better finish."""
        it = iter(proposals)
        left = count
        while left > 0:
            size = self.plan.batch or max(1, min(32, math.ceil(left / (2 * self.engine.size))))
            chunk = list(itertools.islice(it, size))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk, (self.job, self.window, [params for params, _ in chunk])

    def _record(self, params: dict, row: dict) -> FrozenTrial:
        """The durable record of one pass."""
        value = row["value"]
        # One user attribute per pass where possible: each attribute is a row and an INSERT in the store.
        attrs = {"stats": {**row["stats"], "seconds": round(row["seconds"], 6)}}
        if row["error"] is not None:
            attrs["error"] = row["error"]
        if value is None:
            attrs["undefined"] = True
        distributions = self.space.distributions()
        if row["error"] is not None:
            return create_trial(
                state=TrialState.FAIL, params=params, distributions=distributions, user_attrs=attrs
            )
        told = self.job.criterion.worst() if value is None else value
        return create_trial(value=told, params=params, distributions=distributions, user_attrs=attrs)

    # -- progress --------------------------------------------------------------------------------------
    def _advance(self, n: int, trials: Iterable[FrozenTrial]) -> None:
        """``n`` more passes done (run now or found in the store); the best figure so far."""
        for t in trials:
            defined = t.state == TrialState.COMPLETE and not t.user_attrs.get("undefined")
            if defined and self.job.criterion.better(t.value, self.best):
                self.best = t.value
        if self._bar is not None and n:
            self._bar.update(n)
            self._bar.set_postfix_str(f"best {self._best_text()}")

    def _best_text(self) -> str:
        return "n/a" if self.best is None else f"{self.best:.4g}"

    def _open_bar(self) -> None:
        if not self.progress:
            return
        from tqdm import tqdm

        self._bar = tqdm(total=self.target, unit="pass", desc=self.label, dynamic_ncols=True)
