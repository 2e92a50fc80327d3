"""The one way a file the user names is opened for reading: only a regular file, never blocking.

A path given as a model or data file may name anything: a folder, ``/dev/zero`` (an endless read that
fills the memory), a FIFO (``open`` blocks until a writer comes, for ever), a socket. ``open_regular``
opens without blocking (``O_NONBLOCK`` where the system has it, which a pipe honours at ``open``), then
asks the opened file itself what it is (``fstat``: no window between the check and the read) and refuses
all but a regular file with one line that names it.

Why it lives here: ``datafeeds`` (CSV and tick files) and ``nn`` (model files) both read user files and
neither may import the other, so, like ``neuronet.errors`` and ``neuronet.atomic``, this module imports
nothing of ours but the error base (the layering test checks it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from neuronet.errors import NeuronetError

_KINDS = (
    (stat.S_ISFIFO, "a pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotAFileError(NeuronetError, OSError):
    """A path given as a file to read names a folder, a device, a pipe or a socket."""


def open_regular(path: str | os.PathLike, what: str = "file") -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file; otherwise one line naming it and what
    it is (``what`` says what was expected: ``"model file"``, ``"CSV file"``): ``NotAFileError`` for a
    device, a pipe or a socket, and the built-in ``IsADirectoryError``, ``FileNotFoundError`` or
    ``PermissionError`` for a folder, a missing file or an unreadable one."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError):
        if Path(path).is_dir():  # Windows refuses to open a folder at all
            raise IsADirectoryError(f"{path}: is a folder, not a {what}") from None
        raise PermissionError(f"{path}: not readable (permission denied)") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{path}: is a folder, not a {what}")
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise NotAFileError(f"{path}: is {kind}, not a {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file ignores the flag; reads stay ordinary
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
