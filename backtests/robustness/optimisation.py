"""How much of an optimisation's best pass survives the search that found it.

From every recorded pass's daily returns (``backtests.optimize.passes.daily_returns``) over the same
judged window, the pass × period matrix:
- the Deflated Sharpe Ratio of the best pass (by the optimisation's criterion) given how many passes were
  tried and the spread of their Sharpe ratios (``sharpe.deflated_sharpe``);
- the Probability of Backtest Overfitting by CSCV over the matrix (``pbo``);
- White's Reality Check and Hansen's SPA p-values of the best pass against not trading (zero returns),
  over all passes at once (``snooping``).
Passes refused by the EA or without a defined criterion take no part. A statistic that the data cannot
support (too few days, every pass flat) is given as ``{"error": reason}`` instead of a number.

The statistics run with one BLAS thread (unless the user set a count: ``nn.threads``): their products are
small (CSCV's ``S`` = 16 blocks, a few hundred bootstrap replicates), and OpenBLAS's threads spin while
they wait for each other, which on two cores busy with the workers' or other jobs' processes tripled the
CPU of the whole computation (0.07 s against 0.2 s for 200 passes × 208 days). The thread count does not
change the numbers (BLAS splits a product by the result's rows and columns, never along the sum).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from backtests.robustness.errors import RobustnessError
from backtests.robustness.pbo import probability_of_overfitting
from backtests.robustness.sharpe import deflated_sharpe
from backtests.robustness.snooping import data_snooping
from nn.threads import plan as blas_plan

DEFAULT_SPLITS = 16  # the paper's S
DEFAULT_REPS = 1000


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread meanwhile, unless the user chose a count (see the module docstring)."""
    if blas_plan().threads is None:  # the user set a count: it is kept
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _guard(compute: Callable[[], Any]) -> dict:
    try:
        return compute().to_dict()
    except RobustnessError as exc:
        return {"error": str(exc)}


def return_matrix(rows: Iterable[tuple[int, list[float] | None]]) -> tuple[np.ndarray, list[int]]:
    """``(T, N)`` daily returns of the passes that have them (all the same length), and their numbers."""
    numbers, columns = [], []
    for number, returns in rows:
        if returns:
            numbers.append(number)
            columns.append(np.asarray(returns, dtype=np.float64))
    if not columns:
        return np.empty((0, 0)), []
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise RobustnessError(f"the passes' daily returns cover different periods ({sorted(lengths)} days)")
    return np.column_stack(columns), numbers


def optimisation_robustness(
    rows: Iterable[tuple[int, list[float] | None]],
    best: int | None,
    *,
    seed: int = 0,
    reps: int = DEFAULT_REPS,
    splits: int = DEFAULT_SPLITS,
    block: float | None = None,
) -> dict:
    """The three statistics for passes ``rows`` (``(pass number, daily returns)`` of the defined passes)
    whose best, by the criterion, is pass ``best``."""
    try:
        m, numbers = return_matrix(rows)
    except RobustnessError as exc:
        return {"error": str(exc)}
    out: dict = {"seed": seed, "passes": len(numbers), "periods": int(m.shape[0]), "best_pass": best}
    if len(numbers) < 2 or best not in numbers:
        reason = "needs at least 2 passes with daily returns, the best among them"
        return {**out, "error": f"the optimisation's robustness {reason}; got {len(numbers)}"}
    col = numbers.index(best)

    def dsr():
        sd = m.std(axis=0, ddof=1)
        live = sd > 0
        srs = np.divide(m.mean(axis=0), sd, out=np.full(len(sd), np.nan), where=live)
        return deflated_sharpe(m[:, col], srs)

    with one_blas_thread():
        out["deflated_sharpe"] = _guard(dsr)
        out["pbo"] = _guard(lambda: probability_of_overfitting(m, splits))
        out["spa"] = _guard(lambda: data_snooping(m, reps=reps, block=block, seed=seed))
    return out


def passes_rows(passes: Iterable[Any]) -> list[tuple[int, list[float] | None]]:
    """``(number, daily returns)`` of a search's defined passes (``backtests.optimize.search.Pass``)."""
    from optuna.trial import TrialState

    rows = []
    for p in passes:
        t = p.trial
        if t.state == TrialState.COMPLETE and not t.user_attrs.get("undefined"):
            rows.append((p.number, t.user_attrs.get("stats", {}).get("daily_returns")))
    return rows


def check_options(reps: int, splits: int) -> None:
    """``--spa-reps`` and ``--pbo-splits`` in one line each, before any pass runs."""
    from backtests.robustness.bootstrap import check_count

    check_count("--spa-reps", reps, 100, 1_000_000)
    check_count("--pbo-splits", splits, 2, 20)
    if splits % 2:
        raise RobustnessError(f"--pbo-splits {splits}: give an even number (half the blocks are in sample)")


def window_pbo(rows: Iterable[tuple[int, list[float] | None]], splits: int = DEFAULT_SPLITS) -> dict:
    """PBO (CSCV) of one walk-forward train window's passes: how often its in-sample choice would fall at
    or below the median out of sample."""
    try:
        m, _ = return_matrix(rows)
        with one_blas_thread():
            return probability_of_overfitting(m, splits).to_dict()
    except RobustnessError as exc:
        return {"error": str(exc)}
