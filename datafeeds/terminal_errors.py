"""Errors of the MetaTrader 5 terminal source, each one line that says what to check.

They derive from ``neuronet.errors.NeuronetError`` (a user-fixable error, one line on the command line)
and from the built-in family that fits: ``OSError`` for the terminal, its IPC link and the bridge (with
``ConnectionError``/``TimeoutError``/``PermissionError`` where they fit), ``LookupError`` for a symbol or
a range the terminal does not have.
"""

from __future__ import annotations

from neuronet.errors import NeuronetError

# last_error() codes of the terminal's IPC layer (MetaTrader5.RES_E_INTERNAL_FAIL_*).
IPC_INIT_FAILED = -10003
IPC_NO_CONNECTION = -10004
IPC_TIMEOUT = -10005
AUTH_FAILED = -6
INVALID_PARAMS = -2


class TerminalError(NeuronetError, OSError):
    """The terminal or the way to it failed. ``code`` is ``last_error()``'s code where there is one;
    ``transient`` says whether trying again may help (an IPC timeout, a dropped connection)."""

    def __init__(self, message: str, *, code: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.transient = transient

    def __str__(self) -> str:
        return str(self.args[0])


class TerminalConnectionError(TerminalError, ConnectionError):
    """The bridge could not be reached, or the connection dropped."""


class TerminalTimeoutError(TerminalError, TimeoutError):
    """The terminal (or the bridge) did not answer within the time bound."""


class NotLoggedInError(TerminalError, PermissionError):
    """The terminal runs but no trade account is logged in, or the login was refused."""


class UnknownSymbolError(NeuronetError, LookupError):
    """The terminal has no such symbol."""


class NoBarsError(NeuronetError, LookupError):
    """The terminal has no bars for the request."""


def error_from_last_error(call: str, code: int, message: str) -> TerminalError:
    """Turn ``None`` + ``last_error()`` into the error a user can act on."""
    head = f"MetaTrader 5 {call} failed ({code} {message})"
    if code == IPC_INIT_FAILED:
        return TerminalError(
            f"{head}: the terminal could not be started or attached; check that MetaTrader 5 is installed "
            "(pass path= to terminal64.exe if it is not the default one), that no dialog blocks it, and that "
            "the terminal and Python are both 64-bit and run as the same user",
            code=code,
        )
    if code == IPC_NO_CONNECTION:  # also what every client sees after another one called shutdown()
        return TerminalError(
            f"{head}: no IPC connection to the terminal; start MetaTrader 5, log in, and make sure "
            "initialize() succeeded in this Python process (on Linux: in the bridge's Wine Python)",
            code=code,
            transient=True,
        )
    if code == IPC_TIMEOUT:
        return TerminalTimeoutError(
            f"{head}: the terminal did not answer in time; it may be busy downloading history — "
            "try again, or raise the timeout",
            code=code,
            transient=True,
        )
    if code == AUTH_FAILED:
        return NotLoggedInError(f"{head}: check login, password and server", code=code)
    return TerminalError(head, code=code)
