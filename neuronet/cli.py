"""The ``neuronet`` command line: one Typer app, one module per command group under ``commands/``.

Errors a user can fix (bad files, bad parameters, no OpenCL device, an unreachable terminal) and an expert
advisor's own failures are printed as one line and exit with status 2 (``neuronet.failures`` decides);
``--debug`` (or ``NEURONET_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import functools
import os
import sys

import typer

from neuronet import __version__, logfilter
from neuronet.commands import (
    backtest,
    compare,
    data,
    deep,
    devices,
    export,
    forecast,
    live,
    optimize,
    robustness,
)
from neuronet.failures import user_message

app = typer.Typer(
    name="neuronet",
    help="Neural networks on OpenCL for MetaTrader-style trading research.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(data.app, name="data")
app.add_typer(deep.app, name="deep")
app.command("devices")(devices.devices)
app.command("run")(backtest.run)
app.command("backtest")(backtest.backtest)
app.command("forecast")(forecast.forecast)
app.command("optimize")(optimize.optimize_command)
app.command("live")(live.live)
app.command("export")(export.export_command)
app.command("robustness")(robustness.robustness_command)
app.command("compare")(compare.compare_command)


def _debug_wanted(debug: bool = False) -> bool:
    """``--debug`` or ``NEURONET_DEBUG=1`` (the environment read here only)."""
    return debug or os.environ.get("NEURONET_DEBUG", "0") not in ("", "0")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"neuronet {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks and debug logging.", metavar=""),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit.", metavar=""
    ),
) -> None:
    logfilter.install(_debug_wanted(debug))


def _quiet_help_flags(command: typer.core.TyperCommand | typer.core.TyperGroup) -> None:
    """``--help`` takes no value: show it without the ``<bool>`` type Typer gives every flag by default."""
    option = command.get_help_option(typer.Context(command))
    if option is not None:
        option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _quiet_help_flags(sub)


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The app's command tree, built once per process (building it costs tens of milliseconds)."""
    command = typer.main.get_command(app)
    _quiet_help_flags(command)
    return command


def usage_line(exc: typer.BadParameter) -> str:
    """A usage error of the CLI framework (an unknown option, a value of the wrong type or out of its
    range) as the one line every user error is: ``error: <what, naming the option> (neuronet CMD --help)``.
    """
    text = " ".join(exc.format_message().split()).replace(": Value error, ", ": ")  # pydantic's prefix
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        text += f" ({ctx.command_path} {ctx.help_option_names[0]})"
    return f"error: {text}"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn user errors into a one-line message."""
    argv = sys.argv[1:] if argv is None else argv
    debug = _debug_wanted("--debug" in argv)  # a root option: it precedes the command
    try:
        code = _command()(args=argv, prog_name="neuronet", standalone_mode=False)
        if isinstance(code, int) and code:  # Typer returns (not raises) the exit code of a Ctrl-C
            if code == 130:
                typer.echo("Interrupted.", err=True)
            raise SystemExit(code)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except (BrokenPipeError, SystemExit) as exc:  # `neuronet data show | head`: the reader has all it wants
        # (Click turns EPIPE into exit 1 after wrapping stdout in its PacifyFlushWrapper.)
        pacified = type(sys.stdout).__name__ == "PacifyFlushWrapper"
        if isinstance(exc, SystemExit) and not (exc.code == 1 and pacified):
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())  # no error at the final flush
        raise SystemExit(0) from None
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # the one place where any error becomes a message
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # the CLI framework's usage errors
            typer.echo(usage_line(exc), err=True)
            raise SystemExit(exc.exit_code) from None
        if debug:
            raise
        message = user_message(exc)  # a user's error or an EA's failure, in one line (neuronet.failures)
        if message is not None:
            typer.echo(message, err=True)
            raise SystemExit(2) from None
        typer.echo(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", err=True
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main(sys.argv[1:])
