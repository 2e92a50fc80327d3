"""Files on disk: atomic writes to the paths users give, tables users name, and paths kept inside their
folder.

Atomic write: ``atomic_write`` checks the file name a user gave, then writes through
``neuronet.atomic`` (temporary file, fsync, rename; its temporary files and their cleanup are re-exported
here: ``temp_files``, ``is_stale``, ``remove_stale``).

Tables a user names: ``read_csv_file`` reads one with pandas and words every way it can fail (missing, a
folder, not readable, not a table) as one line naming the file.

Paths from user input: ``inside(root, *parts)`` joins names a user typed (a symbol, a source, a feed)
below ``root`` and refuses anything that would leave it (``..``, absolute paths, NUL bytes, a symlink
pointing outside) before the path is read, written or deleted.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from datafeeds.errors import CandleDataError, DataError
from neuronet.atomic import STALE_AFTER_S as STALE_AFTER_S
from neuronet.atomic import TMP_SUFFIX as TMP_SUFFIX
from neuronet.atomic import is_stale as is_stale
from neuronet.atomic import remove_stale as remove_stale
from neuronet.atomic import replace_atomically
from neuronet.atomic import temp_files as temp_files
from neuronet.userfiles import open_regular


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
        raise UnsafePathError(given or str(path), f"leads to {real}, outside the folder {real_root}; refused")


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` (symlinks resolved) lies in ``root``; for walks that skip what points outside."""
    try:
        check_inside(root, path)
    except (UnsafePathError, OSError, RuntimeError):
        return False
    return True


def output_path(path: str | os.PathLike) -> Path:
    """A file name a user gave for writing: refused when it holds NUL bytes, names a folder, a device or a
    pipe (an atomic write renames over its target: ``--out /dev/null`` would replace the device), or lies
    under a file (where its folder can never be made)."""
    text = os.fspath(path)
    if "\0" in text:
        raise UnsafePathError(repr(text), "a file name must not contain NUL bytes")
    out = Path(text)
    if out.is_dir() or not out.name:
        raise UnsafePathError(text, "is a folder; give a file name to write")
    if out.exists() and not out.is_file():  # the rename would replace a device node or a pipe
        raise UnsafePathError(text, "is not a regular file (a device or a pipe); give a file name to write")
    blocked = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise UnsafePathError(text, f"{blocked} is a file, so no folder can hold this one")
    return out


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Write a file atomically: ``write(f)`` fills a temporary file that then replaces ``path``.

    If ``write`` raises, the temporary file is removed and ``path`` is untouched. The file gets the usual
    permissions (0666 minus the umask); see the module docstring.
    """
    path = output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, write)
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


def read_csv_file(path: str | os.PathLike, what: str = "CSV file", **options: Any) -> pd.DataFrame:
    """``pandas.read_csv(path, **options)`` with one-line errors that name the file: no such file, not a
    regular file (a folder, a device, a pipe), permission denied, or not readable as a table
    (``DataError``, ``what`` says what was expected)."""
    try:
        with open_regular(path, what) as f:
            return pd.read_csv(f, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable {what} ({' '.join(str(exc).split())})") from None
