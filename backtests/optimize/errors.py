"""The optimisation's user errors: a bad parameter space, method, criterion or cluster request."""

from __future__ import annotations

from neuronet.errors import NeuronetError


class OptimizeError(NeuronetError, ValueError):
    """An optimisation request that cannot run as given; the message names the option or parameter."""
