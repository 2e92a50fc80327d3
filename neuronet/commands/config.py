"""``--config run.toml``: a command's options kept in a TOML file, the command line overriding them.

A researcher re-runs the same backtest or optimisation with one option changed; a run file keeps the rest.
Its keys are the command's option names (``forward = "1/3"``, ``walk-forward = "2000,500"``, ``spread = 12``,
``progress = false``; a repeatable option takes a list: ``param = ["fast=5", "@inputs.set"]``) and its
arguments' (``ea = "SmaCrossEA"``). A table named after the command (``[backtest]``, ``[optimize]``) holds
the keys of that command only, so one file can serve several; top-level keys apply to whichever command
reads the file.

The file becomes the command's defaults (Click's ``default_map``), read by an eager option before any
other: every value then goes through the same checks as on the command line, and an option given there
wins. A key the command does not have is refused with a "did you mean", naming the file.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from neuronet.commands.errors import CommandError
from neuronet.userfiles import open_regular

MAX_BYTES = 1 << 20  # a run file is a few hundred bytes


def _names(command: click.Command) -> dict[str, click.Parameter]:
    """The keys a run file may use for ``command``: each option's long name without dashes (and with
    underscores), each argument's name."""
    out: dict[str, click.Parameter] = {}
    for p in command.params:
        if p.name in (None, "config", "help"):
            continue
        out[p.name] = p
        for opt in getattr(p, "opts", []):
            if opt.startswith("--"):
                out[opt[2:]] = p
    return out


def _scalar(where: str, value: Any) -> Any:
    """A TOML value as the command line would give it: numbers as their text (the options' own readers
    check them), booleans kept for flags; a table, a list or a date no option takes."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float, str)):
        return str(value)
    raise CommandError(f"{where}: a {type(value).__name__} is not a value this option takes")


def read_config(path: Path, command: click.Command, commands: set[str]) -> dict[str, Any]:
    """The defaults a run file gives ``command`` (``commands``: the names its tables may take):
    ``{parameter name: value}``; every problem one line naming the file and the key."""
    with open_regular(path, "TOML run file") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise CommandError(f"{path}: larger than {MAX_BYTES >> 10} KiB; not a run file")
    try:
        doc = tomllib.loads(raw.decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not a TOML file ({exc})") from None
    names = _names(command)
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            if key not in commands:
                raise CommandError(f"{path}: [{key}] is no command; tables are named after one ([backtest])")
            if key == command.name:
                out.update(_section(path, f"[{key}] ", value, names))
            continue
        out.update(_section(path, "", {key: value}, names))
    return out


def _section(path: Path, where: str, table: dict, names: dict[str, click.Parameter]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        param = names.get(key) or names.get(key.replace("_", "-"))
        if param is None:
            close = difflib.get_close_matches(key, list(names), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CommandError(f"{path}: {where}{key}: this command has no such option{hint}")
        at = f"{path}: {where}{key}"
        if getattr(param, "multiple", False) or param.nargs == -1:
            items = value if isinstance(value, list) else [value]
            out[param.name] = [_scalar(at, v) for v in items]
        else:
            out[param.name] = _scalar(at, value)
    return out


def load(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """The eager option's callback: the run file's values become the command's defaults."""
    if value is None or ctx.resilient_parsing:
        return value
    try:
        root = ctx.find_root().command
        commands = set(getattr(root, "commands", {})) or {ctx.command.name}
        found = read_config(Path(value), ctx.command, commands)
    except (ValueError, OSError) as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="'--config'") from None
    ctx.default_map = {**(ctx.default_map or {}), **found}
    return value


Config = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML run file of this command's options (option names as keys; [COMMAND] tables allowed); "
        "options given on the command line override it.",
        callback=load,
        is_eager=True,
        show_default=False,
    ),
]
