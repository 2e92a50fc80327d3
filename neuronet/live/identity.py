"""Who a live run trades as: the EA's own magic number on the terminal's trading account.

MetaTrader gives every trade placed by hand magic number 0, so an EA trading with magic 0 on a live account
would take the user's manual positions for its own (count them against its limits, close them on a
reversal or at the stop, book them in its report): refused before anything is written. And a live journal
belongs to the account it was written on (its ``account`` record holds the login and server): another
account's positions, halt, unresolved requests and deals are not the run's, so resuming or reporting it
there is refused.
"""

from __future__ import annotations

from typing import Any

from datafeeds.terminal_errors import error_from_last_error
from neuronet.live.errors import JournalError, LiveError

MANUAL_MAGIC = (
    "--live: the EA's magic number 0 is the one trades placed by hand carry; the run would take them for "
    "its own (count them, close them, report them): give the EA its own number, -p magic=N (N >= 1)"
)


def check_magic(ea_class: Any, params: dict) -> None:
    """A ``LiveError`` when the EA would trade a live account with magic number 0."""
    if int(ea_class.resolve_params(params).get("magic", 0)) == 0:
        raise LiveError(MANUAL_MAGIC)


def terminal_account(source: Any) -> Any:
    """The terminal's ``account_info()`` through ``source`` (anything with ``TerminalSource.call``)."""
    answer, error = source.call("account_info")
    if answer is None:
        raise error_from_last_error("account_info()", *(error or (0, "no answer")))
    return answer


def check_same_account(path: Any, journaled: dict | None, now: Any, fix: str) -> None:
    """A ``JournalError`` (ending with ``fix``) when the terminal's ``account_info()`` (``now``) is not the
    account of the journal's ``account`` record; a record without the login (an older neuronet's) passes."""
    if not journaled or journaled.get("login") is None:
        return
    if (int(now.login), str(now.server)) != (int(journaled["login"]), str(journaled["server"])):
        raise JournalError(
            f"journal {path} was written on account {journaled['login']} ({journaled['server']}); the "
            f"terminal is logged in to {now.login} ({now.server}): {fix}"
        )
