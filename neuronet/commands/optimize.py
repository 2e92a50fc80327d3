"""``neuronet optimize``: the Strategy Tester's optimisation (grid, genetic, random, TPE), forward test and
walk-forward analysis of any EA, on a local Dask cluster or a running one.

The study store (SQLite) lives in the report folder. As for ``backtest``, the folder must be new or empty
unless ``--force`` (checked before any pass runs), except that the study store an interrupted run left
there does not count: running the same command again resumes the study and runs only the passes it
lacks. The default folder's name ends with a hash of everything that makes the figures (EA, space,
method, seed, criterion, data, costs, model, forward or walk-forward split), so two different commands
never share a default folder while the same command always finds its own.
"""

from __future__ import annotations

import hashlib
import json
import sys
from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import typer

from backtests.optimize import CRITERIA, METHODS, Plan, get_criterion, optimize, parse_space, walk_forward
from backtests.optimize.engine import Engine, scheduler_address
from backtests.optimize.errors import StoreInUseError
from backtests.optimize.lock import LOCK_SUFFIX
from backtests.optimize.report import write_report
from backtests.optimize.store import check_location
from backtests.optimize.walkforward import windows
from backtests.paths import MODELS
from backtests.periods import PeriodError, resolve
from backtests.robustness.optimisation import check_options
from datafeeds import meta_of
from neuronet.commands import values
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
from neuronet.commands.backtest import Seed, Symbol, Symbols, SymbolsFile, Timeframe, _walk_forward
from neuronet.commands.config import Config
from neuronet.commands.ea_options import BackendOpt, BatchSize, EaArg, Epochs, ea_params, resolve_ea, set_file
from neuronet.commands.errors import CommandError
from neuronet.commands.options import (
    BrokerTz,
    CsvPath,
    End,
    Force,
    M1Csv,
    Model,
    Opts,
    Source,
    Start,
    TicksCsv,
    data_request,
    default_out,
    out_folder,
    prepare_out,
)
from neuronet.commands.symbols import MarketRequest, load_market
from strategies.setfile import SetRange, write_set

_NONE = ("none", "off", "0", "")
STORE = "study.db"  # the default study store, in the report folder
# What an interrupted run leaves in its folder: the store (with SQLite's journals) and its lock.
_RESUMABLE = frozenset(STORE + end for end in ("", LOCK_SUFFIX, "-journal", "-wal", "-shm"))


_PARAM = typer.Option(
    [],
    "--param",
    "-p",
    help="Searched: NAME=START:STOP:STEP or NAME=A,B,C (text: A|B), or @FILE.set: a MetaTrader .set file's "
    "ranges flagged Y (its other inputs fixed).",
    parser=values.text,
)
_SET = typer.Option(
    [], "--set", help="Fixed parameter NAME=VALUE, verbatim (repeatable).", parser=values.text
)
_METHOD = typer.Option("grid", "--method", help=f"Search: {'|'.join(METHODS)}.", parser=values.text)
_PASSES = typer.Option(
    None, "--passes", help="Passes of genetic/random/tpe (grid: all).", min=1, max=values.MAX_COUNT
)
_CRITERION = typer.Option("balance", "--criterion", help=f"{'|'.join(CRITERIA)}.", parser=values.text)
_FWD = typer.Option("none", "--forward", help="Forward period: 1/3, a fraction, a date, none.")
_WALK = typer.Option(
    None, "--walk-forward", help="TRAIN,TEST bars: walk-forward analysis.", parser=values.text
)
_ANCHORED = typer.Option(False, "--anchored", help="Walk-forward: train on every earlier bar.")
_WORKERS = typer.Option(
    None, "--workers", help="Local processes (default: one per core; 0: inline).", min=0, max=values.MAX_COUNT
)
_SCHEDULER = typer.Option(
    None, "--scheduler", help="A running Dask scheduler, tcp://HOST:8786.", parser=values.text
)
_TOP = typer.Option(
    10, "--top", help="Best passes re-run on the forward period and shown.", min=0, max=values.MAX_COUNT
)
_HEAT = typer.Option(None, "--heatmap", help="X,Y: the two parameters of the heat map.", parser=values.text)
_OUTDIR = typer.Option(
    None,
    "--out",
    help="Report folder, new or empty (default: reports/optimize-EA-SYMBOL-TF-METHOD-HASH).",
    parser=values.path,
)
_STORE = typer.Option(
    None, "--store", help="Study store: SQLite file or RDB URL (default: OUT/study.db).", parser=values.text
)
_BAR = typer.Option(True, "--progress/--no-progress", help="Progress bar of passes.")
_SPA = typer.Option(1000, "--spa-reps", help="Bootstrap resamples of the Reality Check / SPA test.")
_PBO = typer.Option(16, "--pbo-splits", help="Blocks of the PBO's cross-validation (CSCV), even, 2..20.")
_SPLIT = typer.Option(
    "none", "--pass-forward", help="Each pass's own split (1/3, ...): EAs that train are judged unseen."
)


def optimize_command(
    ea: EaArg,
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
    symbols: Symbols = None,
    symbols_file: SymbolsFile = None,
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
    force: Force = False,
    spa_reps: int = _SPA,
    pbo_splits: int = _PBO,
    config: Config = None,
) -> None:
    """Optimise an EA's parameters (grid, genetic, random, TPE) with forward test or walk-forward analysis."""
    cls = resolve_ea(ea)
    crit = get_criterion(criterion)
    if scheduler:
        scheduler_address(scheduler)  # a garbage address fails here, before data or workers
    account = account_settings(
        deposit=deposit, leverage=leverage, spread=spread, commission=commission,
        swap_long=swap_long, swap_short=swap_short, hedging=hedging, margin_hedged=margin_hedged,
    )  # fmt: skip
    param, fixed = _with_set_files(param, fixed, cls)
    sets = ea_params(fixed, cls, "--set", epochs=epochs, batch_size=batch_size, backend=backend)
    cls.resolve_params(sets)  # names, types and the backend of --set, before data or workers
    space = parse_space(cls, param, sets)  # every spec checked before data or workers
    Plan(method, passes, seed)
    Engine(workers, scheduler)  # the worker count and the scheduler's address, before any data
    check_options(spa_reps, pbo_splits)
    pair = _heat_pair(heatmap, space.names)
    wf = _walk_forward(walk)
    no_forward = forward.strip().lower() in _NONE
    if wf is not None and not no_forward:
        raise CommandError("give --forward or --walk-forward, not both")
    if anchored and wf is None:
        raise CommandError("--anchored applies to --walk-forward TRAIN,TEST only")
    if store is not None:
        check_location(store)  # a folder, a pipe or another application's database: before the data
    name, options = data_request(source, csv, opt, broker_tz, seed, seed_is_data=False, start=start, end=end)
    request = MarketRequest(
        name, options, symbol, symbols, symbols_file, timeframe, start, end, model.strip().lower(), m1_csv,
        ticks_csv,
    )  # fmt: skip
    split = None if pass_forward.strip().lower() in _NONE else pass_forward
    # a bad or occupied --out fails before the data is read; refused data leaves no folder behind
    with out_folder(out, force, _RESUMABLE) if out is not None else nullcontext():
        market = load_market(cls, request, account.currency)
        cls, candles, m1, ticks, df = market.ea, market.candles, market.m1, market.ticks, market.main
        _check_periods(df, cls, None if no_forward else forward, wf, anchored, split)
    meta = meta_of(df)
    folder = out
    if folder is None:  # named after what makes the figures; checked before any pass runs
        what = {
            "space": space.describe(), "method": method, "seed": seed, "criterion": crit.name,
            "account": account.to_dict(), "model": model.strip().lower(), "forward": forward.strip().lower(),
            "walk_forward": [wf, anchored], "pass_forward": pass_forward.strip().lower(),
            "data": [_digest(f) for f in (candles, m1, ticks)],
            "specs": None if market.specs is None else {k: v.to_dict() for k, v in market.specs.items()},
        }  # fmt: skip
        key = hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]
        folder = default_out("optimize", cls.__name__, meta.symbol, meta.timeframe.name, method, key)
        prepare_out(folder, force, _RESUMABLE)
    store_path = store or str(folder / STORE)
    common = {
        "method": method, "criterion": crit, "passes": passes, "seed": seed, "account": account,
        "workers": workers, "scheduler": scheduler, "store_path": store_path,
        "progress": progress and sys.stderr.isatty(),
        "split": split,
        "model": model.strip().lower(), "m1": m1, "ticks": ticks, "specs": market.specs,
    }  # fmt: skip
    if isinstance(candles, dict):
        typer.echo(f"{cls.__name__} trades {', '.join(cls.symbols)} on one account")
    typer.echo(
        f"{cls.__name__} on {meta.symbol} {meta.timeframe.name}: {len(df)} bars, {space.grid_size} grid "
        f"points; {method}, {crit.label}; model {MODELS[common['model']]}; study {store_path}"
    )
    try:
        if wf is None:
            table = optimize(
                candles, cls, space, forward=None if no_forward else forward, top=top, spa_reps=spa_reps,
                pbo_splits=pbo_splits, **common,
            )  # fmt: skip
            result = None
        else:
            result = walk_forward(
                candles, cls, space, wf[0], wf[1], anchored=anchored, pbo_splits=pbo_splits, **common
            )
            table = result.passes[result.passes["window"] == result.passes["window"].max()]
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished passes are kept in {store_path}; re-run to resume", err=True)
        raise SystemExit(130) from None
    except StoreInUseError as exc:
        raise exc.remedied("give another --store") from None
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
    try:  # again: another run on this --out (with its own --store) may have finished there meanwhile
        prepare_out(folder, force, _RESUMABLE)
    except FileExistsError as exc:
        raise FileExistsError(
            f"{exc}; another run wrote into it meanwhile: the finished passes are kept in {store_path}"
        ) from None
    page = write_report(folder, table, space.names, info, pair, top, result)
    best = _write_best_set(folder, cls, space, table)
    _summary(table, space.names, result, page)
    if best is not None:
        typer.echo(f"best pass as MetaTrader inputs: {best} (-p @{best})")


def _with_set_files(param: list[str], fixed: list[str], ea) -> tuple[list[str], list[str]]:
    """``-p @FILE.set``: the file's optimised inputs (flag Y) become searched ranges, start:stop:step, and
    its other inputs fixed values; a -p or --set naming an input overrides the file's line for it."""
    named = {p.partition("=")[0].strip() for p in [*param, *fixed] if not p.startswith("@")}
    searched, kept = [p for p in param if not p.startswith("@")], list(fixed)
    for spec in (p for p in param if p.startswith("@")):
        inputs = set_file("--param", spec, ea)
        ranges = inputs.searched()
        searched += [f"{k}={v}" for k, v in ranges.items() if k not in named]
        kept += [f"{k}={v}" for k, v in inputs.fixed().items() if k not in named and k not in ranges]
        named |= set(inputs.values)
    return searched, kept


def _write_best_set(folder: Path, ea, space, table: pd.DataFrame) -> Path | None:
    """The best pass's inputs as a MetaTrader .set file (``best.set``), the searched ones with their
    ranges flagged Y, so the terminal's tester loads both the winner and the search; None without one."""
    done = table[table["criterion"].notna()] if "criterion" in table else table.iloc[:0]
    if not len(done):
        return None
    row = done.iloc[0]
    values = {**ea.param_defaults(), **dict(space.fixed)}
    ranges = {}
    for d in space.dimensions:
        values[d.name] = row[d.name].item() if hasattr(row[d.name], "item") else row[d.name]
        if d.kind in ("int", "float") and len(d.values) > 1:
            ranges[d.name] = SetRange(d.values[0], d.values[1] - d.values[0], d.values[-1], True)
    return write_set(folder / "best.set", ea.__name__, values, ranges)


def _digest(frame: pd.DataFrame | dict[str, pd.DataFrame] | None) -> str | dict | None:
    """A hash of a frame's values and times (None for no frame; several symbols: one each)."""
    if frame is None:
        return None
    if isinstance(frame, dict):
        return {name: _digest(f) for name, f in frame.items()}
    rows = pd.util.hash_pandas_object(frame, index=True).to_numpy()
    return hashlib.sha1(rows.tobytes()).hexdigest()


def _check_periods(df: pd.DataFrame, ea, forward: str | None, wf, anchored: bool, split: str | None) -> None:
    """The forward period, the walk-forward windows and each pass's split fit the data, checked as the
    optimisation will check them, but before the report folder, the study or any worker is set up."""
    if wf is not None:
        windows(len(df), wf[0], wf[1], anchored)
    else:  # without a forward period too: every pass needs its study bars and a few to trade
        resolve(df.index, forward, min_study=ea.min_study_bars)
    if split is not None:
        try:
            resolve(df.index, split, min_study=ea.min_study_bars)
        except PeriodError as exc:
            raise CommandError(f"--pass-forward: {exc}") from None


def _robustness_line(r: dict) -> None:
    """DSR, PBO and the SPA p-value of the best pass, or why they are missing."""
    parts = []
    for key, label, field in (
        ("deflated_sharpe", "DSR", "dsr"),
        ("pbo", "PBO", "pbo"),
        ("spa", "SPA p", "spa_p"),
    ):
        part = r.get(key) or {}
        parts.append(f"{label} {part[field]:.3f}" if field in part else f"{label} n/a")
    reason = next(
        (p["error"] for p in (r.get(k) or {} for k in ("deflated_sharpe", "pbo", "spa")) if "error" in p),
        None,
    )
    reason = reason or r.get("error")
    typer.echo("could the best pass be luck? " + ", ".join(parts) + (f" ({reason})" if reason else ""))


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
        pbo = "n/a" if s.get("pbo") is None else f"{s['pbo']:.2f}"
        typer.echo(
            f"walk-forward: {s['windows']} windows, PBO of the in-sample choice {pbo}, "
            f"in-sample {s['is_return_ann_pct']:.1f} %/year, "
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
        _robustness_line(table.attrs.get("robustness") or {})
    typer.echo(f"report: {page}")
