"""The run's journal: one JSON object per line, flushed and fsynced per record.

Every bar seen, every decision, every trade request and its result is appended as it happens, so a crash
loses at most the record being written. The file begins with a header, the ``start`` record, which
carries the format marker ``"format": "neuronet-journal"``: a file is taken as a journal (read, resumed,
repaired) only when its first line is such a record, so a token file, a CSV or a binary blob given as
``--journal`` is refused and never truncated or appended to.

One rule says what a complete record is, for the reader and for the repair alike (``_Line``): a line that
reads as a JSON object of a known ``type``. A last line that lacks its newline (a crash between the record
and its newline) is therefore read when it is complete, and the writer then adds the newline; a last line
that is not JSON at all (a crash while writing it: a JSON object cut anywhere is no JSON) is ignored by the
reader with a warning and cut off by the writer before it appends. Any other line that is not a record is
refused with its number, the last one included, and never cut.

Every value written reads back as it was (``json_ready``): NumPy scalars as Python numbers, timestamps as
ISO text, and NaN and the infinities (which JSON has no numbers for) as ``{"$float": "nan"}``,
``{"$float": "inf"}`` and ``{"$float": "-inf"}``, turned back into floats by the reader; text is written as
ASCII escapes, so any unicode (line separators included) stays on its line. A journal is read a line at
a time (``JournalRecords``), never whole, with each line bounded by ``MAX_LINE``.

One writer per journal: ``Journal`` holds an exclusive lock on ``<journal>.lock`` (``filelock``: ``fcntl``
on POSIX, ``msvcrt`` on Windows, released by the system if the process dies) for as long as it is open,
and where the system has ``fcntl`` (Linux, macOS) a ``flock`` on the journal file itself. The system keys
that one by the file (its device and inode), not by a name: a second writer that reaches the same file
under another name (a hard link, in the same folder or another) meets it, as one through the same path or a
symlink meets the first. Windows has no ``fcntl``: there only the lock beside the file's path holds, and a
hard link (another path) is not covered.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock

from neuronet.live.errors import JournalError

try:
    import fcntl
except ImportError:  # Windows: the lock beside the journal's path only (module docstring)
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

JOURNAL_VERSION = 1
FORMAT = "neuronet-journal"  # the header's marker: what proves a file is a journal
MAX_LINE = 256 * 2**20  # bytes: the history record of a few million bars; a line beyond is not a journal's
TYPES = frozenset(
    {
        "start",
        "history",
        "open",
        "tick",
        "request",
        "result",
        "decision",
        "bar",
        "account",
        "resume",
        "reconnect",
        "warning",
        "stop",
    }
)
_HINTS = {"history": " (the bars known at the start: give a smaller --history)"}
_FLOAT = "$float"  # the key of a non-finite float written as an object
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_LEGACY_KEYS = ("ea", "symbol", "timeframe", "mode", "account")  # a header written before the marker


def json_ready(value: Any) -> Any:
    """Numbers, strings, lists and dicts as JSON takes them, reading back as they were (module docstring):
    NumPy scalars as Python ones, NaN and the infinities as ``{"$float": ...}``, timestamps as ISO text."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0):
        number = value.item() if hasattr(value, "item") else value
        if isinstance(number, float) and not math.isfinite(number):
            return {_FLOAT: "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")}
        return number
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _decoded(obj: dict) -> Any:
    """``json.loads``' object hook: a ``{"$float": ...}`` back to its float, any other object as it is."""
    if len(obj) == 1 and isinstance(obj.get(_FLOAT), str) and obj[_FLOAT] in _NON_FINITE:
        return _NON_FINITE[obj[_FLOAT]]
    return obj


def _encode(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


class _Line:
    """What one line of a file is (newline or not), by the one rule the reader and the tail repair share:
    a complete ``record`` (a JSON object of a known type); ``cut_short``, not JSON at all, which is what a
    crash while writing leaves (a JSON object cut anywhere is no JSON); or neither, a line that is not a
    journal's (``error`` says why), refused wherever it is."""

    def __init__(self, raw: bytes):
        self.record: dict | None = None
        self.error = ""
        self.cut_short = False
        try:
            value = json.loads(raw.decode("utf-8"), object_hook=_decoded)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            self.error, self.cut_short = f"not JSON ({exc})", True
            return
        if not isinstance(value, dict) or value.get("type") not in TYPES:
            what = value.get("type") if isinstance(value, dict) else type(value).__name__
            self.error = f"unknown record {what!r}"
            return
        self.record = value


def _is_header(record: dict | None) -> bool:
    """A journal's first record: a ``start`` with the format marker (or, written before the marker, one of
    version 1 with the run's settings)."""
    if record is None or record.get("type") != "start":
        return False
    if record.get("format") == FORMAT:
        return True
    return "format" not in record and record.get("version") == 1 and all(k in record for k in _LEGACY_KEYS)


def _regular(path: Path) -> None:
    """A journal is a regular file (or none yet): a directory, a device or a pipe is refused by name."""
    if path.is_dir():
        raise JournalError(f"journal {path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise JournalError(f"journal {path} is not a regular file (a device or a pipe); give a file name")


def _read_line(f: Any, path: Path, number: int) -> bytes:
    """The next line of ``f`` (with its newline when it has one; b"" at the end), bounded by ``MAX_LINE``."""
    line = f.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        where = f"journal {path} line {number}"
        raise JournalError(f"{where}: longer than {MAX_LINE // 2**20} MiB; not a journal")
    return line


def _first_record(path: Path) -> dict:
    """The header of the journal at ``path``, or a ``JournalError`` saying why the file is not a journal."""
    number = 1
    try:
        with open(path, "rb") as f:
            raw = _read_line(f, path, number)
            while raw and not raw.strip():  # blank lines before it
                number += 1
                raw = _read_line(f, path, number)
    except FileNotFoundError:
        raise JournalError(f"journal {path} does not exist") from None
    except OSError as exc:
        raise JournalError(f"cannot read journal {path}: {exc.strerror or exc}") from None
    if not raw:
        raise JournalError(f"journal {path} is empty")
    line = _Line(raw)
    if line.record is None and not raw.endswith(b"\n"):
        raise JournalError(
            f"journal {path} holds one incomplete line and no journal header; not a neuronet journal (if a "
            "run crashed while writing its first record, delete the file)"
        )
    if line.record is None:
        raise JournalError(f"journal {path} line {number}: {line.error}; not a neuronet journal, or damaged")
    if line.record["type"] != "start":
        raise JournalError(f"journal {path} line {number}: a journal begins with a start record")
    if line.record.get("version") != JOURNAL_VERSION:
        raise JournalError(
            f"journal {path}: version {line.record.get('version')!r}, this neuronet reads {JOURNAL_VERSION}"
        )
    if not _is_header(line.record):
        raise JournalError(
            f"journal {path} line {number}: a start record without the journal's format marker; not a "
            "neuronet journal"
        )
    return line.record


class JournalRecords:
    """The records of a journal, read afresh from disk at every pass, a line at a time (memory: one line).

    Built only on a file proven to be a journal (its header, ``start``); a line that is not a record is a
    ``JournalError`` naming it when a pass reaches it, and a last line cut short by a crash is left out with
    a warning (module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        _regular(self.path)
        self.start = _first_record(self.path)

    def __iter__(self) -> Iterator[dict]:
        path = self.path
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed by the generator
        except OSError as exc:
            raise JournalError(f"cannot read journal {path}: {exc.strerror or exc}") from None
        with f:
            number = 0
            while raw := _read_line(f, path, number + 1):
                number += 1
                if not raw.strip():
                    continue
                line = _Line(raw)
                if line.cut_short and not raw.endswith(b"\n"):  # only the last line lacks its newline
                    log.warning("%s: line %d was cut short (a crash while writing): ignored", path, number)
                    return
                if line.record is None:
                    raise JournalError(
                        f"journal {path} line {number}: {line.error}; not a neuronet journal, or damaged"
                    )
                line.record["_line"] = number
                yield line.record


def read_journal(path: str | os.PathLike) -> list[dict]:
    """Every record of a journal, in order, as a list (``JournalRecords`` reads them one at a time)."""
    return list(JournalRecords(path))


class Journal:
    """Append records to a JSON-lines file; each is on disk (flushed and fsynced) when ``write`` returns.

    An existing file must be a journal (its first line the header) and is locked for this writer alone;
    its last line is then made whole (``_repair_tail``) before anything is appended."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        _regular(self.path)
        if self.path.exists() and self.path.stat().st_size:
            _first_record(self.path)  # proven a journal before anything is locked, created or repaired
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(f"journal {self.path}: cannot write it ({exc.strerror or exc})") from None
        self._broken: str | None = None  # why a write failed: nothing is written (nor sent) after it
        self._lock = self._locked()
        self._file: Any = None
        try:
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for the run
            self._hold_file()  # before the repair: another writer's tail is never touched
            self._repair_tail()
        except BaseException as exc:
            if self._file is not None:
                self._file.close()  # its flock goes with it
            self._lock.release()
            if isinstance(exc, OSError):
                raise JournalError(f"journal {self.path}: cannot write it ({exc.strerror or exc})") from None
            raise

    def _locked(self) -> filelock.BaseFileLock:
        """One writer per journal: a second run on it would interleave records. The lock is that of the
        file a symlink leads to, so a symlink to the journal takes the same lock (a hard link, another path to
        the same file, meets ``_hold_file``)."""
        lock_file = f"{os.path.realpath(self.path)}.lock"
        lock = filelock.FileLock(lock_file, timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise JournalError(f"journal {self.path} is in use by another run; stop it first") from None
        except OSError as exc:
            raise JournalError(
                f"journal {self.path}: cannot take its lock {lock_file} ({exc.strerror or exc})"
            ) from None
        return lock

    def _hold_file(self) -> None:
        """One writer per file, whatever its name: a ``flock`` on the open journal, which the system keys by
        the file's device and inode, so a hard link (another path to the same file, which the path lock
        does not see) meets it too. Held until the file is closed, released by the system if the process
        dies. Without ``fcntl`` (Windows) the path lock alone holds (module docstring)."""
        if fcntl is None:
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JournalError(
                f"journal {self.path} is in use by another run (the same file under another name, a hard "
                "link); stop it first"
            ) from None

    def _repair_tail(self) -> None:
        """A last line without its newline: complete, it gets its newline; cut short by a crash, it is cut
        off (it would glue onto the next record). Reads only the tail, at most ``MAX_LINE`` bytes."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if not size:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            start = max(0, size - MAX_LINE - 1)
            f.seek(start)
            tail = f.read()
            cut = tail.rfind(b"\n")
            if cut < 0 and start:
                mib = MAX_LINE // 2**20
                raise JournalError(f"journal {self.path}: its last line is longer than {mib} MiB")
            keep = start + cut + 1
            last = _Line(tail[cut + 1 :])
            if last.record is not None:
                f.seek(size)
                f.write(b"\n")
            elif last.cut_short:
                log.warning("%s: dropping a last line cut short (%d bytes)", self.path, size - keep)
                f.truncate(keep)
            else:
                raise JournalError(f"journal {self.path}: its last line is an {last.error}; not repaired")
            f.flush()
            os.fsync(f.fileno())

    def write(self, kind: str, **fields: Any) -> dict:
        """Append one record; a ``start`` record gets the header's format marker and version."""
        return self.write_all((kind, fields))[0]

    def write_all(self, *records: tuple[str, dict]) -> list[dict]:
        """Append ``(kind, fields)`` records together: each is encoded and checked first, and none is written
        when one is longer than ``MAX_LINE`` (the reader would refuse it: the journal could never be
        resumed or reported)."""
        if self._broken is not None:
            raise JournalError(self._broken)
        out, lines = [], []
        for kind, fields in records:
            if kind not in TYPES:
                raise JournalError(f"unknown journal record type {kind!r}")
            head = {"format": FORMAT, "version": JOURNAL_VERSION} if kind == "start" else {}
            record = {"type": kind, **head, **json_ready(fields)}
            line = _encode(record)
            if len(line) > MAX_LINE:
                raise JournalError(
                    f"journal {self.path}: a {kind} record of {len(line) / 2**20:.1f} MiB is longer than "
                    f"the {MAX_LINE / 2**20:g} MiB a journal line may hold{_HINTS.get(kind, '')}; "
                    "nothing was written"
                )
            out.append(record)
            lines.append(line)
        try:
            self._file.write(b"".join(lines))
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:  # a full disk, a folder made read-only, a removed drive
            self._broken = (
                f"journal {self.path}: cannot write it ({exc.strerror or exc}); the run stops and sends "
                "nothing more: make room (or make it writable), then start the same command to resume"
            )
            raise JournalError(self._broken) from None
        return out

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.close()
            except OSError:  # what a failed write left unflushed: the journal already said it was not written
                if self._broken is None:
                    raise
            self._lock.release()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
