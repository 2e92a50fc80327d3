"""One optimisation at a time per study store: a lock file next to the store, held for the whole run.

Two processes filling one study would each run the passes the other has not recorded yet (a 442-point
grid stored 884 passes), so the second is refused at once with one line. The lock is ``filelock``'s: an
OS lock (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) that the system drops when its holder
dies, so a killed run never leaves a study locked; where neither exists it falls back to a lock file
holding the owner's process id, which a later run takes over once that process is gone.

The lock of an SQLite store ``study.db`` is ``study.db.lock`` beside the file itself (a symlink or a
relative ``sqlite:///`` URL to it takes the same lock). A store given as another RDB URL
(PostgreSQL, MySQL) is locked by a file in neuronet's cache folder named after the URL: that covers the
processes of this machine only.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backtests.optimize.errors import StoreError, StoreInUseError
from datafeeds.store import cache_root

LOCK_SUFFIX = ".lock"


def lock_path(storage: str) -> Path:
    """The lock file of a store URL (``sqlite:///PATH`` or any other RDB URL)."""
    if storage.startswith("sqlite:///"):  # the file itself, however named: a symlink, relative, ?options
        file = Path(storage.removeprefix("sqlite:///").split("?", 1)[0]).resolve()
        return file.with_name(file.name + LOCK_SUFFIX)
    digest = hashlib.sha1(storage.encode()).hexdigest()[:16]
    return cache_root() / "study-locks" / f"{digest}{LOCK_SUFFIX}"


@contextmanager
def locked(storage: str | None, user: str = "optimisation") -> Iterator[None]:
    """Hold the store's lock while the block runs; refuse at once if another process holds it
    (``StoreInUseError``; ``user`` says what uses such a store: an optimisation, a permutation test)."""
    if storage is None:  # an in-memory study belongs to this call alone
        yield
        return
    with warnings.catch_warnings():  # "only soft file lock is available" where fcntl is missing
        warnings.simplefilter("ignore")
        import filelock
    path = lock_path(storage)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"study store lock {path}: cannot create its folder ({exc.strerror})") from None
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        if not path.exists():  # a holder keeps the file while it holds it: here none could be made
            raise StoreError(f"study store lock {path}: cannot be created there") from None
        raise StoreInUseError(storage.removeprefix("sqlite:///"), str(path), user) from None
    except OSError as exc:
        raise StoreError(f"study store lock {path}: cannot be created ({exc.strerror or exc})") from None
    try:
        yield
    finally:
        lock.release()
