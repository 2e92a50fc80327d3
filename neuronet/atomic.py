"""The one atomic file writer, shared by every layer (candle store, reports, model files).

The bytes go to a temporary file in the target's folder (``.<name>.<random>.tmp``), are flushed and
fsync'ed, then renamed over the target (``os.replace`` is atomic on POSIX and Windows) and the folder is
fsync'ed, so a writer killed at any moment leaves the old file or the new one, never a torn one. The
temporary file is created with mode 0666 minus the umask, like any file a program writes (0644 under the
usual umask), so outputs can be shared; ``mkstemp``'s 0600 would make every report private.

Temporary files of a writer that was killed stay behind. They never look like data: their names start with
a dot and end in ``.tmp``, so no reader's pattern (``*.npz``, ``*.bi5``, ``*.csv``) matches them.
``temp_files`` finds them and ``remove_stale`` deletes those older than ``STALE_AFTER_S`` (a live writer's
file is younger than that).

Why it lives here: ``datafeeds`` and ``nn`` both write files and neither may import the other, so, like
``neuronet.errors``, this module imports nothing of ours (the layering test checks it). Checking the path a
user gave is the caller's job (``datafeeds.files.atomic_write``, ``nn.save``): each names its own errors.
"""

from __future__ import annotations

import glob
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"
STALE_AFTER_S = 600


def replace_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write(f)`` fills a temporary file next to ``path`` that then replaces it (its folder must exist).

    If ``write`` raises, the temporary file is removed and ``path`` is untouched; temporary files that
    killed writers of ``path`` left behind are removed once stale.
    """
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    remove_stale(path.parent, name=glob.escape(path.name))


def temp_files(folder: str | os.PathLike, *, name: str = "*", recursive: bool = False) -> Iterator[Path]:
    """Temporary files of the atomic writer (of target ``name``, a glob pattern) in ``folder`` (and below)."""
    folder = Path(folder)
    if not folder.is_dir():
        return iter(())
    pattern = f".{name}.*{TMP_SUFFIX}"
    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    return (p for p in found if p.is_file() and not p.is_symlink())


def is_stale(path: Path, older_than: float = STALE_AFTER_S) -> bool:
    """Whether a temporary file was last written more than ``older_than`` seconds ago."""
    try:
        return path.stat().st_mtime < time.time() - older_than
    except OSError:
        return False


def remove_stale(
    folder: str | os.PathLike, *, name: str = "*", recursive: bool = False, older_than: float = STALE_AFTER_S
) -> list[Path]:
    """Delete the temporary files of writers that died; a live writer's fresh file is left alone."""
    gone = []
    for stale in list(temp_files(folder, name=name, recursive=recursive)):
        if is_stale(stale, older_than):
            try:
                stale.unlink()
                gone.append(stale)
            except OSError:
                pass
    return gone


def _fsync_dir(folder: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
