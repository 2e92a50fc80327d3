"""Permutation test of an EA: its forward net profit and balanced accuracy on the real history against the
same EA, with the same parameters and seed, on histories whose bars are permuted (``permute``).

Masters (2020): if the EA's edge is real, the real history should beat nearly every permuted one; the
p-value is ``(1 + #{permuted ≥ real}) / (N + 1)`` (the "+1" counts the real history as one of the
permutations, which makes the test exact under the null that the bars are exchangeable; Phipson & Smyth
2010). An EA that trains (Fractal, DBN, Forecast) trains again on each permuted study window.

Each permutation is one pass of the optimisation engine (``backtests.optimize.engine``): passes run in
batches on local worker processes or a Dask cluster, and every finished one is written to an Optuna study
(``backtests.optimize.store``) under the store's lock. Permutation ``k`` is drawn from a generator seeded
by ``(seed, k)`` and pass 0 is the real history, so a result depends on the seed alone: interrupted and
resumed, run on any number of workers or in any order, the same seed gives the same p-values. Asking for
more permutations later continues the recorded ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.trial import create_trial

from backtests.broker import AccountConfig
from backtests.optimize import store
from backtests.optimize.api import fingerprint, session
from backtests.optimize.lock import locked
from backtests.optimize.passes import Market
from backtests.replay import Backtest
from backtests.robustness.bootstrap import check_count
from backtests.robustness.errors import RobustnessError
from backtests.robustness.permute import SCOPES, permute_candles
from strategies.base import ExpertAdvisor

MAX_PERMUTATIONS = 100_000
PERCENTILES = (1, 5, 25, 50, 75, 95, 99)
HISTOGRAM_BINS = 40
STATISTICS = ("net_profit", "balanced_accuracy")
_DISTRIBUTION = {"permutation": optuna.distributions.IntDistribution(0, MAX_PERMUTATIONS)}


@dataclass(frozen=True)
class Job:
    """What every permutation pass shares (picklable: sent with each task)."""

    ea: type[ExpertAdvisor]
    params: dict
    account: AccountConfig
    seed: int
    forward_start: int
    walk_forward: tuple[int, int] | None = None
    block: int = 1
    scope: str = "both"

    def identity(self, candles: pd.DataFrame) -> dict:
        """Everything that changes a permutation's figures (the study's name is its hash)."""
        return {
            "test": "permutation",
            "ea": f"{self.ea.__module__}.{self.ea.__qualname__}",
            "params": {k: str(v) for k, v in sorted(self.params.items())},
            "account": self.account.to_dict(),
            "seed": self.seed,
            "forward_start": self.forward_start,
            "walk_forward": list(self.walk_forward) if self.walk_forward else None,
            "block": self.block,
            "scope": self.scope,
            "data": fingerprint(candles),
        }


def history(candles: pd.DataFrame, job: Job, k: int) -> pd.DataFrame:
    """Pass ``k``'s history: the real one for ``k = 0``, else permutation ``k`` (seeded by ``(seed, k)``)."""
    if k == 0:
        return candles
    rng = np.random.default_rng([job.seed, k])
    return permute_candles(candles, job.forward_start, rng, block=job.block, scope=job.scope)


def run_pass(candles: pd.DataFrame, job: Job, k: int) -> dict[str, Any]:
    """One backtest of the EA on pass ``k``'s history: its forward net profit, balanced accuracy, trades."""
    df = history(candles, job, k)
    forward = None if job.walk_forward else df.index[job.forward_start]
    bt = Backtest(
        df, job.ea, account=job.account, forward=forward, walk_forward=job.walk_forward, seed=job.seed
    )
    result = bt.run(**job.params)
    if not result.complete:
        raise KeyboardInterrupt  # Ctrl-C inside the replay stops the test; the pass is not recorded
    pred = result.predictions
    accuracy = pred["model"]["balanced_accuracy"] if pred else None
    return {
        "net_profit": result.stats["total_net_profit"],
        "balanced_accuracy": accuracy,
        "trades": result.stats["total_trades"],
    }


def run_batch(market: Market, job: Job, ks: list[int]) -> list[dict[str, Any]]:
    """Several passes in one task (on a Dask worker or inline)."""
    return [run_pass(market.candles, job, k) for k in ks]


@dataclass
class PermutationTest:
    """The real figures, their p-values and the permuted distributions."""

    permutations: int
    seed: int
    block: int
    scope: str
    real: dict[str, float | None]
    p_values: dict[str, float | None]
    distributions: dict[str, dict[str, Any]] = field(default_factory=dict)
    ran: int = 0  # passes run now (the others came from the study store)
    study: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "ran"}


def check_request(permutations: int, block: int, scope: str, n_forward: int) -> None:
    """Bad counts in one line each, before any work."""
    check_count("--permutations", permutations, 1, MAX_PERMUTATIONS)
    check_count("--permutation-block", block, 1, max(1, n_forward))
    if scope not in SCOPES:
        raise RobustnessError(f"--permute {scope!r}: choose {' or '.join(SCOPES)}")


def permutation_test(
    candles: pd.DataFrame,
    job: Job,
    permutations: int,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    store_path: str | None = None,
    progress: bool = False,
    engine: Any = None,
    shared: Any = None,
    expect: float | None = None,
) -> PermutationTest:
    """Run the real history and ``permutations`` permuted ones (the passes the store lacks), and the
    p-values. ``engine``/``shared``: an engine already started with ``Market(candles)`` shared.
    ``expect``: the real history's net profit as a report gives it; the real history runs first, and
    another figure is refused before any permutation runs (the data or the EA are not the report's)."""
    check_request(permutations, job.block, job.scope, len(candles) - job.forward_start)
    storage = None if store_path is None else store.storage_url(store_path)
    identity = job.identity(candles)
    name = "perm-" + store.study_name(identity).removeprefix("opt-")
    with locked(storage, user="permutation test"):
        durable = store.open_study(storage, name, "maximize", identity)
        if engine is None:
            with session(Market(candles), workers, scheduler) as (engine, shared):
                figures, ran = _fill(durable, job, permutations, engine, shared, progress, expect)
        else:
            figures, ran = _fill(durable, job, permutations, engine, shared, progress, expect)
    test = summarize(figures, job, permutations)
    test.ran, test.study = ran, durable.study.study_name
    return test


def _fill(durable: store.Store, job: Job, permutations: int, engine, shared, progress: bool, expect):
    """Every pass 0..N from the store or run now; finished batches are recorded as they arrive."""
    recorded = {int(t.params["permutation"]): t.user_attrs["figures"] for t in durable.finished()}
    if expect is not None:
        real = recorded.get(0) or next(iter(engine.stream(run_batch, shared, [(0, (job, [0]))])))[1][0]
        if abs(float(real["net_profit"]) - float(expect)) > 0.005:
            raise RobustnessError(
                f"re-running the EA on the real history makes a net profit of {real['net_profit']}, the "
                f"report says {expect}: the data, the EA's code or its settings differ from the report's"
            )
        if 0 not in recorded:
            durable.record([_trial(0, real)])
            recorded[0] = real
    missing = [k for k in range(permutations + 1) if k not in recorded]
    batch = max(1, min(16, math.ceil(len(missing) / (4 * engine.size)))) if missing else 1
    tasks = [(missing[a : a + batch], (job, missing[a : a + batch])) for a in range(0, len(missing), batch)]
    bar = None
    if progress and missing:
        from tqdm import tqdm

        bar = tqdm(
            total=permutations + 1, initial=permutations + 1 - len(missing), unit="pass", desc="permute"
        )
    try:
        for ks, rows in engine.stream(run_batch, shared, tasks):
            durable.record([_trial(k, row) for k, row in zip(ks, rows, strict=True)])
            recorded.update(zip(ks, rows, strict=True))
            if bar is not None:
                bar.update(len(ks))
    finally:
        if bar is not None:
            bar.close()
    return [recorded[k] for k in range(permutations + 1)], len(missing)


def _trial(k: int, row: dict[str, Any]):
    """The durable record of pass ``k``."""
    return create_trial(
        value=float(row["net_profit"]),
        params={"permutation": k},
        distributions=_DISTRIBUTION,
        user_attrs={"figures": row},
    )


def summarize(figures: list[dict[str, Any]], job: Job, permutations: int) -> PermutationTest:
    """p-values and distributions from pass 0 (real) and passes 1..N (permuted)."""
    real = {s: figures[0].get(s) for s in STATISTICS}
    p_values: dict[str, float | None] = {}
    distributions: dict[str, dict[str, Any]] = {}
    for s in STATISTICS:
        values = np.array([f[s] for f in figures[1:] if f.get(s) is not None], dtype=np.float64)
        if real[s] is None or not len(values):
            p_values[s] = None
            continue
        p_values[s] = float((1 + np.sum(values >= real[s])) / (len(values) + 1))
        counts, edges = np.histogram(values, bins=HISTOGRAM_BINS)
        distributions[s] = {
            "count": len(values),
            "percentiles": {
                str(p): float(q) for p, q in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True)
            },
            "mean": float(values.mean()),
            "histogram": {"counts": counts.tolist(), "edges": edges.tolist()},
        }
    return PermutationTest(permutations, job.seed, job.block, job.scope, real, p_values, distributions)
