"""Options shared by the commands: candle data (``data show``, ``run``, ``backtest`` take the same ones),
the modelling mode and its finer data (``backtest``, ``run`` and ``optimize``), boolean flags, and the
``--out`` folder check.

One declaration per option, so every help text lists the same sources (from the ``datafeeds`` registry)
and the rule "``--csv``/``--path`` means the csv source" lives in ``data_request`` alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from backtests.paths import MODELS
from datafeeds import SOURCES, BrokerClock, bars_from_ticks, load_candles, load_ticks, meta_of, resample
from datafeeds.clock import utc_bound
from neuronet.commands import values
from neuronet.commands.errors import CommandError, CommandOSError

SOURCE_HELP = f"Candle source: {', '.join(SOURCES)}."
CLOCK_HELP = (
    "Broker clock, e.g. UTC, UTC+2, +2/us (UTC+2 with US daylight saving): the clock a CSV file or terminal "
    "stamps bars in; for the sample and synthetic data, the clock to present them in (where D1 bars start)."
)


def flag(*names: str, help: str) -> Any:
    """A boolean option (for ``Annotated[bool, flag(...)]``) shown without a ``<bool>`` value in the help:
    it takes none."""
    return typer.Option(*names, help=help, metavar="")


Source = Annotated[str, typer.Option("--source", "-s", help=SOURCE_HELP, parser=values.source)]
CsvPath = Annotated[
    Path | None,
    typer.Option(
        "--path", "--csv", help="MetaTrader CSV file to read (implies --source csv).", parser=values.path
    ),
]
Start = Annotated[
    str | None,
    typer.Option("--from", help="First bar time, inclusive (UTC), e.g. 2017-06-01.", parser=values.start),
]
End = Annotated[str | None, typer.Option("--to", help="End time, exclusive (UTC).", parser=values.end)]
BrokerTz = Annotated[str | None, typer.Option("--broker-tz", help=CLOCK_HELP, parser=values.clock)]
Opts = Annotated[
    list[str] | None,
    typer.Option("--opt", "-o", help="Source option KEY=VALUE (repeatable).", parser=values.text),
]
Force = Annotated[bool, flag("--force", help="Write into a non-empty --out folder (its files are replaced).")]
Model = Annotated[
    str,
    typer.Option(
        "--model",
        help="Modelling: open (MetaTrader's 'Open prices only'), ohlc1m ('1 minute OHLC': pending orders, "
        "SL/TP and stop-out worked through M1 bars in MetaTrader's OHLC order) or ticks ('Every tick based "
        "on real ticks': fills at each tick's bid/ask, the EA's on_tick on every tick).",
        parser=values.text,
    ),
]
TicksCsv = Annotated[
    list[Path] | None,
    typer.Option(
        "--ticks-csv",
        help="Ticks (MetaTrader 5 'Export ticks' file, in the --broker-tz clock) for --model ticks; with "
        "several symbols SYMBOL=FILE, once per symbol.",
        parser=values.path,
    ),
]
M1Csv = Annotated[
    list[Path] | None,
    typer.Option(
        "--m1-csv",
        help="M1 candles (MetaTrader CSV, in the --broker-tz clock) for --model ohlc1m; with several "
        "symbols SYMBOL=FILE, once per symbol.",
        parser=values.path,
    ),
]

# What the commands themselves set on a load (``datafeeds.load_candles``'s own parameters): ``-o`` may not.
_LOAD_OPTIONS = {
    "source": "--source",
    "symbol": "the SYMBOL argument",
    "timeframe": "the TIMEFRAME argument",
    "start": "--from",
    "end": "--to",
    "repair": "--repair",
    "cache": "--no-cache/--refresh",
}
# Options whose values are text even when they look like numbers (a clock "+2", a digits-only password).
_TEXT_OPTIONS = frozenset({"base_url", "cache_dir", "clock", "host", "password", "path", "server"})


def parse_opt(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``--opt`` -> the source keyword and its value (int, float, bool or text)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise CommandError(f"--opt takes KEY=VALUE, not {text!r}")
    key = key.strip().replace("-", "_")
    if key in _TEXT_OPTIONS:
        return key, raw
    value: object = raw
    for convert in (int, float):
        try:
            value = convert(raw)
            break
        except ValueError:
            continue
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    return key, value


def data_request(
    source: str,
    path: Path | None,
    opts: list[str] | None,
    broker_tz: str | None,
    seed: int | None = None,
    *,
    seed_is_data: bool = True,
    start: str | None = None,
    end: str | None = None,
) -> tuple[str, dict[str, object]]:
    """The source name and its keyword options from the data options of any command.

    ``--path``/``--csv`` implies the csv source; ``seed`` seeds the synthetic source (with
    ``seed_is_data=False`` a command's general ``--seed`` reaches the data only where the source is
    synthetic and ``-o seed=`` was not given). ``start``/``end`` (``--from``/``--to``) must be in order.
    """
    if start is not None and end is not None and utc_bound(start) >= utc_bound(end):
        raise CommandError(f"--from {start} must come before --to {end}")
    source = source.strip().lower()
    if path is not None and source == "sample":
        source = "csv"
    options: dict[str, object] = dict(parse_opt(o) for o in opts or [])
    clash = sorted(options.keys() & _LOAD_OPTIONS.keys())
    if clash:
        key = clash[0]
        raise CommandError(f"--opt {key}=...: not an option of the {source} source; use {_LOAD_OPTIONS[key]}")
    if source == "csv":
        if path is None and "path" not in options:
            raise CommandError("--source csv needs --path FILE (or --csv FILE)")
        if path is not None:
            options["path"] = str(path)
    elif path is not None:
        raise CommandError(f"--path/--csv is for --source csv, not --source {source}")
    if broker_tz is not None:
        options["clock"] = BrokerClock.parse(broker_tz)
    if seed is not None:
        if source == "synthetic":
            options.setdefault("seed", seed)
        elif seed_is_data:
            raise CommandError("--seed is for --source synthetic")
    return source, options


def default_out(*parts: object) -> Path:
    """The default report folder ``reports/PART-PART-...``: a name taken from the data (a CSV file's
    ``--symbol``, an EA's class name) keeps letters, digits and ``.#+_-`` only, so ``../`` or a slash in it
    can never put the folder anywhere but directly inside ``reports``."""
    name = "-".join(re.sub(r"[^\w.#+-]", "_", str(part)) for part in parts)
    return Path("reports") / name


def prepare_out(folder: Path, force: bool, resumable: frozenset[str] = frozenset()) -> None:
    """Create the output folder now, so an unusable or occupied ``--out`` fails in one line before any work.

    A folder that already holds files is refused unless ``force``: an interrupted run must never replace a
    finished report without being asked to. Files named in ``resumable`` (the study store an interrupted
    optimisation leaves, which the same command resumes) do not count.
    """
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--out {folder}: a file of that name exists; give a folder path")
    if folder.is_dir() and not force and any(p.name not in resumable for p in folder.iterdir()):
        raise FileExistsError(
            f"--out {folder}: the folder is not empty; choose a new folder, or pass --force to replace "
            "its files"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandOSError(f"--out {folder}: cannot create the folder ({exc.strerror})") from None


def check_out(folder: Path) -> Path:
    """An ``--out`` folder a command makes only once its work is done, checked now without making it: a
    folder, or one that can be made in the nearest existing folder above it."""
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--out {folder}: a file of that name exists; give a folder path")
    above = folder
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise CommandOSError(f"--out {folder}: cannot create the folder ({above} is a file)")
    if not os.access(above, os.W_OK | os.X_OK):
        raise CommandOSError(f"--out {folder}: cannot write there ({above}: permission denied)")
    return folder


@contextmanager
def out_folder(folder: Path, force: bool, resumable: frozenset[str] = frozenset()) -> Iterator[Path]:
    """``prepare_out``, undone if the command fails before it writes there: the folders created for it
    are removed again while they are still empty, so a refused or failed command leaves nothing behind
    (a folder with a report in it, e.g. after Ctrl-C, stays)."""
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # the deepest first
    prepare_out(folder, force, resumable)
    try:
        yield folder
    except BaseException:
        for made in created:
            try:
                made.rmdir()  # only an empty folder goes
            except OSError:
                break
        raise


Market = tuple[pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]


def market_data(
    source: str,
    symbol: str | None,
    timeframe: str | None,
    start: str | None,
    end: str | None,
    options: dict[str, object],
    model: str,
    m1_csv: Path | list[Path] | None,
    ticks_csv: Path | list[Path] | None,
) -> Market:
    """``(candles, m1, ticks)`` for a modelling mode: the EA's candles and the finer data its fills are
    worked through (None where the mode takes none), from ``--m1-csv``/``--ticks-csv`` or from the candle
    source itself (mt5, dukascopy, synthetic). ``--broker-tz`` (``options["clock"]``) reads the files too."""
    model = model.strip().lower()
    if model not in MODELS:
        names = "; ".join(f"{k}: {v}" for k, v in MODELS.items())
        raise CommandError(f"--model {model!r}: choose one of MetaTrader's modelling modes ({names})")
    if isinstance(m1_csv, list):
        if len(m1_csv) > 1:
            raise CommandError(
                f"--m1-csv given {len(m1_csv)} times: one symbol takes one file (several symbols: --symbols "
                "and --m1-csv SYMBOL=FILE for each)"
            )
        m1_csv = m1_csv[0] if m1_csv else None
    if isinstance(ticks_csv, list):
        if len(ticks_csv) > 1:
            raise CommandError(
                f"--ticks-csv given {len(ticks_csv)} times: one symbol takes one file (several symbols: "
                "--symbols and --ticks-csv SYMBOL=FILE for each)"
            )
        ticks_csv = ticks_csv[0] if ticks_csv else None
    if ticks_csv is not None and model != "ticks":
        raise CommandError("--ticks-csv is only used with --model ticks")
    if m1_csv is not None and model != "ohlc1m":
        raise CommandError("--m1-csv is only used with --model ohlc1m")
    if model == "ticks":
        return _with_ticks(source, symbol, timeframe, start, end, options, ticks_csv)
    if model == "open":
        return load_candles(source, symbol, timeframe, start, end, **options), None, None
    return _with_minutes(source, symbol, timeframe, start, end, options, m1_csv)


def _file_clock(options: dict[str, object]) -> dict[str, object]:
    """The clock a --m1-csv or --ticks-csv file is read in: the one --broker-tz gave the candles."""
    return {"clock": options["clock"]} if "clock" in options else {}


def _with_ticks(source, symbol, timeframe, start, end, options, ticks_csv) -> Market:
    """Ticks over the candles' span. Synthetic candles are built from the synthetic ticks, so they agree."""
    if ticks_csv is None and source in ("csv", "sample"):
        raise CommandError(
            f"--model ticks with --source {source} needs ticks: --ticks-csv FILE (tick export)"
        )
    if source == "synthetic" and ticks_csv is None:
        span = _synthetic_span(symbol, timeframe, start, end, options)
        ticks = load_ticks(source, symbol, *span, **options)
        return resample(bars_from_ticks(ticks, "M1"), timeframe or "H1"), None, ticks
    df = load_candles(source, symbol, timeframe, start, end, **options)
    meta = meta_of(df)
    span = (df.index[0], df.index[-1] + pd.Timedelta(seconds=meta.timeframe.seconds))
    if ticks_csv is not None:
        ticks = load_ticks("csv", meta.symbol, *span, path=str(ticks_csv), **_file_clock(options))
    else:
        ticks = load_ticks(source, meta.symbol, *span, **options)
    if not len(ticks):
        where = ticks_csv or f"--source {source}"
        raise CommandError(f"{where}: no ticks between {span[0]} and {span[1]} (UTC), the candles' span")
    return df, None, ticks


def _synthetic_span(symbol, timeframe, start, end, options) -> tuple:
    """``(start, end)`` of the synthetic bars the EA gets, so that ``-o bars=N`` counts the EA's bars (H1 by
    default) in every modelling mode, not the minutes they are built from: the span of N bars of the
    timeframe, whose minutes (or ticks) are then generated. A given ``--to`` is the span's end as it is."""
    if end is not None or "bars" not in options:
        return start, end
    frame = load_candles("synthetic", symbol, timeframe, start, None, **options)
    if not len(frame):
        return start, end
    return frame.index[0], frame.index[-1] + pd.Timedelta(seconds=meta_of(frame).timeframe.seconds)


def _with_minutes(source, symbol, timeframe, start, end, options, m1_csv) -> Market:
    """M1 candles of the same symbol; synthetic bars are built from the synthetic minutes, so they agree."""
    if m1_csv is not None:
        m1 = load_candles("csv", symbol, "M1", start, end, path=str(m1_csv), **_file_clock(options))
    elif source in ("csv", "sample"):
        raise CommandError(
            f"--model ohlc1m with --source {source} needs the minutes: --m1-csv FILE (M1 bars)"
        )
    elif source == "synthetic":
        span = _synthetic_span(symbol, timeframe, start, end, options)
        m1 = load_candles(source, symbol, "M1", *span, **options)
    else:
        m1 = load_candles(source, symbol, "M1", start, end, **options)
    if source == "synthetic" and m1_csv is None:
        return resample(m1, timeframe or "H1"), m1, None
    return load_candles(source, symbol, timeframe, start, end, **options), m1, None
