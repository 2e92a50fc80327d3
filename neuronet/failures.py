"""How the command line words a failure: the user's to fix, the expert advisor's, or neuronet's own bug.

- A ``NeuronetError`` (every package's user-fixable errors derive from it): ``error: <message>``.
- An ``EARuntimeError`` (the EA's own code raised in a hook): ``error: expert advisor failed: <EA>.<hook>
  raised at bar <n> (<time>): <type>: <message>``; ``--debug`` shows the EA's traceback.
- A file-system ``OSError`` (no such file, permission denied, a folder where a file was expected, disk full,
  read-only file system): the user fixes it by changing a path or freeing space, so ``error: <message>``.
- A built-in ``ValueError``/``LookupError``/``OSError`` whose ``raise`` is in the two layers that read the
  user's input, the commands' option checks (``neuronet.commands``) and the data feeds' input checks
  (``datafeeds``): those still use built-in types with messages written for the user, so they count as
  the user's too. Raised anywhere else (nn, opencl, strategies, backtests, NumPy, pandas), a built-in
  error is neuronet's bug, never silently blamed on the user: ``internal error: ...`` and status 1.

The first three exit with status 2, like a usage error.
"""

from __future__ import annotations

import errno

from neuronet.errors import NeuronetError
from strategies.errors import EARuntimeError

_FILE_SYSTEM = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)
_FILE_SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP})
_INPUT_LAYERS = ("neuronet.commands.", "datafeeds.")


def user_message(exc: BaseException) -> str | None:
    """The one line to print for a failure the user can act on, or None for an internal error."""
    if isinstance(exc, EARuntimeError):
        return f"error: expert advisor failed: {exc}"
    if isinstance(exc, NeuronetError) or is_file_system_error(exc):
        return f"error: {exc}"
    if isinstance(exc, ValueError | LookupError | OSError) and _raised_in(exc, _INPUT_LAYERS):
        return f"error: {exc}"
    return None


def is_file_system_error(exc: BaseException) -> bool:
    """An ``OSError`` about a path or the disk (not e.g. a socket or a driver failing)."""
    return isinstance(exc, _FILE_SYSTEM) or (isinstance(exc, OSError) and exc.errno in _FILE_SYSTEM_ERRNOS)


def _raised_in(exc: BaseException, prefixes: tuple[str, ...]) -> bool:
    """Whether the innermost frame of ``exc``'s traceback (its ``raise``) is in one of these modules."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(prefixes)
