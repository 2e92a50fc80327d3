"""Numbers read from text tables that feed a network: finite, and representable in float32.

A forecasting CSV (``date`` plus numeric channels) is read as float64 but trained on float32 devices: an
``inf``, or a value beyond float32's range (about 3.4e38), becomes ``inf`` there and every loss turns to NaN
many minutes later. ``require_float32`` refuses such a table when it is read, naming the row and column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from datafeeds.errors import CandleDataError, DataError

FLOAT32_MAX = float(np.finfo(np.float32).max)


def require_float32(values: np.ndarray, columns: Sequence[str], origin: str, *, first_row: int = 2) -> None:
    """Raise ``CandleDataError`` for the first value of ``values (N, C)`` that is NaN, infinite or beyond
    float32's range; rows are numbered from ``first_row`` (2: the line after a CSV's header)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != len(columns):
        raise DataError(f"values {values.shape} do not match {len(columns)} columns")
    bad = ~(np.abs(values) <= FLOAT32_MAX)  # NaN compares False: caught too
    if not bad.any():
        return
    row, col = (int(i) for i in np.argwhere(bad)[0])
    value = values[row, col]
    why = (
        "is not a number"
        if np.isnan(value)
        else ("is infinite" if np.isinf(value) else f"overflows float32 (largest {FLOAT32_MAX:.4g})")
    )
    raise CandleDataError(
        origin, f"row {row + first_row}, column {columns[col]!r}: {value!r} {why}; fix or drop that row"
    )
