"""``neuronet robustness REPORT``: could this be luck? Monte Carlo of a finished run, bootstrap intervals
and tests of its predictions, and a permutation test of its EA, written next to the report as
robustness.json and robustness.html.

The permutation test re-runs the report's EA on the report's candles (given with the usual data options,
checked against the report) and keeps every finished permutation in ``permutations.db`` in the output
folder: after Ctrl-C the same command resumes. A finished robustness.json is never replaced without
``--force``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from backtests.optimize.errors import StoreInUseError
from backtests.robustness.analysis import Options, analyze_report, load_report, seeded, write_robustness
from backtests.robustness.montecarlo import METHODS
from backtests.robustness.permute import SCOPES
from datafeeds import load_candles
from neuronet.commands import values
from neuronet.commands.backtest import ROBUSTNESS_STORE, Symbol, Timeframe
from neuronet.commands.ea_options import resolve_ea
from neuronet.commands.errors import CommandError
from neuronet.commands.options import (
    BrokerTz,
    CsvPath,
    End,
    Force,
    Opts,
    Source,
    Start,
    check_out,
    data_request,
)

STORE = ROBUSTNESS_STORE  # the permutation test's study store, in the output folder
OUTPUTS = ("robustness.json", "robustness.html")


def robustness_command(
    report: Annotated[
        Path,
        typer.Argument(
            help="A report folder of neuronet run/backtest (or its report.json).", parser=values.path
        ),
    ],
    monte_carlo: Annotated[
        int | None, typer.Option("--monte-carlo", help="Monte Carlo simulations per method (default 1000).")
    ] = None,
    methods: Annotated[
        str, typer.Option("--methods", help=f"Monte Carlo methods, comma-separated: {', '.join(METHODS)}.")
    ] = ",".join(METHODS),
    ruin_drawdown: Annotated[
        float, typer.Option("--ruin-drawdown", help="Ruin: a drawdown of this many % from a running peak.")
    ] = 20.0,
    block: Annotated[
        float | None,
        typer.Option("--block", help="Mean block length in bars of the bootstraps (default: bars^(1/3))."),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option("--bootstrap", help="Bootstrap resamples of the prediction intervals (default 1000)."),
    ] = None,
    permutations: Annotated[
        int | None,
        typer.Option("--permutations", help="Permuted histories to re-run the EA on (default: none)."),
    ] = None,
    permutation_block: Annotated[
        int, typer.Option("--permutation-block", help="Permute blocks of this many bars (1: single bars).")
    ] = 1,
    permute: Annotated[
        str,
        typer.Option(
            "--permute", help="both: study and forward windows each within itself; forward: only it."
        ),
    ] = "both",
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of every draw (default: the report's).")
    ] = None,
    ea: Annotated[
        str | None,
        typer.Option(
            "--ea",
            help="The report's EA for --permutations (default: its built-in by name).",
            parser=values.text,
        ),
    ] = None,
    source: Source = "sample",
    symbol: Symbol = None,
    timeframe: Timeframe = None,
    path: CsvPath = None,
    start: Start = None,
    end: End = None,
    broker_tz: BrokerTz = None,
    opt: Opts = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Local processes for permutations (default: one per core).",
            min=0,
            max=values.MAX_COUNT,
        ),
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="A running Dask scheduler.", parser=values.text)
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Folder for robustness.json/.html (default: the report's).", parser=values.path
        ),
    ] = None,
    force: Force = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Progress bar of permutations.")
    ] = True,
) -> None:
    """Could this be luck? Monte Carlo, prediction intervals and a permutation test of a finished run."""
    for name, value in (
        ("--monte-carlo", monte_carlo),
        ("--bootstrap", bootstrap),
        ("--permutations", permutations),
    ):
        if value is not None and value < 1:
            raise CommandError(f"{name} {value}: give at least 1, or leave the option out")
    chosen = tuple(dict.fromkeys(m.strip().lower() for m in methods.split(",") if m.strip()))  # once each
    if not chosen or set(chosen) - set(METHODS):
        raise CommandError(f"--methods {methods!r}: choose from {', '.join(METHODS)}")
    if permute not in SCOPES:
        raise CommandError(f"--permute {permute!r}: choose {' or '.join(SCOPES)}")
    if not permutations:  # what only the permutation test reads would be dropped unsaid
        _refuse_unused(
            {"--ea": ea is not None, "--permutation-block": permutation_block != 1,
             "--permute": permute != "both", "--source": source != "sample", "--symbol": symbol is not None,
             "--timeframe": timeframe is not None, "--path": path is not None, "--from": start is not None,
             "--to": end is not None, "--broker-tz": broker_tz is not None, "--opt": bool(opt)}
        )  # fmt: skip
    if scheduler:
        from backtests.optimize.engine import scheduler_address

        scheduler_address(scheduler)
    doc = load_report(report)  # another version, an interrupted run or not a report: one line
    folder = check_out(out or (report if report.is_dir() else report.parent))  # made once all is checked
    taken = [name for name in OUTPUTS if (folder / name).exists()]
    if taken and not force:
        raise FileExistsError(
            f"{folder / taken[0]}: a robustness analysis is there; pass --force to replace it"
        )
    options = Options(
        monte_carlo=1000 if monte_carlo is None else monte_carlo,
        methods=chosen,
        block=block,
        ruin_pct=ruin_drawdown,
        permutations=permutations or 0,
        permutation_block=permutation_block,
        scope=permute,
        bootstrap=1000 if bootstrap is None else bootstrap,
        seed=seed,
    )
    options.check()
    options = seeded(options, int(doc["seed"]))
    if bootstrap is None and not (doc.get("predictions") or {}).get("series"):  # none, or an older report
        options = _without_bootstrap(options)
    candles = cls = None
    if options.permutations:
        cls = resolve_ea(ea or doc["ea"]["class"])
        name, load = data_request(
            source, path, opt, broker_tz, doc["seed"], seed_is_data=False, start=start, end=end
        )
        candles = load_candles(name, symbol, timeframe, start, end, **load)

    def ready() -> None:  # every check passed: the folder for the store and the results, and the plan
        folder.mkdir(parents=True, exist_ok=True)
        typer.echo(_plan_line(doc, options))

    try:
        result = analyze_report(
            report, options, candles=candles, ea=cls, workers=workers, scheduler=scheduler,
            store_path=str(folder / STORE), progress=progress and sys.stderr.isatty(), strict=True,
            on_ready=ready,
        )  # fmt: skip
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: finished permutations are kept in {folder / STORE}; re-run to resume", err=True
        )
        raise SystemExit(130) from None
    except StoreInUseError as exc:  # permutations.db of the --out folder
        raise exc.remedied("give another --out") from None
    page = write_robustness(folder, result, doc)
    print_robustness(result.to_dict())
    typer.echo(f"report: {page}")


def _refuse_unused(given: dict[str, bool]) -> None:
    """Options of the permutation test given without ``--permutations``: refused, not dropped."""
    unused = [name for name, is_given in given.items() if is_given]
    if unused:
        raise CommandError(
            f"{unused[0]} is for the permutation test (the report's EA re-run on its data): give "
            "--permutations N, or leave it out"
        )


def _without_bootstrap(options: Options) -> Options:
    from dataclasses import replace

    return replace(options, bootstrap=0)


def _plan_line(doc: dict, options: Options) -> str:
    parts = []
    if options.monte_carlo:
        parts.append(f"Monte Carlo {options.monte_carlo:,} x {'/'.join(options.methods)}")
    if options.bootstrap:
        parts.append(f"prediction bootstrap {options.bootstrap:,}")
    if options.permutations:
        parts.append(f"{options.permutations:,} permutations")
    what = f"{doc['ea']['class']} on {doc['data']['symbol']} {doc['data']['timeframe']}"
    return f"{what}: {', '.join(parts)}; seed {options.seed}"


def print_robustness(doc: dict) -> None:
    """The console lines: the median and 5-95 % of each Monte Carlo figure, p-values, intervals."""
    for method, d in (doc["monte_carlo"] or {}).items():
        f = d["figures"]
        final, dd = f["final"]["percentiles"], f["max_drawdown_pct"]["percentiles"]
        typer.echo(
            f"monte carlo ({method}): final {final['50']:.2f} "
            f"(5-95 %: {final['5']:.2f} .. {final['95']:.2f}), "
            f"max drawdown {dd['50']:.2f} % (95 %: {dd['95']:.2f} %), ruin at {d['ruin_pct']:g} %: "
            f"{100 * d['ruin_probability']:.2f} %"
        )
    t = doc["permutation"]
    if t:
        ps = ", ".join(
            f"{k.replace('_', ' ')} p = {v:.4g}" for k, v in t["p_values"].items() if v is not None
        )
        typer.echo(f"permutation test ({t['permutations']:,} histories): {ps}")
    p = doc["predictions"]
    if p:
        ci = p["balanced_accuracy"]["model"]
        typer.echo(f"balanced accuracy {ci['value']:.4f} (95 %: {ci['low']:.4f} .. {ci['high']:.4f})")
        for name, test in p["mcnemar"].items():
            typer.echo(f"  McNemar against {name.replace('_', ' ')}: p = {test['p_value']:.4g}")
        for name, test in (p.get("diebold_mariano") or {}).items():
            if "p_value" in test:
                typer.echo(f"  Diebold-Mariano against {name.replace('_', ' ')}: p = {test['p_value']:.4g}")
    for note in doc["notes"]:
        typer.echo(f"note: {note}", err=True)
