"""Errors of the candle data layer, all one-liners a command line can print as they are.

They derive from ``neuronet.errors.NeuronetError`` (a user-fixable error) and from ``ValueError`` (bad
data) or ``LookupError`` (an unknown name), so any caller, the CLI included, tells a user's problem from a
bug with one ``isinstance`` check.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuronet.errors import NeuronetError

MAX_ROWS_SHOWN = 5


class CandleDataError(NeuronetError, ValueError):
    """Candles that break a rule, naming where they came from and the first offending rows.

    ``origin`` is a file path or a source name; ``rows`` holds the offending bars (time + values) and
    ``lines`` their 1-based line numbers in the file when the data came from a text file.
    """

    def __init__(
        self,
        origin: str,
        problem: str,
        rows: pd.DataFrame | None = None,
        lines: np.ndarray | None = None,
        line: int | None = None,
    ) -> None:
        self.origin = origin
        self.problem = problem
        self.rows = rows
        self.lines = lines
        self._line_given = line  # the message names a line only when it was given
        self.line = (
            line if line is not None else (int(lines[0]) if lines is not None and len(lines) else None)
        )
        where = f"{origin}: line {line}: " if line is not None else f"{origin}: "
        text = where + problem
        if rows is not None and len(rows):
            shown = [
                _describe(rows.index[i], rows.iloc[i], lines, i)
                for i in range(min(len(rows), MAX_ROWS_SHOWN))
            ]
            more = len(rows) - len(shown)
            text += f" ({len(rows)} row{'s' if len(rows) != 1 else ''}): " + "; ".join(shown)
            if more:
                text += f"; and {more} more"
        super().__init__(text)

    def __reduce__(self) -> tuple:
        """Picklable with its parts (data read in another process, e.g. a Dask worker, fails whole)."""
        return type(self), (self.origin, self.problem, self.rows, self.lines, self._line_given)


class DataError(NeuronetError, ValueError):
    """A bad argument or input to the data layer (an option, a date, a file's layout); the message names it.

    A ``ValueError`` too, so code written against the built-in type keeps catching it.
    """


class DataTypeError(DataError, TypeError):
    """A value of the wrong kind where the data layer expected another (e.g. a source returning no frame)."""


class UnknownNameError(NeuronetError, LookupError):
    """A name the data layer does not hold (a symbol the embedded sample lacks, a source in a registry)."""


class UnknownSourceError(UnknownNameError):
    """A source name that is not in the registry."""


def _describe(time: object, row: pd.Series, lines: np.ndarray | None, i: int) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") if isinstance(time, pd.Timestamp) else str(time)
    values = " ".join(f"{k}={_fmt(v)}" for k, v in row.items())
    prefix = f"line {int(lines[i])} " if lines is not None else ""
    return f"{prefix}{stamp} {values}"


def _fmt(v: object) -> str:
    if isinstance(v, float | np.floating):
        return f"{float(v):.10g}"
    return str(v)
