"""The ledger's tables built a column at a time, each column with the dtype pandas gives rows of records.

``pd.DataFrame(rows)`` makes one object array of every row and then infers each column's type from it: at
a hundred thousand deals that inference is most of a report's cost. The records' fields have few kinds of
values (floats, ints, text, None where a price or ticket is not set), so each column is built directly
with the dtype that inference gives those kinds (floats with None: float64 with NaN; text: pandas' string
dtype; only None: object). A column holding any other mix goes through pandas' own inference, alone, so
every table has the columns and dtypes of ``pd.DataFrame(rows, columns=...)``, value for value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

_NONE = type(None)
_FLOATS = frozenset({float, np.float64})
_NUMBERS = frozenset({float, np.float64, int})
_WITH_NONE = frozenset({float, np.float64, int, _NONE})


def record_frame(records: Sequence, row: Callable[[object], tuple], columns: Sequence[str]) -> pd.DataFrame:
    """``pd.DataFrame([row(r) for r in records], columns=columns)``, built column by column."""
    if not records:
        return pd.DataFrame([], columns=list(columns))
    values = zip(*map(row, records), strict=True)
    return pd.DataFrame({name: typed(name, col) for name, col in zip(columns, values, strict=True)})


def typed(name: str, values: tuple) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """One column of record values with the dtype pandas' inference gives them."""
    kinds = set(map(type, values))
    if kinds <= _FLOATS or (kinds <= _NUMBERS and int in kinds and len(kinds) > 1):
        return np.array(values, dtype=np.float64)
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:  # pandas keeps such ints as objects or unsigned: its own inference decides
            return _inferred(name, values)
    if kinds == {str}:
        return pd.array(values, dtype="str")
    if kinds == {_NONE}:
        return np.array(values, dtype=object)
    if _NONE in kinds and kinds <= _WITH_NONE:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return _inferred(name, values)


def _inferred(name: str, values: tuple) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """pandas' inference of one column of rows (timestamps, booleans, mixed kinds)."""
    return pd.DataFrame([(v,) for v in values], columns=[name])[name].array
