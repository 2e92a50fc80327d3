"""Errors of expert advisors: misuse of the EA API (a user error) and a failure of the EA's own code."""

from __future__ import annotations

from typing import Any

from neuronet.errors import NeuronetError


class EAError(NeuronetError, ValueError):
    """An EA was configured or used wrongly (bad parameter, trading outside a backtest, future bars)."""


class ForecastError(NeuronetError, ValueError):
    """A forecasting run's data file or settings are unusable (the forecast protocol of ``neuronet forecast``
    and ``ForecastEA``); the message names the file, row, column or option."""


class EARuntimeError(Exception):
    """An expert advisor's hook raised: names the EA, the hook, the bar and the original error.

    Not a ``NeuronetError``: a bug in an EA is neither the user's input nor neuronet's own bug, and the
    command line reports it as an EA failure. The original exception is ``original`` (and ``__cause__``).
    """

    def __init__(self, ea: str, hook: str, where: str, original: BaseException, bar: int | None, time: Any):
        self.ea, self.hook, self.where, self.original = ea, hook, where, original
        self.bar, self.time = bar, time
        detail = str(original)
        super().__init__(
            f"{ea}.{hook} raised {where}: {type(original).__name__}" + (f": {detail}" if detail else "")
        )

    def __reduce__(self) -> tuple:
        """Picklable with its parts (a run in another process, e.g. a Dask worker, re-raises it whole)."""
        return type(self), (self.ea, self.hook, self.where, self.original, self.bar, self.time)


class ExportError(NeuronetError, ValueError):
    """A model cannot be exported to ONNX/MQL5: another kind of file, a layer or feature with no ONNX form,
    an EA whose inputs exist only in Python; the message names it."""
