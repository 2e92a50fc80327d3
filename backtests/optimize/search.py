"""The search loop: an Optuna sampler proposes passes, the engine runs them, the store keeps them.

The sampler works on an in-memory twin of the durable study (asking on SQLite costs tens of
milliseconds a pass, more than a cheap backtest); each finished pass is then written to the durable
study with the sampler's bookkeeping (``system_attrs``), so a resumed study continues where it stopped.

- ``grid``: Optuna's ``GridSampler`` (seeded shuffle of the full grid); points already in the store are
  skipped, so a resumed grid runs only what is missing.
- ``random`` / ``tpe`` / ``genetic`` (``RandomSampler``, ``TPESampler``, ``NSGAIISampler``): proposals come
  in rounds of ``round_size``; the sampler sees every result of a round before the next, so a seeded run
  gives the same passes whatever the number of workers. A proposal equal to a pass already run is not run
  again: the sampler is told the recorded figure.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from backtests.optimize import store
from backtests.optimize.engine import Engine
from backtests.optimize.errors import OptimizeError
from backtests.optimize.passes import Job, Window, run_batch
from backtests.optimize.space import ParamSpace

log = logging.getLogger(__name__)

METHODS = ("grid", "genetic", "random", "tpe")


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


def make_sampler(plan: Plan, space: ParamSpace, offset: int = 0) -> optuna.samplers.BaseSampler:
    """A seeded sampler; ``offset`` (passes already recorded) moves a resumed sampler's seed on."""
    seed = plan.seed + offset
    if plan.method == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=plan.seed)
    if plan.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if plan.method == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, max(2, plan.passes // 5)))
    return optuna.samplers.NSGAIISampler(population_size=plan.population, seed=seed)


class Search:
    """One optimisation over one window: fills the durable study up to the plan's number of passes."""

    def __init__(
        self,
        durable: optuna.Study,
        space: ParamSpace,
        job: Job,
        window: Window,
        plan: Plan,
        engine: Engine,
        shared: object,
        progress: bool = True,
        label: str = "optimise",
    ):
        self.durable, self.space, self.job, self.window = durable, space, job, window
        self.plan, self.engine, self.shared = plan, engine, shared
        self.progress, self.label = progress, label
        self.done: dict[str, FrozenTrial] = {}
        self.best: float | None = None
        self._bar = None
        self._twins: list[tuple[optuna.Trial, str]] = []

    @property
    def target(self) -> int:
        grid = self.space.grid_size
        return grid if self.plan.method == "grid" else min(self.plan.passes, grid)

    def run(self) -> int:
        """Run the missing passes; returns how many ran now. Ctrl-C keeps every finished pass."""
        for t in store.finished(self.durable):
            self.done[store.params_key(t.params)] = t
            self._track(t)
        missing = self.target - len(self.done)
        if missing <= 0:
            return 0
        sampler = make_sampler(self.plan, self.space, len(self.done))
        driver = optuna.create_study(direction=self.job.criterion.direction, sampler=sampler)
        if self.plan.method != "grid":
            driver.add_trials([self._for_sampler(t) for t in self.done.values()])
        before = len(self.done)
        self._open_bar()
        try:
            if self.plan.method == "grid":
                self._execute(driver, self._grid_points(driver), missing)
            else:
                while len(self.done) < self.target:
                    proposals = self._round(driver, min(self.plan.round_size, self.target - len(self.done)))
                    if not proposals:
                        log.warning("the sampler proposes only passes already run: stopping early")
                        break
                    self._execute(driver, iter(proposals), len(proposals))
                    for trial, key in self._twins:  # proposed twice in one round: the same figure
                        self._tell(driver, trial, self.done[key])
        finally:
            if self._bar is not None:
                self._bar.close()
        return len(self.done) - before

    # -- proposals -------------------------------------------------------------------------------------
    def _grid_points(self, driver: optuna.Study) -> Iterator[tuple[optuna.Trial, dict]]:
        """GridSampler's order; points already recorded are skipped (the driver is never told)."""
        for _ in range(self.space.grid_size):
            trial = driver.ask(self.space.distributions())
            if store.params_key(trial.params) not in self.done:
                yield trial, trial.params

    def _round(self, driver: optuna.Study, n: int) -> list[tuple[optuna.Trial, dict]]:
        """Up to ``n`` new proposals; repeats of recorded passes are answered from the record."""
        out: list[tuple[optuna.Trial, dict]] = []
        keys: set[str] = set()
        self._twins = []
        for _ in range(50 * n):
            if len(out) == n:
                break
            trial = driver.ask(self.space.distributions())
            key = store.params_key(trial.params)
            if key in self.done:
                self._tell(driver, trial, self.done[key])
            elif key in keys:  # proposed twice in one round: told the first one's figure once it is back
                self._twins.append((trial, key))
            else:
                keys.add(key)
                out.append((trial, trial.params))
        return out

    # -- execution -------------------------------------------------------------------------------------
    def _execute(self, driver: optuna.Study, proposals: Iterator, count: int) -> None:
        batch = self.plan.batch or max(1, min(32, math.ceil(count / (4 * self.engine.size))))

        def tasks():
            chunk: list = []
            for item in proposals:
                chunk.append(item)
                if len(chunk) == batch:
                    yield chunk, (self.job, self.window, [p for _, p in chunk])
                    chunk = []
            if chunk:
                yield chunk, (self.job, self.window, [p for _, p in chunk])

        for chunk, rows in self.engine.stream(run_batch, self.shared, tasks()):
            pairs = zip(chunk, rows, strict=True)
            trials = [self._finish(driver, trial, params, row) for (trial, params), row in pairs]
            store.record(self.durable, trials)
            for t in trials:
                self.done[store.params_key(t.params)] = t
                self._track(t)
            if self._bar is not None:
                self._bar.update(len(trials))
                self._bar.set_postfix_str(f"best {self._best_text()}")

    def _finish(self, driver: optuna.Study, trial: optuna.Trial, params: dict, row: dict) -> FrozenTrial:
        """Tell the sampler (unless grid) and build the durable record of one pass."""
        crit = self.job.criterion
        value = row["value"]
        # One user attribute per pass where possible: each attribute is a row and an INSERT in the store.
        attrs = {"stats": {**row["stats"], "seconds": round(row["seconds"], 6)}}
        if row["error"] is not None:
            attrs["error"] = row["error"]
        if value is None:
            attrs["undefined"] = True
        told = crit.worst() if value is None else value
        if self.plan.method != "grid":
            driver.tell(trial, told)
        # The sampler's bookkeeping (NSGA-II's generations) goes with the pass so a resumed study continues
        # it; GridSampler's (grid id, a copy of the grid) is not needed: a resumed grid skips by parameters.
        system = {} if self.plan.method == "grid" else driver._storage.get_trial_system_attrs(trial._trial_id)
        distributions = self.space.distributions()
        if row["error"] is not None:
            return create_trial(
                state=TrialState.FAIL,
                params=params,
                distributions=distributions,
                user_attrs=attrs,
                system_attrs=system,
            )
        return create_trial(
            value=told, params=params, distributions=distributions, user_attrs=attrs, system_attrs=system
        )

    def _tell(self, driver: optuna.Study, trial: optuna.Trial, recorded: FrozenTrial) -> None:
        value = recorded.value if recorded.state == TrialState.COMPLETE else None
        driver.tell(trial, self.job.criterion.worst() if value is None else value)

    def _for_sampler(self, t: FrozenTrial) -> FrozenTrial:
        """A recorded pass as the in-memory sampler sees it (refused parameters rank last)."""
        value = t.value if t.state == TrialState.COMPLETE else self.job.criterion.worst()
        return create_trial(
            value=value, params=t.params, distributions=t.distributions, system_attrs=t.system_attrs
        )

    # -- progress --------------------------------------------------------------------------------------
    def _track(self, t: FrozenTrial) -> None:
        defined = t.state == TrialState.COMPLETE and not t.user_attrs.get("undefined")
        if defined and self.job.criterion.better(t.value, self.best):
            self.best = t.value

    def _best_text(self) -> str:
        return "n/a" if self.best is None else f"{self.best:.4g}"

    def _open_bar(self) -> None:
        if not self.progress:
            return
        from tqdm import tqdm

        self._bar = tqdm(
            total=self.target, initial=len(self.done), unit="pass", desc=self.label, dynamic_ncols=True
        )
        self._bar.set_postfix_str(f"best {self._best_text()}")
