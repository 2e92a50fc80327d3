"""The run's journal: one JSON object per line, flushed and fsynced per record.

Every bar seen, every decision, every trade request and its result is appended as it happens, so a crash
loses at most the record being written. ``read_journal`` is the other side: a last line cut short by a
crash (no newline at its end, not valid JSON) is dropped with a warning; any other line that is not a
JSON object with a known ``type`` is refused with its line number, because a journal that was edited or
belongs to something else must not be resumed from.

Record types: ``start`` (the run: EA, parameters, symbol, account, forward start), ``history`` (the bars
known at the start, as columns), ``open`` (a bar began: the decision's bid/ask), ``tick``, ``request`` and
``result`` (one trade call of the EA and its answer), ``decision`` (after ``on_bar``), ``bar`` (a bar
closed), ``account`` (a live account at the start or resume: the EA's magic number, balance, currency,
leverage), ``resume``, ``reconnect``, ``warning`` and ``stop``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from neuronet.live.errors import JournalError

log = logging.getLogger(__name__)

JOURNAL_VERSION = 1
MAX_LINE = 256 * 2**20  # bytes: the history record of a few million bars; a line beyond is not a journal's
TYPES = frozenset(
    {"start", "history", "open", "tick", "request", "result", "decision", "bar", "account", "resume",
     "reconnect", "warning", "stop"}
)


def json_ready(value: Any) -> Any:
    """Numbers, strings, lists and dicts as JSON takes them: numpy scalars as Python ones, NaN and
    infinities as text, timestamps as ISO text."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0):
        number = value.item() if hasattr(value, "item") else value
        if isinstance(number, float) and not math.isfinite(number):
            return str(number)
        return number
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


class Journal:
    """Append records to a JSON-lines file; each is on disk (flushed and fsynced) when ``write`` returns."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        _regular(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        except OSError as exc:
            raise JournalError(f"journal {self.path}: cannot write it ({exc.strerror or exc})") from None
        self._lock()
        self._repair_tail()

    def _lock(self) -> None:
        """One writer per journal: a second run on it would interleave records (POSIX; not on Windows)."""
        try:
            import fcntl
        except ImportError:
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._file.close()
            raise JournalError(f"journal {self.path} is in use by another run; stop it first") from None

    def _repair_tail(self) -> None:
        """A line cut short by a crash would glue onto the next record: cut it off before appending."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data.endswith(b"\n"):
                return
            keep = data.rfind(b"\n") + 1
            log.warning("%s: dropping a last line cut short (%d bytes)", self.path, len(data) - keep)
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())

    def write(self, kind: str, **fields: Any) -> dict:
        if kind not in TYPES:
            raise JournalError(f"unknown journal record type {kind!r}")
        record = {"type": kind, **json_ready(fields)}
        line = json.dumps(record, separators=(",", ":"), allow_nan=False)
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        return record

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _regular(path: Path) -> None:
    """A journal is a regular file (or none yet): a directory, a device or a pipe is refused by name."""
    if path.is_dir():
        raise JournalError(f"journal {path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise JournalError(f"journal {path} is not a regular file (a device or a pipe); give a file name")


def _lines(path: Path) -> list[bytes]:
    """The file's lines, each read with a bound: a line longer than ``MAX_LINE`` (no journal writes one;
    a binary file or a runaway line might) is refused before it fills the memory."""
    out = []
    with open(path, "rb") as f:
        while line := f.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE:
                where = f"journal {path} line {len(out) + 1}"
                raise JournalError(f"{where}: longer than {MAX_LINE // 2**20} MiB; not a journal")
            out.append(line)
    return out


def read_journal(path: str | os.PathLike) -> list[dict]:
    """Every record of a journal, in order (see the module docstring for what is tolerated)."""
    path = Path(path)
    _regular(path)
    try:
        lines = _lines(path)
    except FileNotFoundError:
        raise JournalError(f"journal {path} does not exist") from None
    except OSError as exc:
        raise JournalError(f"cannot read journal {path}: {exc.strerror or exc}") from None
    records: list[dict] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = not raw.endswith(b"\n")  # no newline after it: the line a crash may have cut
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if last:
                log.warning("%s: line %d was cut short (a crash while writing): ignored", path, number)
                break
            raise JournalError(f"journal {path} line {number}: not JSON ({exc}); not a neuronet journal, or "
                               "damaged") from None
        if not isinstance(record, dict) or record.get("type") not in TYPES:
            what = record.get("type") if isinstance(record, dict) else type(record).__name__
            raise JournalError(f"journal {path} line {number}: unknown record {what!r}")
        record["_line"] = number
        records.append(record)
    if records and records[0]["type"] != "start":
        raise JournalError(f"journal {path} line {records[0]['_line']}: a journal begins with a start record")
    if records and records[0].get("version") != JOURNAL_VERSION:
        raise JournalError(f"journal {path}: version {records[0].get('version')!r}, this neuronet reads "
                           f"{JOURNAL_VERSION}")
    return records
