"""Files on disk: the one atomic writer, temporary files left by killed writers, and paths kept inside
their folder.

Atomic write: the bytes go to a temporary file in the target's folder (``.<name>.<random>.tmp``), are
flushed and fsync'ed, then renamed over the target (``os.replace`` is atomic on POSIX and Windows) and the
folder is fsync'ed, so a writer killed at any moment leaves the old file or the new one, never a torn one.
The temporary file is created with mode 0666 minus the umask, like any file a program writes (0644 under
the usual umask), so outputs can be shared; ``mkstemp``'s 0600 would make every report private.

Temporary files of a writer that was killed stay behind. They never look like data: their names start with
a dot and end in ``.tmp``, so no reader's pattern (``*.npz``, ``*.bi5``, ``*.csv``) matches them.
``temp_files`` finds them and ``remove_stale`` deletes those older than ``STALE_AFTER_S`` (a live writer's
file is younger than that).

Paths from user input: ``inside(root, *parts)`` joins names a user typed (a symbol, a source, a feed)
below ``root`` and refuses anything that would leave it (``..``, absolute paths, NUL bytes, a symlink
pointing outside) before the path is read, written or deleted.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from datafeeds.errors import CandleDataError

TMP_SUFFIX = ".tmp"
STALE_AFTER_S = 600


class UnsafePathError(CandleDataError):
    """A path built from user input would leave its folder (or cannot name a file at all)."""

    def __init__(self, given: str, problem: str) -> None:
        super().__init__(given, problem)


def inside(root: str | os.PathLike, *parts: str) -> Path:
    """``root / parts...``, refused with ``UnsafePathError`` unless it stays below ``root``.

    Each part must be a relative name without NUL bytes; the joined path, with symlinks resolved, must lie
    in the resolved ``root`` (a link inside the folder that points elsewhere is refused too).
    """
    root = Path(root)
    for part in parts:
        text = str(part)
        if "\0" in text:
            raise UnsafePathError(repr(text), "a name must not contain NUL bytes")
        if not text.strip() or Path(text).is_absolute() or Path(text).drive or ".." in Path(text).parts:
            raise UnsafePathError(repr(text), f"must be a plain name inside {root}, not a path out of it")
    path = root.joinpath(*parts)
    check_inside(root, path, given=os.sep.join(parts))
    return path


def check_inside(root: str | os.PathLike, path: str | os.PathLike, *, given: str | None = None) -> None:
    """Refuse ``path`` unless, symlinks resolved, it lies in (or is) the resolved ``root``."""
    real_root = Path(root).resolve()
    real = Path(path).resolve()
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(
            given or str(path), f"leads to {real}, outside the folder {real_root}; refused"
        )


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` (symlinks resolved) lies in ``root``; for walks that skip what points outside."""
    try:
        check_inside(root, path)
    except (UnsafePathError, OSError, RuntimeError):
        return False
    return True


def output_path(path: str | os.PathLike) -> Path:
    """A file name a user gave for writing: refused when it holds NUL bytes or names a folder."""
    text = os.fspath(path)
    if "\0" in text:
        raise UnsafePathError(repr(text), "a file name must not contain NUL bytes")
    out = Path(text)
    if out.is_dir() or not out.name:
        raise UnsafePathError(text, "is a folder; give a file name to write")
    return out


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Write a file atomically: ``write(f)`` fills a temporary file that then replaces ``path``.

    If ``write`` raises, the temporary file is removed and ``path`` is untouched. The file gets the usual
    permissions (0666 minus the umask); see the module docstring.
    """
    path = output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
    remove_stale(path.parent, name=path.name)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``atomic_write`` of UTF-8 text."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data))


def strict_json(value: object) -> object:
    """``value`` with NumPy scalars and arrays as plain numbers and lists, and NaN/inf as ``null``: what
    ``json`` writes then is valid JSON (Python's default writes a bare ``NaN`` no other reader accepts)."""
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy arrays and scalars
        return strict_json(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write_json(path: str | os.PathLike, doc: object, *, indent: int | None = 1) -> Path:
    """``atomic_write`` of ``doc`` as strict JSON (see ``strict_json``)."""
    return atomic_write_text(path, json.dumps(strict_json(doc), indent=indent, allow_nan=False) + "\n")


def temp_files(folder: str | os.PathLike, *, name: str = "*", recursive: bool = False) -> Iterator[Path]:
    """Temporary files of ``atomic_write`` (of target ``name``) in ``folder`` (and below it)."""
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
