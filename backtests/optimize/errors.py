"""The optimisation's user errors: a bad parameter space, method, criterion or cluster request, and a
study store that cannot be used."""

from __future__ import annotations

from neuronet.errors import NeuronetError


class OptimizeError(NeuronetError, ValueError):
    """An optimisation request that cannot run as given; the message names the option or parameter."""


class StoreError(NeuronetError, OSError):
    """The study store cannot be used: another application's database, a damaged file, or a store that
    another optimisation holds; the message names the store."""


class StorePlaceError(StoreError):
    """A study store that cannot be written where it was asked for (a folder or file this user may not
    write, a path under a file): refused before any pass runs, since passes are only kept by writing them.
    It is also the built-in error of its cause (``PermissionError``, ``NotADirectoryError``...), as raised
    by the subclasses below."""


class StorePermissionError(StorePlaceError, PermissionError):
    """The store's folder or file may not be written by this user."""


class StoreFolderError(StorePlaceError, NotADirectoryError):
    """The store's folder cannot be made: a file stands where a folder of its path should be."""


class StoreIsFolderError(StorePlaceError, IsADirectoryError):
    """A folder stands where the store's file should be."""


class ClusterError(NeuronetError, OSError):
    """A Dask scheduler that cannot be reached, or that does not answer as one; the message names it."""


class StoreInUseError(StoreError):
    """Another process holds the study store's lock. The message ends with what to do instead; a command
    words that with the option that chooses its store (``remedied``): ``optimize``'s ``--store``, the
    ``--out`` folder that holds a permutation test's store."""

    def __init__(self, store: str, lock: str, user: str, remedy: str = "use another store") -> None:
        self.store, self.lock, self.user = store, lock, user
        super().__init__(
            f"the study store {store} is in use by another {user} (lock {lock}); wait for it to finish, "
            f"or {remedy}"
        )

    def remedied(self, remedy: str) -> StoreInUseError:
        """The same refusal, ending with ``remedy``."""
        return StoreInUseError(self.store, self.lock, self.user, remedy)
