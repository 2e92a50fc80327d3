"""``neuronet optimize``: the Strategy Tester's optimisation (grid, genetic, random, TPE), forward test and
walk-forward analysis of any EA, on a local Dask cluster or a running one.

The study store (SQLite) lives in the report folder, whose default name has no time stamp: running the
same command again resumes the study and runs only the passes it lacks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import typer

from backtests.optimize import CRITERIA, METHODS, Plan, get_criterion, optimize, parse_space, walk_forward
from backtests.optimize.report import write_report
from backtests.paths import MODELS
from datafeeds import meta_of
from neuronet.commands.account import (
    Commission,
    Deposit,
    Hedging,
    Leverage,
    MarginHedged,
    Spread,
    SwapLong,
    SwapShort,
    account_settings,
)
from neuronet.commands.backtest import (
    BackendOpt,
    BatchSize,
    Epochs,
    Seed,
    Symbol,
    Timeframe,
    _params,
    _walk_forward,
    resolve_ea,
)
from neuronet.commands.errors import CommandError
from neuronet.commands.options import (
    BrokerTz,
    CsvPath,
    End,
    M1Csv,
    Model,
    Opts,
    Source,
    Start,
    TicksCsv,
    data_request,
    market_data,
    prepare_out,
)

_NONE = ("none", "off", "0", "")


_PARAM = typer.Option([], "--param", "-p", help="Searched: NAME=START:STOP:STEP or NAME=A,B,C (text: A|B).")
_SET = typer.Option([], "--set", help="Fixed parameter NAME=VALUE, verbatim (repeatable).")
_METHOD = typer.Option("grid", "--method", help=f"Search: {'|'.join(METHODS)}.")
_PASSES = typer.Option(None, "--passes", help="Passes of genetic/random/tpe (grid: all).")
_CRITERION = typer.Option("balance", "--criterion", help=f"{'|'.join(CRITERIA)}.")
_FWD = typer.Option("none", "--forward", help="Forward period: 1/3, a fraction, a date, none.")
_WALK = typer.Option(None, "--walk-forward", help="TRAIN,TEST bars: walk-forward analysis.")
_ANCHORED = typer.Option(False, "--anchored", help="Walk-forward: train on every earlier bar.")
_WORKERS = typer.Option(None, "--workers", help="Local processes (default: one per core; 0: inline).")
_SCHEDULER = typer.Option(None, "--scheduler", help="A running Dask scheduler, tcp://HOST:8786.")
_TOP = typer.Option(10, "--top", help="Best passes re-run on the forward period and shown.")
_HEAT = typer.Option(None, "--heatmap", help="X,Y: the two parameters of the heat map.")
_OUTDIR = typer.Option(None, "--out", help="Report folder (default: reports/optimize-EA-SYMBOL-TF).")
_STORE = typer.Option(None, "--store", help="Study store: SQLite file or RDB URL (default: OUT/study.db).")
_BAR = typer.Option(True, "--progress/--no-progress", help="Progress bar of passes.")
_SPLIT = typer.Option(
    "none", "--pass-forward", help="Each pass's own split (1/3, ...): EAs that train are judged unseen."
)


def optimize_command(
    ea: str = typer.Argument(..., help="FILE.py:ClassName or a built-in: FractalEA, ForecastEA, SmaCrossEA."),
    param: list[str] = _PARAM,
    fixed: list[str] = _SET,
    method: str = _METHOD,
    passes: int | None = _PASSES,
    criterion: str = _CRITERION,
    forward: str = _FWD,
    walk: str | None = _WALK,
    anchored: bool = _ANCHORED,
    workers: int | None = _WORKERS,
    scheduler: str | None = _SCHEDULER,
    top: int = _TOP,
    heatmap: str | None = _HEAT,
    source: Source = "sample",
    symbol: Symbol = None,
    timeframe: Timeframe = None,
    csv: CsvPath = None,
    start: Start = None,
    end: End = None,
    broker_tz: BrokerTz = None,
    opt: Opts = None,
    model: Model = "open",
    m1_csv: M1Csv = None,
    ticks_csv: TicksCsv = None,
    deposit: Deposit = 10_000.0,
    leverage: Leverage = 100.0,
    spread: Spread = None,
    commission: Commission = 0.0,
    swap_long: SwapLong = 0.0,
    swap_short: SwapShort = 0.0,
    hedging: Hedging = False,
    margin_hedged: MarginHedged = None,
    seed: Seed = 0,
    epochs: Epochs = None,
    batch_size: BatchSize = None,
    backend: BackendOpt = None,
    out: Path | None = _OUTDIR,
    store: str | None = _STORE,
    progress: bool = _BAR,
    pass_forward: str = _SPLIT,
) -> None:
    """Optimise an EA's parameters (grid, genetic, random, TPE) with forward test or walk-forward analysis."""
    cls = resolve_ea(ea)
    crit = get_criterion(criterion)
    account = account_settings(
        deposit=deposit, leverage=leverage, spread=spread, commission=commission,
        swap_long=swap_long, swap_short=swap_short, hedging=hedging, margin_hedged=margin_hedged,
    )  # fmt: skip
    sets = _params(fixed, cls, epochs=epochs, batch_size=batch_size, backend=backend)
    space = parse_space(cls, param, sets)  # every spec checked before data or workers
    Plan(method, passes, seed)
    pair = _heat_pair(heatmap, space.names)
    wf = _walk_forward(walk)
    no_forward = forward.strip().lower() in _NONE
    if wf is not None and not no_forward:
        raise CommandError("give --forward or --walk-forward, not both")
    if anchored and wf is None:
        raise CommandError("--anchored applies to --walk-forward TRAIN,TEST only")
    name, options = data_request(source, csv, opt, broker_tz, seed, seed_is_data=False)
    df, m1, ticks = market_data(name, symbol, timeframe, start, end, options, model, m1_csv, ticks_csv)
    meta = meta_of(df)
    folder = out or Path("reports") / f"optimize-{cls.__name__}-{meta.symbol}-{meta.timeframe.name}"
    prepare_out(folder, force=True)  # the study store there is resumed, never replaced
    store_path = store or str(folder / "study.db")
    common = {
        "method": method, "criterion": crit, "passes": passes, "seed": seed, "account": account,
        "workers": workers, "scheduler": scheduler, "store_path": store_path,
        "progress": progress and sys.stderr.isatty(),
        "split": None if pass_forward.strip().lower() in _NONE else pass_forward,
        "model": model.strip().lower(), "m1": m1, "ticks": ticks,
    }  # fmt: skip
    typer.echo(
        f"{cls.__name__} on {meta.symbol} {meta.timeframe.name}: {len(df)} bars, {space.grid_size} grid "
        f"points; {method}, {crit.label}; model {MODELS[common['model']]}; study {store_path}"
    )
    try:
        if wf is None:
            table = optimize(df, cls, space, forward=None if no_forward else forward, top=top, **common)
            result = None
        else:
            result = walk_forward(df, cls, space, wf[0], wf[1], anchored=anchored, **common)
            table = result.passes[result.passes["window"] == result.passes["window"].max()]
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished passes are kept in {store_path}; re-run to resume", err=True)
        raise SystemExit(130) from None
    info = {
        "ea": cls.__name__,
        "data": f"{meta.symbol} {meta.timeframe.name}, {df.index[0]:%Y-%m-%d} .. {df.index[-1]:%Y-%m-%d}",
        "criterion": crit.name,
        "model": MODELS[common["model"]],
        "method": method + (f", seed {seed}" if method != "grid" else ""),
        "fixed": ", ".join(f"{k}={v}" for k, v in space.fixed.items()) or "none",
        "store": store_path,
        "currency": account.currency,
    }
    if result is None:
        info["optimisation period"] = " .. ".join(table.attrs["optimisation"])
        info["forward period"] = " .. ".join(table.attrs["forward"]) if table.attrs["forward"] else "none"
        info["engine"] = table.attrs["where"]
        info["study"] = table.attrs["study"]
    else:
        kind = "anchored" if anchored else "rolling"
        info["walk-forward"] = f"train {wf[0]} bars, test {wf[1]} bars, {kind}"
        info["passes shown"] = "the last window's optimisation"
        info["study"] = "one per train window, in the same store"
    page = write_report(folder, table, space.names, info, pair, top, result)
    _summary(table, space.names, result, page)


def _heat_pair(text: str | None, names: list[str]) -> tuple[str, str] | None:
    if not text:
        return None
    parts = tuple(p.strip() for p in text.split(","))
    if len(parts) != 2 or parts[0] == parts[1] or not set(parts) <= set(names):
        raise CommandError(f"--heatmap {text!r}: expected two different searched parameters X,Y of {names}")
    return parts


def _summary(table: pd.DataFrame, names: list[str], result, page: Path) -> None:
    ran = table.attrs.get("ran") if result is None else result.summary["ran"]
    total = len(table) if result is None else len(result.passes)
    typer.echo(f"passes run now: {ran}; already in the study store: {total - ran}")
    if result is not None:
        s = result.summary
        eff = "undefined" if result.efficiency is None else f"{result.efficiency:.2f}"
        typer.echo(
            f"walk-forward: {s['windows']} windows, in-sample {s['is_return_ann_pct']:.1f} %/year, "
            f"out-of-sample {s['oos_return_ann_pct']:.1f} %/year, efficiency {eff}, "
            f"out-of-sample net profit {s['oos_net_profit']:.2f}"
        )
        for _, w in result.windows.iterrows():
            params = ", ".join(f"{n}={w[n]}" for n in names)
            money = f"IS {w['is_net_profit']:.2f}  OOS {w['oos_net_profit']:.2f}"
            typer.echo(f"  window {w['window']}: {params}  {money}")
    else:
        done = table[table["criterion"].notna()]
        typer.echo(f"{len(table)} passes, {len(done)} with a defined criterion; best:")
        errors = table["error"].dropna()
        if len(done) == 0 and len(errors):
            typer.echo(f"  every pass failed; the first error: {errors.iloc[0]}", err=True)
        for _, row in done.head(5).iterrows():
            params = ", ".join(f"{n}={row[n]}" for n in names)
            fwd = row.get("forward_criterion")
            extra = "" if fwd is None or pd.isna(fwd) else f"  forward {fwd:.4g}"
            typer.echo(f"  pass {row['pass']}: {params}  criterion {row['criterion']:.4g}{extra}")
    typer.echo(f"report: {page}")
