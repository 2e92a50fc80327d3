"""The optimisation's user errors: a bad parameter space, method, criterion or cluster request, and a
study store that cannot be used."""

from __future__ import annotations

from neuronet.errors import NeuronetError


class OptimizeError(NeuronetError, ValueError):
    """An optimisation request that cannot run as given; the message names the option or parameter."""


class StoreError(NeuronetError, OSError):
    """The study store cannot be used: another application's database, a damaged file, or a store that
    another optimisation holds; the message names the store."""


class ClusterError(NeuronetError, OSError):
    """A Dask scheduler that cannot be reached, or that does not answer as one; the message names it."""
