"""``neuronet run`` and ``neuronet backtest``: replay history with an expert advisor and write a report.

``run`` is the main job with sensible defaults: the Fractal EA on the embedded EURUSD H1 sample, trained
on the first two thirds and judged on the last third. ``backtest`` runs any EA, built-in by name or a
user's class as ``path/to/file.py:ClassName``, with the same options.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from backtests import AccountConfig, Backtest, Result
from backtests.report import environment, training_outcome, write_report
from datafeeds import load_candles, resample
from strategies import BUILTIN, ExpertAdvisor


def resolve_ea(target: str) -> type[ExpertAdvisor]:
    """A built-in EA by name, or ``file.py[:ClassName]`` (the only EA in the file when no name is given)."""
    if ".py" not in target:
        if target.lower() in BUILTIN:
            return BUILTIN[target.lower()]
        close = difflib.get_close_matches(target.lower(), list(BUILTIN), n=1)
        hint = f"did you mean {BUILTIN[close[0]].__name__}? " if close else ""
        raise LookupError(
            f"unknown EA {target!r}: {hint}use a built-in ({', '.join(_names())}) or FILE.py:ClassName"
        )
    head, _, name = target.partition(".py")
    path = Path(head + ".py")
    name = name.lstrip(":")
    if not path.is_file():
        raise FileNotFoundError(f"EA file not found: {path}")
    module_name = f"neuronet_user_ea_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ValueError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:
        raise ValueError(f"cannot import {path}: {type(exc).__name__}: {exc}") from None
    found = {
        n: obj
        for n, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, ExpertAdvisor) and obj.__module__ == module_name
    }
    if not name:
        if len(found) != 1:
            listed = ", ".join(sorted(found)) or "none"
            raise LookupError(
                f"{path} defines {len(found)} expert advisors ({listed}); name one as {path}:ClassName"
            )
        return next(iter(found.values()))
    obj = getattr(module, name, None)
    if obj is None:
        listed = ", ".join(sorted(found)) or "none"
        raise LookupError(f"{path} has no class {name!r} (expert advisors there: {listed})")
    if not (inspect.isclass(obj) and issubclass(obj, ExpertAdvisor)):
        raise ValueError(
            f"{path}:{name} is not an expert advisor: derive it from strategies.ExpertAdvisor "
            "and implement on_bar()"
        )
    return obj


def _names() -> list[str]:
    return sorted({cls.__name__ for cls in BUILTIN.values()})


def _params(pairs: list[str], ea: type[ExpertAdvisor], **known: Any) -> dict[str, Any]:
    """``--param key=value`` pairs plus the shortcut options that this EA actually has."""
    out: dict[str, Any] = {}
    defaults = ea.param_defaults()
    for key, value in known.items():
        if value is not None and key in defaults:
            out[key] = value
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--param {pair!r}: expected NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def _auto_backend(name: str | None) -> str | None:
    """``auto``: the OpenCL backend when a device works here, else the NumPy reference (with a note)."""
    if name != "auto":
        return name
    from nn import get_backend

    try:
        get_backend("opencl")
    except (OSError, ValueError) as exc:
        typer.echo(f"note: training on the NumPy backend ({exc})", err=True)
        return "numpy"
    return "opencl"


def _walk_forward(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        train, test = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--walk-forward {text!r}: expected TRAIN,TEST bar counts like 2000,500") from None
    return train, test


def _execute(
    ea: type[ExpertAdvisor],
    *,
    source: str,
    symbol: str | None,
    timeframe: str | None,
    csv: Path | None,
    start: str | None,
    end: str | None,
    forward: str,
    walk_forward: str | None,
    account: AccountConfig,
    seed: int,
    params: dict[str, Any],
    out: Path | None,
    progress: bool,
    profile: bool = False,
    model: str = "open",
    m1_csv: Path | None = None,
) -> None:
    options = {"path": str(csv)} if csv is not None else {}
    if csv is not None and source == "sample":
        source = "csv"
    df, m1 = _candles(source, symbol, timeframe, start, end, options, model, m1_csv)
    bt = Backtest(
        df,
        ea,
        account=account,
        forward=forward,
        walk_forward=_walk_forward(walk_forward),
        seed=seed,
        progress=progress,
        model=model,
        m1=m1,
    )
    meta = bt.meta
    fs = bt.periods.forward_start
    if account.spread is None and not df["spread"].any():
        typer.echo(
            "note: these candles carry no spread; trading costs are commission only (--spread POINTS)",
            err=True,
        )
    typer.echo(
        f"{ea.__name__} on {meta.symbol} {meta.timeframe.name} ({meta.source or source}): {len(df)} bars, "
        f"study {df.index[0]:%Y-%m-%d} .. {df.index[fs - 1]:%Y-%m-%d} ({fs}), "
        f"forward {df.index[fs]:%Y-%m-%d} .. {df.index[-1]:%Y-%m-%d} ({len(df) - fs})"
    )
    if profile:  # OpenCL queues created from here on record kernel times: per-epoch device seconds
        os.environ["NEURONET_PROFILE"] = "1"
    if params.get("backend") == "auto":  # decided after the data and periods passed their checks
        params["backend"] = _auto_backend("auto")
    chosen = params.get("backend", ea.param_defaults().get("backend"))
    if profile and chosen is not None and not str(chosen).startswith("opencl"):
        typer.echo("note: --profile measures device time on the OpenCL backend only", err=True)
    folder = (
        out
        or Path("reports")
        / f"{ea.__name__}-{meta.symbol}-{meta.timeframe.name}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    )
    _prepare_folder(folder)  # before training: a bad --out must not cost the user a whole run
    result = bt.run(**params)
    env = environment()
    model = getattr(result.ea_instance, "model", None)
    if model is not None and getattr(model, "backend", None) is not None:
        env["nn_backend"] = model.backend.name
    try:
        page = write_report(result, folder, env)
    except KeyboardInterrupt:
        typer.echo("interrupted while writing the report; files already written are complete", err=True)
        raise
    _summary(result, page)
    if not result.complete:
        raise SystemExit(130)  # the report is written; exit as an interrupted command does


def _candles(source, symbol, timeframe, start, end, options, model, m1_csv):
    """The EA's candles and, for ``--model ohlc1m``, the M1 candles its fills are worked through.

    M1 comes from ``--m1-csv`` or from the same source; synthetic bars are then built from the synthetic
    minutes (resampled), so the two agree.
    """
    if model != "ohlc1m":
        if m1_csv is not None:
            raise ValueError("--m1-csv is only used with --model ohlc1m")
        return load_candles(source, symbol, timeframe, start, end, **options), None
    if m1_csv is not None:
        m1 = load_candles("csv", symbol, "M1", start, end, path=str(m1_csv))
    elif source in ("csv", "sample"):
        raise ValueError(f"--model ohlc1m with --source {source} needs the minutes: --m1-csv FILE (M1 bars)")
    else:
        m1 = load_candles(source, symbol, "M1", start, end, **options)
    if source == "synthetic" and m1_csv is None:
        return resample(m1, timeframe or "H1"), m1
    return load_candles(source, symbol, timeframe, start, end, **options), m1


def _prepare_folder(folder: Path) -> None:
    """Create the report folder now, so an unusable ``--out`` fails in one line before any work."""
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--out {folder}: a file of that name exists; give a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(f"--out {folder}: cannot create the report folder ({exc.strerror})") from None


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _summary(result: Result, page: Path) -> None:
    s = result.stats
    if result.training:
        wall = [r["wall_s"] for r in result.training]
        dev = [r["device_s"] for r in result.training if r.get("device_s") is not None]
        device = f", device {sum(dev):.2f} s" if dev else ""
        per_epoch = sum(wall) / len(wall)
        typer.echo(
            f"training: {len(wall)} epochs in {sum(wall):.2f} s ({per_epoch:.3f} s/epoch{device}), "
            f"final loss {result.training[-1]['loss']:.4f}"
            + (f"; {outcome}" if (outcome := training_outcome(result.training)) else "")
        )
    pred = result.predictions
    if pred is not None:
        m, prior, always = (
            pred["model"],
            pred["baselines"]["prior_random"],
            pred["baselines"]["always_undefined"],
        )
        typer.echo(
            f"predictions on {pred['bars']} forward bars: balanced accuracy {_pct(m['balanced_accuracy'])} "
            f"(always-{pred['classes'][0]} {_pct(always['balanced_accuracy'])}, prior-random "
            f"{_pct(prior['balanced_accuracy'])}); hit rate {_pct(m['hit_rate'])} (prior-random "
            f"{_pct(prior['hit_rate'])}); missed {'/'.join(pred['classes'][1:])} (called "
            f"{pred['classes'][0]}) {_pct(m['missed_rate'])}"
        )
    pf = s["profit_factor"]
    typer.echo(
        f"trading: net profit {s['total_net_profit']:.2f} {result.account['currency']}, "
        f"{s['total_trades']} trades, "
        f"profit factor {'n/a' if pf is None else f'{pf:.2f}'}, max equity drawdown "
        f"{s['equity_drawdown_relative_pct']:.2f}%, buy & hold {s['buy_and_hold_return_pct']:.2f}%"
    )
    stopped = int((result.trades["exit_reason"] == "stop out").sum()) if len(result.trades) else 0
    if stopped or result.rejected:
        reasons = sorted({r["reason"] for r in result.rejected})
        typer.echo(
            f"account: {stopped} positions stopped out, {len(result.rejected)} orders rejected"
            + (f" ({'; '.join(reasons)})" if reasons else "")
        )
    if result.data.get("history_quality") is not None:
        quality = result.data["history_quality"]
        typer.echo(f"model: {result.data['model_name']}, history quality {quality:.2f}%")
    t = result.timings
    typer.echo("timings: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in t.items()))
    if not result.complete:
        typer.echo("INCOMPLETE: interrupted; the report covers the bars replayed so far", err=True)
    typer.echo(f"report: {page}")


# -- Typer commands ---------------------------------------------------------------------------------------

_SOURCE = typer.Option("sample", "--source", help="Candle source: sample, csv, synthetic, terminal, ...")
_SYMBOL = typer.Option(None, "--symbol", help="Symbol (default: the source's own).")
_TF = typer.Option(None, "--timeframe", help="Timeframe such as H1 (default: the source's own).")
_CSV = typer.Option(None, "--csv", help="MetaTrader CSV export to read (implies --source csv).")
_FROM = typer.Option(None, "--from", help="First bar time, UTC (YYYY-MM-DD[ HH:MM]).")
_TO = typer.Option(None, "--to", help="End time, UTC, exclusive.")
_FORWARD = typer.Option(
    "1/3", "--forward", help="Forward period: 1/2, 1/3, 1/4, a fraction, a date, or none (trade every bar)."
)
_WF = typer.Option(None, "--walk-forward", help="TRAIN,TEST bars: retrain on the last TRAIN bars every TEST.")
_DEPOSIT = typer.Option(10_000.0, "--deposit", help="Initial deposit (deposit currency).")
_LEVERAGE = typer.Option(100.0, "--leverage", help="Account leverage 1:N.")
_COMMISSION = typer.Option(0.0, "--commission", help="Commission per lot per deal (entry and exit).")
_SWAP_LONG = typer.Option(0.0, "--swap-long", help="Swap of long positions, points per lot per night.")
_SWAP_SHORT = typer.Option(0.0, "--swap-short", help="Swap of short positions, points per lot per night.")
_HEDGING = typer.Option(False, "--hedging", help="Hedging account (default: netting).")
_SEED = typer.Option(0, "--seed", help="Seed of everything random (same seed, same numbers).")
_EPOCHS = typer.Option(
    None,
    "--epochs",
    help="Training epochs (EAs that train); the maximum where the EA stops early "
    "(FractalEA: on the validation loss, unless -p validation=0).",
)
_BATCH = typer.Option(None, "--batch-size", help="Training batch size; 1 = MQL5 online mode.")
_BACKEND = typer.Option(None, "--backend", help="Network backend: auto, numpy, opencl or opencl:<device>.")
_PARAM = typer.Option([], "--param", "-p", help="EA parameter NAME=VALUE (repeatable).")
_OUT = typer.Option(None, "--out", help="Report folder (default: reports/<EA>-<SYMBOL>-<TF>-<time>).")
_PROGRESS = typer.Option(True, "--progress/--no-progress", help="Progress bars for epochs and bars.")
_MODEL = typer.Option(
    "open",
    "--model",
    help="Modelling: open (open prices only) or ohlc1m (1 minute OHLC: pending orders, SL/TP and stop-out "
    "worked through M1 bars in MetaTrader's OHLC order).",
)
_M1_CSV = typer.Option(None, "--m1-csv", help="M1 candles (MetaTrader CSV) for --model ohlc1m.")
_PROFILE = typer.Option(
    False, "--profile", help="Record OpenCL kernel time per epoch (device seconds); costs some host time."
)

_FRACTAL = BUILTIN["fractalea"].param_defaults()


def run(
    epochs: int | None = typer.Option(
        None,
        "--epochs",
        help=f"Maximum training epochs (default: FractalEA's {_FRACTAL['epochs']}): training stops once the "
        f"loss on the newest {_FRACTAL['validation']:.0%} of the study rows (-p validation) has not improved "
        f"for {_FRACTAL['patience']} epochs (-p patience) and keeps the best epoch's weights; with "
        "-p validation=0, exactly this many epochs on every study row.",
    ),
    batch_size: int = typer.Option(32, "--batch-size", help="Training batch size; 1 = MQL5 online mode."),
    backend: str = typer.Option(
        "auto",
        "--backend",
        help="Network backend: auto (OpenCL when a device works), opencl[:<device>], numpy.",
    ),
    spread: int = typer.Option(10, "--spread", help="Fixed spread in points (the sample has none)."),
    commission: float = _COMMISSION,
    start: str | None = _FROM,
    end: str | None = _TO,
    forward: str = _FORWARD,
    seed: int = _SEED,
    param: list[str] = _PARAM,
    out: Path | None = _OUT,
    progress: bool = _PROGRESS,
    profile: bool = _PROFILE,
) -> None:
    """Run the Fractal EA on the embedded EURUSD H1 sample and write a report."""
    from strategies import FractalEA

    params = _params(param, FractalEA, epochs=epochs, batch_size=batch_size, backend=backend)
    _execute(
        FractalEA,
        source="sample",
        symbol=None,
        timeframe=None,
        csv=None,
        start=start,
        end=end,
        forward=forward,
        walk_forward=None,
        account=AccountConfig(spread=spread, commission=commission),
        seed=seed,
        params=params,
        out=out,
        progress=progress and sys.stderr.isatty(),
        profile=profile,
    )


def backtest(
    ea: str = typer.Argument(..., help="FILE.py:ClassName or a built-in: FractalEA, ForecastEA, SmaCrossEA."),
    source: str = _SOURCE,
    symbol: str | None = _SYMBOL,
    timeframe: str | None = _TF,
    csv: Path | None = _CSV,
    start: str | None = _FROM,
    end: str | None = _TO,
    forward: str = _FORWARD,
    walk_forward: str | None = _WF,
    deposit: float = _DEPOSIT,
    leverage: float = _LEVERAGE,
    spread: int | None = typer.Option(None, "--spread", help="Fixed spread in points (default: each bar's)."),
    commission: float = _COMMISSION,
    swap_long: float = _SWAP_LONG,
    swap_short: float = _SWAP_SHORT,
    hedging: bool = _HEDGING,
    seed: int = _SEED,
    epochs: int | None = _EPOCHS,
    batch_size: int | None = _BATCH,
    backend: str | None = _BACKEND,
    param: list[str] = _PARAM,
    out: Path | None = _OUT,
    progress: bool = _PROGRESS,
    profile: bool = _PROFILE,
    model: str = _MODEL,
    m1_csv: Path | None = _M1_CSV,
) -> None:
    """Backtest an expert advisor (built-in or your own class) and write a report."""
    cls = resolve_ea(ea)
    account = AccountConfig(
        deposit=deposit,
        leverage=leverage,
        spread=spread,
        commission=commission,
        swap_long=swap_long,
        swap_short=swap_short,
        hedging=hedging,
    )
    params = _params(param, cls, epochs=epochs, batch_size=batch_size, backend=backend)
    _execute(
        cls,
        source=source,
        symbol=symbol,
        timeframe=timeframe,
        csv=csv,
        start=start,
        end=end,
        forward=forward,
        walk_forward=walk_forward,
        account=account,
        seed=seed,
        params=params,
        out=out,
        progress=progress and sys.stderr.isatty(),
        profile=profile,
        model=model,
        m1_csv=m1_csv,
    )
