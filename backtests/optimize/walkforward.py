"""Walk-forward analysis: re-optimise on each train window, trade the next test window with the winner.

Windows (bars): test window ``i`` is ``[train + i*test, train + (i+1)*test)`` (the last one may be
shorter); its train window is the ``train`` bars before it (rolling) or every bar before it
(``anchored``). Each train window is its own durable study, so an interrupted analysis resumes window by
window. The winner trades its test window with the train window as study period and indicator warm-up
history; the test windows' equity is stitched into one out-of-sample curve (each window's profit added
to the previous window's end, in money).

Walk-forward efficiency (WFE) = out-of-sample annualised return / in-sample annualised return, where each
is the summed net profit of the winners over the summed length of their windows, in percent of the
deposit per year (simple, not compounded). A WFE near 1 means the winners earned out of sample what they
earned in sample; near 0 or negative, the optimisation fitted noise. Undefined when in-sample is <= 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from backtests.broker import AccountConfig
from backtests.optimize.api import session, setup
from backtests.optimize.criteria import Criterion
from backtests.optimize.errors import OptimizeError
from backtests.optimize.lock import locked
from backtests.optimize.passes import Window, run_curves
from backtests.optimize.results import results_table, top_passes
from backtests.optimize.space import ParamSpace
from backtests.periods import PeriodError
from backtests.robustness.optimisation import (
    DEFAULT_REPS,
    DEFAULT_SPLITS,
    check_options,
    passes_rows,
    window_pbo,
)
from strategies.base import ExpertAdvisor

_YEAR_S = 365.25 * 86400.0


@dataclass
class WalkForwardResult:
    """Per-window winners and figures, the stitched out-of-sample equity, stability and efficiency."""

    windows: pd.DataFrame
    equity: pd.Series  # stitched out-of-sample equity, indexed by bar time
    stability: pd.DataFrame
    efficiency: float | None
    summary: dict = field(default_factory=dict)
    passes: pd.DataFrame = field(default_factory=pd.DataFrame)  # every window's passes, ``window`` column


def windows(n: int, train: int, test: int, anchored: bool = False) -> list[tuple[Window, Window]]:
    """``(train window, test window)`` pairs; the test window's ``trade_from`` marks where trading starts."""
    if train < 2 or test < 2:
        raise PeriodError(f"walk-forward needs train and test of at least 2 bars, got {train},{test}")
    if train + test > n:
        raise PeriodError(
            f"walk-forward {train},{test}: one train and one test window need {train + test} bars, "
            f"the data has {n}; shorten them or widen --from/--to"
        )
    out = []
    start = train
    while start + 2 <= n:
        stop = min(start + test, n)
        a = 0 if anchored else start - train
        out.append((Window(a, start), Window(a, stop, trade_from=start)))
        start = stop
    return out


def walk_forward(
    candles: pd.DataFrame | Mapping[str, pd.DataFrame],
    ea: type[ExpertAdvisor],
    space: ParamSpace | Mapping[str, Any] | Iterable[str],
    train: int,
    test: int,
    *,
    anchored: bool = False,
    method: str = "grid",
    criterion: str | Criterion = "balance",
    passes: int | None = None,
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
    pbo_splits: int = DEFAULT_SPLITS,
) -> WalkForwardResult:
    """Run the analysis; arguments as ``optimize``, plus ``train``/``test`` window sizes in bars. Each
    window's PBO (CSCV of its train window's passes, ``pbo_splits`` blocks) is in ``windows["pbo"]`` and
    their mean in ``summary["pbo"]``: the probability that the in-sample choice was overfitted."""
    check_options(DEFAULT_REPS, pbo_splits)
    s = setup(
        candles, ea, space, method=method, criterion=criterion, passes=passes, seed=seed, account=account,
        fixed=fixed, store_path=store_path, progress=progress, round_size=round_size,
        population=population, batch=batch, split=split, model=model, m1=m1, ticks=ticks, specs=specs,
    )  # fmt: skip
    candles = s.candles  # the main chart's (several symbols: the first's)
    pairs = windows(len(candles), int(train), int(test), anchored)
    rows, winners, tables, pbos = [], [], [], []
    ran = 0
    with locked(s.storage), session(s.market, workers, scheduler) as (engine, shared):
        for i, (tw, _) in enumerate(pairs):
            label = f"window {i + 1}/{len(pairs)}"
            search = s.search(s.window(tw.start, tw.stop), engine, shared, label=label)
            ran += search.ran
            table = results_table(search.passes, s.space, s.job.criterion)
            best = top_passes(table, s.space, 1)
            if not best:
                raise OptimizeError(
                    f"walk-forward window {i + 1}: no pass has a defined {s.job.criterion.name}"
                )
            winners.append(best[0])
            rows.append((table.iloc[0], len(table)))
            tables.append(table.assign(window=i + 1))
            pbos.append(window_pbo(passes_rows(search.passes), pbo_splits))
        tasks = [(i, (s.job, [(ow, winners[i])])) for i, (_, ow) in enumerate(pairs)]
        tests = {i: out[0] for i, out in engine.stream(run_curves, shared, tasks)}
    result = _assemble(candles, s, pairs, rows, winners, tests, anchored)
    result.windows["pbo"] = [p.get("pbo") for p in pbos]
    defined = [p["pbo"] for p in pbos if "pbo" in p]
    result.summary["pbo"] = sum(defined) / len(defined) if defined else None
    result.summary["pbo_windows"] = pbos
    result.passes = pd.concat(tables, ignore_index=True)
    result.passes.attrs["criterion"] = s.job.criterion.name
    result.summary["ran"] = ran
    return result


def _assemble(candles, s, pairs, rows, winners, tests, anchored) -> WalkForwardResult:
    deposit = s.job.account.deposit
    records, pieces = [], []
    offset = 0.0
    is_profit = is_seconds = oos_profit = oos_seconds = 0.0
    for i, (tw, ow) in enumerate(pairs):
        best, count = rows[i]
        test = tests[i]
        if test.get("error"):
            raise OptimizeError(
                f"walk-forward window {i + 1}: the winner failed on its test: {test['error']}"
            )
        idx = candles.index
        judged = s.window(tw.start, tw.stop).trade_from or tw.start
        is_span = _span(idx, judged, tw.stop)
        oos_span = _span(idx, ow.trade_from, ow.stop)
        is_net = float(best["total_net_profit"])
        oos_net = float(test["stats"].get("total_net_profit") or 0.0)
        is_profit, is_seconds = is_profit + is_net, is_seconds + is_span
        oos_profit, oos_seconds = oos_profit + oos_net, oos_seconds + oos_span
        records.append(
            {
                "window": i + 1,
                "train_first": idx[tw.start],
                "train_last": idx[tw.stop - 1],
                "test_first": idx[ow.trade_from],
                "test_last": idx[ow.stop - 1],
                **winners[i],
                "passes": count,
                "is_criterion": best["criterion"],
                "oos_criterion": test["value"],
                "is_net_profit": is_net,
                "oos_net_profit": oos_net,
                "is_return_ann_pct": _annual(is_net, deposit, is_span),
                "oos_return_ann_pct": _annual(oos_net, deposit, oos_span),
                "oos_trades": test["stats"].get("total_trades"),
            }
        )
        equity = offset + (test["equity"] - deposit)
        pieces.append(pd.Series(equity, index=pd.DatetimeIndex(test["time"]).tz_localize("UTC")))
        offset = float(equity[-1]) if len(equity) else offset
    table = pd.DataFrame(records)
    curve = pd.concat(pieces) + deposit if pieces else pd.Series(dtype=float)
    is_ann = _annual(is_profit, deposit, is_seconds)
    oos_ann = _annual(oos_profit, deposit, oos_seconds)
    wfe = oos_ann / is_ann if is_ann and is_ann > 0 and oos_ann is not None else None
    summary = {
        "windows": len(pairs),
        "anchored": anchored,
        "is_return_ann_pct": is_ann,
        "oos_return_ann_pct": oos_ann,
        "oos_net_profit": oos_profit,
        "efficiency": wfe,
        "criterion": s.job.criterion.name,
        "method": s.plan.method,
    }
    return WalkForwardResult(table, curve.rename("equity"), stability(table, s.space.names), wfe, summary)


def stability(table: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per parameter: the winners' values across windows, how many differ, the share of the most common
    one, and for numbers the coefficient of variation (std / |mean|): 0 = the same winner every window."""
    out = []
    for name in names:
        values = table[name].tolist()
        counts = pd.Series([str(v) for v in values]).value_counts()
        row = {
            "parameter": name,
            "values": ", ".join(str(v) for v in values),
            "distinct": len(counts),
            "modal_share": float(counts.iloc[0] / len(values)) if values else None,
            "cv": None,
        }
        numeric = pd.to_numeric(pd.Series(values), errors="coerce")
        if len(values) and numeric.notna().all() and abs(numeric.mean()) > 0:
            row["cv"] = float(numeric.std(ddof=0) / abs(numeric.mean()))
        out.append(row)
    return pd.DataFrame(out)


def _span(index: pd.DatetimeIndex, a: int, b: int) -> float:
    """Seconds from bar ``a``'s open to bar ``b - 1``'s open plus one bar (the window's length)."""
    step = (index[b - 1] - index[a]).total_seconds() / max(1, b - 1 - a)
    return (index[b - 1] - index[a]).total_seconds() + step


def _annual(profit: float, deposit: float, seconds: float) -> float | None:
    if seconds <= 0:
        return None
    return float(profit / deposit * 100.0 * _YEAR_S / seconds)
