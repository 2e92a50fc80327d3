"""``neuronet run`` and ``neuronet backtest``: replay history with an expert advisor and write a report.

``backtest`` runs any EA, built-in by name or a user's class as ``path/to/file.py:ClassName``; ``run`` is
``backtest FractalEA``, the main job: on the embedded EURUSD H1 sample by default, trained on the first two
thirds and judged on the last third. Both take the data options of ``neuronet data show`` and share every
default with the Python API (``Backtest(...)``, the EAs' parameters), so each entry point gives the same
numbers.
"""

from __future__ import annotations

import inspect
import sys
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from backtests import AccountConfig, Backtest
from backtests.optimize.errors import StoreInUseError
from backtests.report import environment, write_report
from backtests.robustness.analysis import Options as RobustOptions
from backtests.robustness.analysis import analyze
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
from neuronet.commands.config import Config
from neuronet.commands.ea_options import BackendOpt, BatchSize, EaArg, Epochs, Param, ea_params, resolve_ea
from neuronet.commands.ea_options import set_file as set_file
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
    flag,
    out_folder,
    prepare_out,
)
from neuronet.commands.summary import print_summary
from neuronet.commands.symbols import MarketRequest, load_market
from strategies import ExpertAdvisor

ROBUSTNESS_STORE = "permutations.db"  # the permutation test's study store, in the report folder
# What a run interrupted during its permutations leaves in --out: the same command resumes from it.
RESUMABLE = frozenset(ROBUSTNESS_STORE + end for end in ("", ".lock", "-journal", "-wal", "-shm"))


def _walk_forward(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        train, test = (int(v) for v in text.split(","))
    except ValueError:
        raise CommandError(f"--walk-forward {text!r}: expected TRAIN,TEST bar counts like 2000,500") from None
    if not (1 <= train <= values.MAX_COUNT and 1 <= test <= values.MAX_COUNT):
        raise CommandError(f"--walk-forward {text!r}: TRAIN and TEST are bar counts >= 1")
    return train, test


def _execute(
    ea: type[ExpertAdvisor],
    df: pd.DataFrame,
    *,
    forward: str | None,
    walk_forward: tuple[int, int] | None,
    account: AccountConfig,
    seed: int,
    params: dict[str, Any],
    out: Path | None,
    progress: bool,
    profile: bool = False,
    model: str = "open",
    m1: pd.DataFrame | None = None,
    ticks: pd.DataFrame | None = None,
    robustness: RobustOptions | None = None,
    workers: int | None = None,
    force: bool = False,
    specs: dict | None = None,
) -> None:
    def announce() -> None:  # the EA took its parameters: say what runs (a refused one is the only line)
        meta, fs = bt.meta, bt.periods.forward_start
        df = bt.candles  # the main chart's
        index = df.index if bt.multi is None else bt.multi.setup.aligned.time  # the bars the periods count
        if bt.multi is not None:
            typer.echo(f"{ea.__name__} trades {', '.join(bt.multi.setup.symbols)} on one account")
        if account.spread is None and not df["spread"].any():
            typer.echo(
                f"note: these candles carry no spread; trading with {account.missing_spread} points "
                "(--spread POINTS to change)",
                err=True,
            )
        # one bar before the first traded one is the start row, not a study period
        study = "no study"
        if fs > 1:
            study = f"study {index[0]:%Y-%m-%d} .. {index[fs - 1]:%Y-%m-%d} ({fs})"
        typer.echo(
            f"{ea.__name__} on {meta.symbol} {meta.timeframe.name} ({meta.source}): {len(index)} bars, "
            f"{study}, forward {index[fs]:%Y-%m-%d} .. {index[-1]:%Y-%m-%d} ({len(index) - fs}): "
            f"{bt.forward_rule}"
        )
        chosen = str(params.get("backend", ea.param_defaults().get("backend", "")))
        if profile and chosen.startswith("numpy"):
            typer.echo("note: --profile measures device time on the OpenCL backend only", err=True)

    bt = Backtest(
        df,
        ea,
        model=model,
        m1=m1,
        ticks=ticks,
        account=account,
        walk_forward=walk_forward,
        seed=seed,
        progress=progress,
        profile=profile,
        on_ready=announce,
        **({} if specs is None else {"specs": specs}),
        **({} if forward is None else {"forward": forward}),  # else Backtest's own default (auto)
    )
    meta = bt.meta
    folder = out  # a given --out was prepared before the data was read
    if folder is None:
        folder = default_out(
            ea.__name__, meta.symbol, meta.timeframe.name, f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
        )
    with out_folder(folder, force=False) if out is None else nullcontext():
        result = bt.run(**params)
        prepare_out(folder, force, RESUMABLE)  # again: another run may have written there meanwhile
        rob = None
        if robustness is not None and result.complete:
            store = str(folder / ROBUSTNESS_STORE) if robustness.permutations else None
            try:
                rob = analyze(result, bt, robustness, workers=workers, store_path=store, progress=progress)
            except KeyboardInterrupt:
                typer.echo(
                    f"interrupted: finished permutations are kept in {store}; re-run to resume", err=True
                )
                raise
            except StoreInUseError as exc:  # the store is the --out folder's
                raise exc.remedied("give another --out") from None
        env = environment()
        trained_on = result.training[-1].get("backend") if result.training else None
        if trained_on is not None:
            env["nn_backend"] = trained_on
        try:
            page = write_report(result, folder, env, robustness=rob, force=True, keep=RESUMABLE)
        except KeyboardInterrupt:
            typer.echo("interrupted while writing the report; files already written are complete", err=True)
            raise
    print_summary(result, page, trained_on, rob)
    if not result.complete:
        raise KeyboardInterrupt  # the report is written; end as an interrupted command does


# -- Typer commands ---------------------------------------------------------------------------------------

Symbol = Annotated[
    str | None, typer.Option("--symbol", help="Symbol (default: the source's own).", parser=values.text)
]
Timeframe = Annotated[
    str | None,
    typer.Option(
        "--timeframe", help="Timeframe such as H1 (default: the source's own).", parser=values.timeframe
    ),
]
SymbolsFile = Annotated[
    Path | None,
    typer.Option(
        "--symbols-file",
        help="Symbol specifications (TOML [EURGBP] tables or JSON): digits, contract_size, currencies, "
        "calc_mode, swaps, levels, volumes, trade_mode; they override the built-in table of FX pairs "
        "and metals.",
        parser=values.path,
    ),
]
Symbols = Annotated[
    str | None,
    typer.Option(
        "--symbols",
        help="Several symbols on one account, e.g. EURUSD,GBPUSD (default: the EA's own symbols); the "
        "first is the main chart. Their conversion pairs are loaded too.",
        parser=values.text,
    ),
]
Forward = Annotated[
    str | None,
    typer.Option(
        "--forward",
        help="Forward period: 1/2, 1/3, 1/4, a fraction, a date, or none (trade every bar). Default: 1/3 for "
        "an EA that studies (trains on the bars before it), none for one that does not.",
        parser=values.text,
    ),
]
WalkForward = Annotated[
    str | None,
    typer.Option(
        "--walk-forward",
        help="TRAIN,TEST bars: retrain on the last TRAIN bars every TEST.",
        parser=values.text,
    ),
]
Seed = Annotated[
    int,
    typer.Option(
        "--seed",
        help="Seed of everything random, synthetic candles included (same seed, same numbers).",
        min=0,
        max=values.MAX_SEED,
    ),
]
Out = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Report folder (default: reports/<EA>-<SYMBOL>-<TF>-<time>); must be new or empty.",
        parser=values.path,
    ),
]
Progress = Annotated[
    bool, typer.Option("--progress/--no-progress", help="Progress bars for epochs and bars.", metavar="")
]
MonteCarlo = Annotated[
    int,
    typer.Option(
        "--monte-carlo",
        help="Monte Carlo simulations of the trades and of the bar returns in the report (0: none).",
    ),
]
Permutations = Annotated[
    int,
    typer.Option(
        "--permutations",
        help="Re-run the EA on this many histories with permuted bars: p-values of its net profit and "
        "balanced accuracy (0: none; resumable with --out).",
    ),
]
RuinDrawdown = Annotated[
    float, typer.Option("--ruin-drawdown", help="Monte Carlo ruin: a drawdown of this many % from a peak.")
]
Bootstrap = Annotated[
    int, typer.Option("--bootstrap", help="Bootstrap resamples of the prediction intervals (0: none).")
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="Local processes for --permutations (default: one per core; 0: inline).",
        min=0,
        max=values.MAX_COUNT,
    ),
]
Profile = Annotated[
    bool,
    flag("--profile", help="Record OpenCL kernel time per epoch (device seconds); costs some host time."),
]


def backtest(
    ea: EaArg,
    source: Source = "sample",
    symbol: Symbol = None,
    symbols: Symbols = None,
    symbols_file: SymbolsFile = None,
    timeframe: Timeframe = None,
    path: CsvPath = None,
    start: Start = None,
    end: End = None,
    broker_tz: BrokerTz = None,
    opt: Opts = None,
    forward: Forward = None,
    walk_forward: WalkForward = None,
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
    param: Param = None,
    out: Out = None,
    force: Force = False,
    progress: Progress = True,
    profile: Profile = False,
    model: Model = "open",
    m1_csv: M1Csv = None,
    ticks_csv: TicksCsv = None,
    monte_carlo: MonteCarlo = 1000,
    permutations: Permutations = 0,
    ruin_drawdown: RuinDrawdown = 20.0,
    bootstrap: Bootstrap = 1000,
    workers: Workers = None,
    config: Config = None,
) -> None:
    """Backtest an expert advisor (built-in or your own class) and write a report."""
    cls = resolve_ea(ea)
    robust = RobustOptions(
        monte_carlo=monte_carlo,
        permutations=permutations,
        ruin_pct=ruin_drawdown,
        bootstrap=bootstrap,
        seed=seed,
    )
    robust.check()  # bad counts in one line, before any data is read
    if permutations and model.strip().lower() != "open":
        raise CommandError(f"--permutations rebuilds the candles only; use --model open, not --model {model}")
    account = account_settings(
        deposit=deposit,
        leverage=leverage,
        spread=spread,
        commission=commission,
        swap_long=swap_long,
        swap_short=swap_short,
        hedging=hedging,
        margin_hedged=margin_hedged,
    )
    params = ea_params(param or [], cls, epochs=epochs, batch_size=batch_size, backend=backend)
    cls.resolve_params(params)  # names, types and the backend of -p, before any data is read
    walk = _walk_forward(walk_forward)
    if walk is not None and forward is not None:  # the walk-forward windows are the forward period
        raise CommandError("give --forward or --walk-forward, not both")
    name, options = data_request(source, path, opt, broker_tz, seed, seed_is_data=False, start=start, end=end)
    model = model.strip().lower()
    # before any work: a bad or occupied --out must not cost the user a whole run
    with out_folder(out, force, RESUMABLE) if out is not None else nullcontext():
        request = MarketRequest(
            name, options, symbol, symbols, symbols_file, timeframe, start, end, model, m1_csv, ticks_csv
        )
        market = load_market(cls, request, account.currency)
        _execute(
            market.ea,
            market.candles,
            forward=forward,
            walk_forward=walk,
            account=account,
            seed=seed,
            params=params,
            out=out,
            progress=progress and sys.stderr.isatty(),
            profile=profile,
            model=model,
            m1=market.m1,
            ticks=market.ticks,
            robustness=robust,
            workers=workers,
            force=force,
            specs=market.specs,
        )


def run(**options: Any) -> None:
    """The main job: the Fractal EA on the embedded EURUSD H1 sample (or any data), and its report.

    The same options and defaults as 'neuronet backtest FractalEA'."""
    backtest("FractalEA", **options)


# ``run`` is ``backtest FractalEA``: the same options, declared once.
_SIG = inspect.signature(backtest, eval_str=True)
run.__signature__ = _SIG.replace(parameters=[p for n, p in _SIG.parameters.items() if n != "ea"])
run.__annotations__ = {n: p.annotation for n, p in _SIG.parameters.items() if n != "ea"}
