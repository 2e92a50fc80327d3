"""The robustness analysis's user errors: too little data for a statistic, a count out of range, a report
that cannot be analysed (another version, incomplete, without trades)."""

from __future__ import annotations

from neuronet.errors import NeuronetError


class RobustnessError(NeuronetError, ValueError):
    """A robustness request that cannot run as given; the message names the option, the report or the
    statistic and what it needs."""
