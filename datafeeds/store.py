"""The local candle store: history pulled from a terminal or downloaded, kept on disk loss-free.

One file per (source, symbol, timeframe): ``<root>/<source>/<SYMBOL>/<TF>.npz`` holding two arrays, the
terminal's rates array (``RATES_DTYPE``, broker seconds) and a JSON header with the ``CandleMeta``. Both
load with ``allow_pickle=False`` and the rates round-trip bit for bit. Keyed by a feed and a broker clock
as well (what the read-through cache of ``datafeeds.cache`` uses, since two brokers' EURUSD differ), the
file is ``<root>/<source>/<feed>/<SYMBOL>/<TF>@<clock>.npz``, for example
``mt5/ICMarkets-Demo/EURUSD/H1@UTC+2-us.npz``.
The header also carries the bar count, first and last bar and any extra fields of the writer, so a
listing reads headers only.

Every write goes through ``datafeeds.files.atomic_write`` (temporary file, fsync, rename): a writer killed
at any moment leaves either the old file or the new one, never a torn file. Temporary files left by killed
writers are ignored by readers, listed by ``temp_files`` and removed by ``clear`` (or by a later write to
the same file) once ten minutes old.

Names from user input (source, symbol, feed) are checked to stay inside the store's root before a path is
read, written or deleted (``datafeeds.files.inside``); files that a symlink leads out of the root are
neither listed nor deleted.

Location: ``<cache folder>/candles/``, the cache folder being ``neuronet.cachedir.cache_root()``
(``$NEURONET_CACHE`` when set, else the platform's cache folder).
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from datafeeds.candles import RATES_DTYPE, CandleMeta, from_rates, meta_of, to_rates
from datafeeds.clock import BrokerClock
from datafeeds.errors import CandleDataError, DataError
from datafeeds.files import TMP_SUFFIX, UnsafePathError, atomic_write, inside, is_inside, is_stale
from datafeeds.timeframes import Timeframe
from neuronet.cachedir import cache_root

__all__ = ["CandleStore", "StoreEntry", "atomic_write", "cache_root", "read_npz", "write_npz"]

FORMAT_VERSION = 1
MAX_HEADER_BYTES = 2**20
MAX_RATES_BYTES = 4 * 2**30  # 70 million bars: decades of M1


def write_npz(path: str | os.PathLike, df: pd.DataFrame, extra: dict | None = None) -> Path:
    """Write one frame as ``.npz`` (rates + JSON header), atomically; ``extra`` adds header fields."""
    meta = meta_of(df)
    rates = to_rates(df)
    seconds = df.index.as_unit("s").asi8
    summary = {
        "bars": len(rates),
        "first": int(seconds[0]) if len(seconds) else None,
        "last": int(seconds[-1]) if len(seconds) else None,
    }
    header = json.dumps({**(extra or {}), **summary, "format": FORMAT_VERSION, "meta": meta.to_dict()})

    def write(f: BinaryIO) -> None:
        np.savez(f, rates=rates, meta=np.array(header))

    return atomic_write(path, write)


def read_npz(path: str | os.PathLike) -> pd.DataFrame:
    """Read a file written by ``write_npz``; errors name the file."""
    return read_npz_entry(path)[0]


def read_npz_entry(path: str | os.PathLike) -> tuple[pd.DataFrame, dict]:
    """The frame of a ``write_npz`` file and its JSON header; ``CandleDataError`` names a bad file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such candle file")
    _require_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            rates = z["rates"]
            header = _header(z)
        meta = CandleMeta.from_dict(header["meta"])
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise CandleDataError(str(path), f"not a readable candle store file ({exc})") from None
    if rates.dtype != RATES_DTYPE:
        raise CandleDataError(str(path), f"rates have dtype {rates.dtype}, expected {RATES_DTYPE}")
    if header.get("bars", len(rates)) != len(rates):
        raise CandleDataError(str(path), f"holds {len(rates)} bars, its header says {header['bars']}")
    return from_rates(rates, meta), header


def read_npz_header(path: str | os.PathLike) -> dict:
    """Only the JSON header of a ``write_npz`` file (the rates are not read)."""
    _require_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return _header(z)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise CandleDataError(str(path), f"not a readable candle store file ({exc})") from None


def _require_npz(path: str | os.PathLike) -> None:
    """Refuse anything but a store archive before numpy sees it: numpy would talk of pickles for a text
    file, and inflate any member, however large, into memory. The members must be ``rates`` and ``meta``,
    the header small, and the rates' own ``.npy`` header must declare ``RATES_DTYPE`` records whose size is
    the entry's uncompressed size, at most ``MAX_RATES_BYTES``."""
    try:
        if not zipfile.is_zipfile(path):
            raise CandleDataError(str(path), "not a readable candle store file (not an .npz archive)")
        with zipfile.ZipFile(path) as zf:
            infos = {i.filename: i for i in zf.infolist()}
            if set(infos) != {"rates.npy", "meta.npy"}:
                raise DataError(f"it holds {sorted(infos)}, not rates.npy and meta.npy")
            if infos["meta.npy"].file_size > MAX_HEADER_BYTES:
                raise DataError(f"its header is {infos['meta.npy'].file_size} bytes")
            with zf.open(infos["rates.npy"]) as f:
                version = np.lib.format.read_magic(f)
                read = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else (np.lib.format.read_array_header_2_0)
                )
                shape, fortran, dtype = read(f)
                size = f.tell() + (shape[0] if len(shape) == 1 else -1) * dtype.itemsize
        if dtype != RATES_DTYPE or len(shape) != 1 or fortran:
            raise DataError(f"its rates are {shape} {dtype}, expected ({RATES_DTYPE})")
        if size != infos["rates.npy"].file_size or size > MAX_RATES_BYTES:
            held = infos["rates.npy"].file_size
            raise DataError(
                f"its rates entry holds {held} bytes, its header declares {size} (at most {MAX_RATES_BYTES})"
            )
    except CandleDataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
        raise CandleDataError(str(path), f"not a readable candle store file ({exc})") from None


def _header(z) -> dict:
    try:
        header = json.loads(str(z["meta"]))
    except RecursionError:
        raise DataError("its header nests too deeply") from None
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        raise DataError("its header has no candle metadata")
    return header


def clock_tag(clock: BrokerClock) -> str:
    """A broker clock as a file-name part: ``UTC``, ``UTC+2``, ``UTC+2-us``, ``UTC+5.5``."""
    hours = clock.utc_offset_hours
    text = f"UTC{hours:+g}" if hours else "UTC"
    return text + (f"-{clock.dst}" if clock.dst != "none" else "")


def _folder_name(text: str) -> str:
    """A feed name (a broker's server, ``host:port``) as one safe folder name on every platform."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", text.strip())
    return "_" + name[1:] if name.startswith(".") else name


@dataclass(frozen=True)
class StoreEntry:
    """One stored file as ``CandleStore.entries`` lists it; ``problem`` is set when it cannot be read."""

    path: Path
    size: int
    source: str = ""
    feed: str = ""
    symbol: str = ""
    timeframe: str = ""
    clock: str = ""
    bars: int = 0
    first: pd.Timestamp | None = None
    last: pd.Timestamp | None = None
    problem: str = ""


class CandleStore:
    """History on disk by (source, symbol, timeframe), merged as new bars arrive."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root() / "candles"

    def path(
        self,
        source: str,
        symbol: str,
        timeframe: Timeframe | str | int,
        *,
        feed: str | None = None,
        clock: BrokerClock | None = None,
    ) -> Path:
        """Where a series lives; ``feed`` and ``clock`` (both or neither) add the cache's key parts."""
        tf = Timeframe.parse(timeframe)
        _check_part(source)
        _check_part(symbol)
        if (feed is None) != (clock is None):
            raise DataError("a store path takes both feed and clock, or neither")
        if feed is None or clock is None:
            return inside(self.root, source, symbol.upper(), f"{tf.name}.npz")
        if not feed.strip():
            raise DataError("a store feed name must not be empty")
        name = f"{tf.name}@{clock_tag(clock)}.npz"
        return inside(self.root, source, _folder_name(feed), symbol.upper(), name)

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
                raise DataError(
                    f"cannot merge {meta.symbol} {meta.timeframe.name} ({meta.clock}) into the stored "
                    f"history with {old_meta.timeframe.name} ({old_meta.clock})"
                )
            merged = pd.concat([old[~old.index.isin(df.index)], df]).sort_index()
            merged.attrs["candles"] = meta
            df = merged
        self.save(source, df)
        return df

    def entries(self, source: str | None = None) -> list[StoreEntry]:
        """Every stored file (of one source), read from headers only; unreadable files carry a problem."""
        found = []
        for path in self._files("*.npz", source):
            size = path.stat().st_size
            try:
                h = read_npz_header(path)
                meta = CandleMeta.from_dict(h["meta"])
                bars = int(h["bars"])
            except (CandleDataError, ValueError, KeyError, TypeError) as exc:
                found.append(
                    StoreEntry(path, size, source=path.relative_to(self.root).parts[0], problem=str(exc))
                )
                continue
            found.append(
                StoreEntry(
                    path,
                    size,
                    source=str(h.get("source") or path.relative_to(self.root).parts[0]),
                    feed=str(h.get("feed") or ""),
                    symbol=meta.symbol,
                    timeframe=meta.timeframe.name,
                    clock=clock_tag(meta.clock),
                    bars=bars,
                    first=_stamp(h.get("first")),
                    last=_stamp(h.get("last")),
                )
            )
        return found

    def temp_files(self, source: str | None = None) -> list[Path]:
        """Temporary files of interrupted writers (of one source); ``clear`` removes the stale ones."""
        return self._files(f".*{TMP_SUFFIX}", source)

    def clear(self, source: str | None = None, symbol: str | None = None) -> list[StoreEntry]:
        """Delete stored files (of one source and/or symbol) and the stale temporary files of killed
        writers among them; returns the stored series deleted."""
        if symbol is not None:
            _check_part(symbol)
        gone = []
        for entry in self.entries(source):
            if symbol and entry.path.parent.name != symbol.upper():  # the folder is the upper-case symbol
                continue
            entry.path.unlink(missing_ok=True)
            gone.append(entry)
            _prune(entry.path.parent, self.root)
        for tmp in self.temp_files(source):
            if (not symbol or tmp.parent.name == symbol.upper()) and is_stale(tmp):
                tmp.unlink(missing_ok=True)
                _prune(tmp.parent, self.root)
        return gone

    def _files(self, pattern: str, source: str | None) -> list[Path]:
        """Files matching ``pattern`` below the root (or a source's folder), none that leads outside."""
        folder = inside(self.root, _checked(source)) if source else self.root
        if not folder.is_dir() or not is_inside(self.root, folder):
            return []
        return [p for p in sorted(folder.rglob(pattern)) if p.is_file() and is_inside(self.root, p)]


def _check_part(part: str) -> None:
    if not part or any(ch in part for ch in '/\\:*?"<>|\0') or part.startswith("."):
        raise UnsafePathError(repr(part), "cannot be used as a store folder name")


def _checked(part: str) -> str:
    _check_part(part)
    return part


def _stamp(seconds: int | None) -> pd.Timestamp | None:
    return None if seconds is None else pd.Timestamp(int(seconds), unit="s", tz="UTC")


def _prune(folder: Path, root: Path) -> None:
    """Remove folders left empty below ``root`` (a cleared store leaves no empty tree behind)."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
