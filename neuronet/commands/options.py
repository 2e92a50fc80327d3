"""Options shared by the commands: candle data (``data show``, ``run``, ``backtest`` take the same ones),
boolean flags, and the ``--out`` folder check.

One declaration per option, so every help text lists the same sources (from the ``datafeeds`` registry)
and the rule "``--csv``/``--path`` means the csv source" lives in ``data_request`` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from datafeeds import SOURCES, BrokerClock
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


Source = Annotated[str, typer.Option("--source", "-s", help=SOURCE_HELP)]
CsvPath = Annotated[
    Path | None,
    typer.Option("--path", "--csv", help="MetaTrader CSV file to read (implies --source csv)."),
]
Start = Annotated[
    str | None, typer.Option("--from", help="First bar time, inclusive (UTC), e.g. 2017-06-01.")
]
End = Annotated[str | None, typer.Option("--to", help="End time, exclusive (UTC).")]
BrokerTz = Annotated[str | None, typer.Option("--broker-tz", help=CLOCK_HELP)]
Opts = Annotated[list[str] | None, typer.Option("--opt", "-o", help="Source option KEY=VALUE (repeatable).")]
Force = Annotated[bool, flag("--force", help="Write into a non-empty --out folder (its files are replaced).")]

# What the commands themselves set on a load (``datafeeds.load_candles``'s own parameters): ``-o`` may not.
_LOAD_OPTIONS = {"source": "--source", "symbol": "the SYMBOL argument", "timeframe": "the TIMEFRAME argument",
                 "start": "--from", "end": "--to", "repair": "--repair", "cache": "--no-cache/--refresh"}
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
) -> tuple[str, dict[str, object]]:
    """The source name and its keyword options from the data options of any command.

    ``--path``/``--csv`` implies the csv source; ``seed`` seeds the synthetic source (with
    ``seed_is_data=False`` a command's general ``--seed`` reaches the data only where the source is
    synthetic and ``-o seed=`` was not given).
    """
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


def prepare_out(folder: Path, force: bool) -> None:
    """Create the output folder now, so an unusable or occupied ``--out`` fails in one line before any work.

    A folder that already holds files is refused unless ``force``: an interrupted run must never replace a
    finished report without being asked to.
    """
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--out {folder}: a file of that name exists; give a folder path")
    if folder.is_dir() and not force and any(folder.iterdir()):
        raise FileExistsError(
            f"--out {folder}: the folder is not empty; choose a new folder, or pass --force to replace "
            "its files"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandOSError(f"--out {folder}: cannot create the folder ({exc.strerror})") from None
