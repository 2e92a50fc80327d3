"""The ``neuronet`` command line: one Typer app, one module per command group under ``commands/``.

Errors a user can fix (bad files, bad parameters, no OpenCL device, an unreachable terminal) are printed as
one line and exit with status 2; ``--debug`` (or ``NEURONET_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from neuronet import __version__
from neuronet.commands import backtest, data, deep, devices, forecast
from neuronet.errors import USER_ERRORS

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

_debug = False


def _version(value: bool) -> None:
    if value:
        typer.echo(f"neuronet {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks and debug logging."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    global _debug
    _debug = debug or os.environ.get("NEURONET_DEBUG", "0") not in ("", "0")
    logging.basicConfig(
        level=logging.DEBUG if _debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn user errors into a one-line message."""
    try:
        code = app(args=argv, standalone_mode=False)
        if isinstance(code, int) and code:  # Typer returns (not raises) the exit code of a Ctrl-C
            if code == 130:
                typer.echo("Interrupted.", err=True)
            raise SystemExit(code)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # the one place where any error becomes a message
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # usage errors of the CLI framework
            exc.show()
            raise SystemExit(exc.exit_code) from None
        if _debug:
            raise
        if isinstance(exc, USER_ERRORS):
            typer.echo(f"error: {exc}", err=True)
            raise SystemExit(2) from None
        typer.echo(
            f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", err=True
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main(sys.argv[1:])
