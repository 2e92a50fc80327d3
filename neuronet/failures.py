"""How the command line words a failure: the user's to fix, the expert advisor's, or neuronet's own bug.

- A ``NeuronetError`` (every package's user-fixable errors derive from it): ``error: <message>``.
- An ``EARuntimeError`` (the EA's own code raised in a hook): ``error: expert advisor failed: <EA>.<hook>
  raised at bar <n> (<time>): <type>: <message>``; ``--debug`` shows the EA's traceback.
- A file-system ``OSError`` (no such file, permission denied, a folder where a file was expected, disk full,
  read-only file system): the user fixes it by changing a path or freeing space, so ``error: <message>``.
- Any other error (a built-in ``ValueError`` from NumPy, pandas or neuronet's own code) is neuronet's bug,
  never silently blamed on the user: ``internal error: ...`` and status 1. Input checks raise their
  package's ``NeuronetError`` subclass (``datafeeds.errors.DataError``, ``neuronet.commands.errors``), so
  no rule here guesses from where a built-in error was raised.

The first three exit with status 2, like a usage error.
"""

from __future__ import annotations

import errno

from neuronet.errors import NeuronetError
from strategies.errors import EARuntimeError

_FILE_SYSTEM = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)
_FILE_SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP})


def user_message(exc: BaseException) -> str | None:
    """The one line to print for a failure the user can act on, or None for an internal error (a message
    that spans lines, e.g. one quoting a library's text, is joined into one)."""
    if isinstance(exc, EARuntimeError):
        return f"error: expert advisor failed: {_one_line(exc)}"
    if isinstance(exc, NeuronetError) or is_file_system_error(exc):
        return f"error: {_one_line(exc)}"
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def is_file_system_error(exc: BaseException) -> bool:
    """An ``OSError`` about a path or the disk (not e.g. a socket or a driver failing)."""
    return isinstance(exc, _FILE_SYSTEM) or (isinstance(exc, OSError) and exc.errno in _FILE_SYSTEM_ERRNOS)
