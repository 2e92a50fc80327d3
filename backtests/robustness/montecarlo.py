"""Monte Carlo of a finished run: how the same trades or returns could have turned out in another order.

Two resamplings, each ``simulations`` paths:
- ``trades``: the closed trades' net profits drawn with replacement (the i.i.d. bootstrap of the trade
  list), laid on the real trades' closing times, starting from the deposit: distributions of the final
  balance, the maximal balance drawdown and the longest time under water.
- ``returns``: the per-bar returns of the equity at bar closes (report.json's ``curves``) resampled by the
  stationary bootstrap (Politis & Romano 1994; mean block ``block`` bars, default ``T^(1/3)``), so
  volatility clusters survive, compounded from the deposit on the real bar times: the final equity, the
  maximal equity drawdown at closes and the longest time under water.

The probability of ruin is the share of paths whose drawdown from a running peak reaches ``ruin_pct`` %.
Simulations run in chunks of fixed size, each with its own generator seeded by ``(seed, method, chunk)``,
so the figures depend on the seed alone: the same inline, on any number of Dask workers, in any order.
Memory is bounded by the chunk (at most ``CHUNK_VALUES`` path values) plus 4 floats per simulation; the
fan chart's percentiles come from the first ``FAN_PATHS`` paths at up to ``FAN_POINTS`` points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from backtests.robustness.bootstrap import check_block, check_count, stationary_indices
from backtests.robustness.errors import RobustnessError
from backtests.robustness.paths import path_figures

METHODS = ("trades", "returns")
MAX_SIMULATIONS = 1_000_000
PERCENTILES = (1, 5, 25, 50, 75, 95, 99)
FAN_QUANTILES = (5, 25, 50, 75, 95)
FAN_PATHS = 2000
FAN_POINTS = 400
CHUNK_VALUES = 2_000_000  # path values per chunk (16 MB of float64)
MIN_TRADES = 2
MIN_BARS = 3


@dataclass(frozen=True)
class Run:
    """What a Monte Carlo reads from a finished run (``from_result`` / ``from_report``): the trades' net
    profits in closing order with their closing times, and the equity at bar closes with its times (the
    first row the start: the deposit), times in seconds since the epoch (UTC)."""

    deposit: float
    trade_net: np.ndarray  # (M,)
    trade_times: np.ndarray  # (M,) closing times
    start_time: float
    curve_times: np.ndarray  # (F + 1,)
    equity: np.ndarray  # (F + 1,)

    @classmethod
    def from_frames(cls, deposit: float, trades: pd.DataFrame, curves: pd.DataFrame) -> Run:
        order = np.argsort(pd.DatetimeIndex(trades["exit_time"]).asi8, kind="stable") if len(trades) else []
        net = trades["net_profit"].to_numpy(np.float64)[order] if len(trades) else np.empty(0)
        closes = pd.DatetimeIndex(trades["exit_time"]).asi8[order] / 1e9 if len(trades) else np.empty(0)
        times = pd.DatetimeIndex(curves.index).asi8 / 1e9
        return cls(float(deposit), net, closes, float(times[0]), times, curves["equity"].to_numpy(np.float64))


@dataclass(frozen=True)
class Plan:
    """One Monte Carlo request (picklable: it travels to Dask workers with the run)."""

    method: str
    simulations: int
    seed: int
    ruin_pct: float
    block: float | None = None  # the returns method's mean block length (bars)

    def steps(self, run: Run) -> int:
        return len(run.trade_net) if self.method == "trades" else len(run.equity) - 1

    def chunk(self, run: Run) -> int:
        return max(1, min(self.simulations, CHUNK_VALUES // max(1, self.steps(run) + 1)))


@dataclass
class Distribution:
    """One method's simulated figures: percentiles, mean, the real run's value and its percentile rank."""

    method: str
    simulations: int
    seed: int
    block: float | None
    ruin_pct: float
    ruin_probability: float
    figures: dict[str, dict[str, Any]]
    fan: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_plan(method: str, simulations: int, seed: int, ruin_pct: float, block: float | None) -> None:
    """Bad counts, methods and limits in one line each, before any work."""
    if method not in METHODS:
        raise RobustnessError(f"Monte Carlo method {method!r}: choose {' or '.join(METHODS)}")
    check_count("--monte-carlo", simulations, 1, MAX_SIMULATIONS)
    if not (isinstance(ruin_pct, int | float) and 0 < float(ruin_pct) <= 100):
        raise RobustnessError(
            f"--ruin-drawdown {ruin_pct!r}: give a drawdown in percent, above 0 and at most 100"
        )
    if block is not None and not (np.isfinite(block) and block >= 1):
        raise RobustnessError(f"--block {block!r}: give a mean block length of at least 1 bar")
    check_count("--seed", seed, 0, 2**63 - 1)


def check_run(run: Run, method: str) -> None:
    """Refuse a run the method cannot resample (too few trades or bars, flat equity) in one line."""
    if method == "trades" and len(run.trade_net) < MIN_TRADES:
        raise RobustnessError(
            f"Monte Carlo of trades needs at least {MIN_TRADES} closed trades; "
            f"the run has {len(run.trade_net)}"
        )
    if method == "returns":
        if len(run.equity) - 1 < MIN_BARS:
            raise RobustnessError(
                f"Monte Carlo of returns needs at least {MIN_BARS} bars; the run has {len(run.equity) - 1}"
            )
        if not (run.equity > 0).all():
            raise RobustnessError(
                "Monte Carlo of returns: the equity reaches zero or below; returns are undefined"
            )
        if np.ptp(run.equity) == 0:
            raise RobustnessError("Monte Carlo of returns: the equity never changes (zero-variance returns)")
    if not (np.isfinite(run.trade_net).all() and np.isfinite(run.equity).all()):
        raise RobustnessError("Monte Carlo: the run's trades or equity hold NaN or infinite values")


def simulate_chunk(run: Run, plan: Plan, index: int) -> dict[str, np.ndarray]:
    """Chunk ``index``'s paths: their figures, and the fan's sample points when the chunk is among the first
    ``FAN_PATHS`` paths. Runs inline or on a Dask worker; depends on ``(plan.seed, method, index)`` only."""
    size = plan.chunk(run)
    n = min(size, plan.simulations - index * size)
    rng = np.random.default_rng([plan.seed, METHODS.index(plan.method), index])
    paths, times = _paths(run, plan, rng, n)
    out = path_figures(paths, times)
    first = index * size
    if first < FAN_PATHS:
        points = _fan_points(paths.shape[1])
        out["fan"] = paths[: FAN_PATHS - first, points]
    return out


def resample_indices(run: Run, plan: Plan, rng: np.random.Generator, n: int) -> np.ndarray:
    """``(n, steps)`` positions drawn for ``n`` paths: trades i.i.d., bar returns by the stationary
    bootstrap. Public so that tests recompute the figures from the same draws by hand."""
    if plan.method == "trades":
        return rng.integers(0, len(run.trade_net), size=(n, len(run.trade_net)))
    steps = len(run.equity) - 1
    return stationary_indices(rng, steps, n, check_block("--block", plan.block, steps))


def _paths(run: Run, plan: Plan, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    idx = resample_indices(run, plan, rng, n)
    if plan.method == "trades":
        values = run.deposit + np.cumsum(run.trade_net[idx], axis=1)
        times = np.concatenate(([run.start_time], run.trade_times))
    else:
        growth = run.equity[1:] / run.equity[:-1]
        values = run.deposit * np.cumprod(growth[idx], axis=1)
        times = run.curve_times
    start = np.full((n, 1), run.deposit)
    return np.hstack([start, values]), times


def _fan_points(k: int) -> np.ndarray:
    return np.unique(np.linspace(0, k - 1, min(k, FAN_POINTS)).round().astype(np.int64))


def actual_path(run: Run, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The real run as the method sees it: the balance after each trade, or the equity at bar closes."""
    if method == "trades":
        values = np.concatenate(([run.deposit], run.deposit + np.cumsum(run.trade_net)))
        return values, np.concatenate(([run.start_time], run.trade_times))
    return np.concatenate(
        ([run.deposit], run.deposit * np.cumprod(run.equity[1:] / run.equity[:-1]))
    ), run.curve_times


def assemble(run: Run, plan: Plan, chunks: list[dict[str, np.ndarray]]) -> Distribution:
    """The distribution from the chunks in chunk order."""
    keys = ("final", "max_drawdown", "max_drawdown_pct", "under_water_s")
    sims = {k: np.concatenate([c[k] for c in chunks]) for k in keys}
    real_values, real_times = actual_path(run, plan.method)
    real = {k: float(v[0]) for k, v in path_figures(real_values[None, :], real_times).items()}
    figures = {}
    for key in keys:
        v = sims[key]
        figures[key] = {
            "percentiles": {
                str(p): float(q) for p, q in zip(PERCENTILES, np.percentile(v, PERCENTILES), strict=True)
            },
            "mean": float(v.mean()),
            "actual": real[key],
            "actual_rank_pct": float(np.mean(v <= real[key]) * 100.0),
        }
    fan_paths = np.vstack([c["fan"] for c in chunks if "fan" in c])
    points = _fan_points(len(real_values))
    fan = {
        "paths": len(fan_paths),
        "time": real_times[points].tolist(),
        "actual": real_values[points].tolist(),
        "quantiles": {
            str(q): row.tolist()
            for q, row in zip(FAN_QUANTILES, np.percentile(fan_paths, FAN_QUANTILES, axis=0), strict=True)
        },
    }
    ruin = float(np.mean(sims["max_drawdown_pct"] >= plan.ruin_pct))
    block = None
    if plan.method == "returns":
        block = check_block("--block", plan.block, len(run.equity) - 1)
    return Distribution(plan.method, plan.simulations, plan.seed, block, plan.ruin_pct, ruin, figures, fan)


def chunk_tasks(run: Run, plan: Plan) -> list[tuple[int, tuple]]:
    """``(tag, args)`` of every chunk, for ``Engine.stream(simulate_chunk, ...)``."""
    size = plan.chunk(run)
    count = -(-plan.simulations // size)
    return [(i, (plan, i)) for i in range(count)]


def monte_carlo(run: Run, plan: Plan, engine: Any = None, shared: Any = None) -> Distribution:
    """Run ``plan`` on ``run``: inline, or as chunk tasks on ``engine`` (a ``backtests.optimize.Engine``
    with ``shared`` = ``engine.share(run)``)."""
    check_plan(plan.method, plan.simulations, plan.seed, plan.ruin_pct, plan.block)
    check_run(run, plan.method)
    tasks = chunk_tasks(run, plan)
    if engine is None:
        chunks = {i: simulate_chunk(run, *args) for i, args in tasks}
    else:
        chunks = dict(engine.stream(simulate_chunk, shared, tasks))
    return assemble(run, plan, [chunks[i] for i in range(len(tasks))])
