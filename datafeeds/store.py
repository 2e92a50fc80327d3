"""The local candle store: history pulled from a terminal or downloaded, kept on disk loss-free.

One file per (source, symbol, timeframe): ``<root>/<source>/<SYMBOL>/<TF>.npz`` holding two arrays, the
terminal's rates array (``RATES_DTYPE``, broker seconds) and the ``CandleMeta`` as a JSON string. Both load
with ``allow_pickle=False`` and the rates round-trip bit for bit.

Every write goes to a temporary file in the same folder, is flushed and fsync'ed, then renamed over the old
file (``os.replace`` is atomic on POSIX and Windows), and the folder is fsync'ed: a writer killed at any
moment leaves either the old file or the new one, never a torn file. Temporary files left by killed
writers are ignored by readers and removed by a later write to the same file once ten minutes old.

Location: ``$NEURONET_CACHE`` when set, else the platform cache folder (``$XDG_CACHE_HOME/neuronet`` or
``~/.cache/neuronet`` on Linux, ``~/Library/Caches/neuronet`` on macOS, ``%LOCALAPPDATA%\\neuronet`` on
Windows), under ``candles/``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from datafeeds.candles import RATES_DTYPE, CandleMeta, from_rates, meta_of, to_rates
from datafeeds.errors import CandleDataError
from datafeeds.timeframes import Timeframe

_TMP_SUFFIX = ".tmp"
FORMAT_VERSION = 1
_STALE_AFTER_S = 600


def cache_root() -> Path:
    """The cache folder (see the module docstring); not created until something is written."""
    env = os.environ.get("NEURONET_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "neuronet"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "neuronet"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuronet"


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Write a file atomically: ``write(f)`` fills a temporary file that then replaces ``path``.

    If ``write`` raises, the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    _remove_stale(path)
    return path


def write_npz(path: str | os.PathLike, df: pd.DataFrame) -> Path:
    """Write one frame as ``.npz`` (rates + JSON meta), atomically."""
    meta = meta_of(df)
    rates = to_rates(df)
    header = json.dumps({"format": FORMAT_VERSION, "meta": meta.to_dict()})

    def write(f: BinaryIO) -> None:
        np.savez(f, rates=rates, meta=np.array(header))

    return atomic_write(path, write)


def read_npz(path: str | os.PathLike) -> pd.DataFrame:
    """Read a file written by ``write_npz``; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such candle file")
    try:
        with np.load(path, allow_pickle=False) as z:
            rates = z["rates"]
            header = json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise CandleDataError(str(path), f"not a readable candle store file ({exc})") from None
    if rates.dtype != RATES_DTYPE:
        raise CandleDataError(str(path), f"rates have dtype {rates.dtype}, expected {RATES_DTYPE}")
    meta = CandleMeta.from_dict(header["meta"])
    return from_rates(rates, meta)


class CandleStore:
    """History on disk by (source, symbol, timeframe), merged as new bars arrive."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root() / "candles"

    def path(self, source: str, symbol: str, timeframe: Timeframe | str | int) -> Path:
        tf = Timeframe.parse(timeframe)
        for part in (source, symbol):
            if not part or any(ch in part for ch in '/\\:*?"<>|') or part.startswith("."):
                raise ValueError(f"cannot use {part!r} as a store folder name")
        return self.root / source / symbol.upper() / f"{tf.name}.npz"

    def load(self, source: str, symbol: str, timeframe: Timeframe | str | int) -> pd.DataFrame | None:
        """The stored frame, or None when nothing is stored yet."""
        path = self.path(source, symbol, timeframe)
        return read_npz(path) if path.is_file() else None

    def save(self, source: str, df: pd.DataFrame) -> Path:
        """Replace the stored history of the frame's symbol and timeframe with ``df``."""
        meta = meta_of(df)
        return write_npz(self.path(source, meta.symbol, meta.timeframe), df)

    def merge(self, source: str, df: pd.DataFrame) -> pd.DataFrame:
        """Merge new bars into the stored history and write it back; returns the merged frame.

        Where both hold a bar with the same open time, the new one wins: the last bar of an earlier pull may
        still have been forming. The stored and new frames must agree on symbol, timeframe and clock.
        """
        meta = meta_of(df)
        old = self.load(source, meta.symbol, meta.timeframe)
        if old is not None:
            old_meta = meta_of(old)
            if (old_meta.timeframe, old_meta.clock) != (meta.timeframe, meta.clock):
                raise ValueError(
                    f"cannot merge {meta.symbol} {meta.timeframe.name} ({meta.clock}) into the stored "
                    f"history with {old_meta.timeframe.name} ({old_meta.clock})"
                )
            merged = pd.concat([old[~old.index.isin(df.index)], df]).sort_index()
            merged.attrs["candles"] = meta
            df = merged
        self.save(source, df)
        return df


def _remove_stale(path: Path) -> None:
    """Delete temporary files of writers that died; a live concurrent writer's fresh file is left alone."""
    cutoff = time.time() - _STALE_AFTER_S
    for stale in path.parent.glob(f".{path.name}.*{_TMP_SUFFIX}"):
        try:
            if stale.stat().st_mtime < cutoff:
                stale.unlink()
        except OSError:
            pass


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
