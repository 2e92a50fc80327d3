"""Errors of expert advisors: misuse of the EA API (a user error) and a failure of the EA's own code."""

from __future__ import annotations

from typing import Any

from neuronet.errors import NeuronetError


class EAError(NeuronetError, ValueError):
    """An EA was configured or used wrongly (bad parameter, trading outside a backtest, future bars)."""


class EARuntimeError(Exception):
    """An expert advisor's hook raised: names the EA, the hook, the bar and the original error.

    Not a ``NeuronetError``: a bug in an EA is neither the user's input nor neuronet's own bug, and the
    command line reports it as an EA failure. The original exception is ``original`` (and ``__cause__``).
    """

    def __init__(self, ea: str, hook: str, where: str, original: BaseException, bar: int | None, time: Any):
        self.ea, self.hook, self.bar, self.time, self.original = ea, hook, bar, time, original
        detail = str(original)
        super().__init__(
            f"{ea}.{hook} raised {where}: {type(original).__name__}" + (f": {detail}" if detail else "")
        )
