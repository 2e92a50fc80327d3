"""Forecasting data: the long-horizon CSV layout, the literature's splits and sliding windows.

The CSV layout is the one of the long-horizon benchmarks (ETT, Exchange-rate, Weather, ...): a ``date``
column, then numeric channels. Every value is checked when the file is read, because a model trains in
float32: text, gaps, ``inf`` and values beyond float32's range are refused naming the row and column.

Splits (row spans; each later split starts ``seq_len`` rows early so its first window has a full history):
- ``70/10/20``: the Time-Series-Library split of the ATFNet paper's tables (chronological, by rows);
- ``ett-hour`` / ``ett-minute``: the ETT data sets' own split, 12/4/4 months of 30 days by rows (hourly,
  or 15-minute rows for ETTm); rows after the 20 months are not used, as in the published code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from datafeeds.files import read_csv_file
from strategies.errors import ForecastError

FEATURES = ("all", "M", "S", "MS")
SPLITS = ("70/10/20", "ett-hour", "ett-minute")
_MONTH_ROWS = {"ett-hour": 30 * 24, "ett-minute": 30 * 24 * 4}
_F32_MAX = float(np.finfo(np.float32).max)


def read_series(path: Path, target: str, features: str) -> tuple[list[str], np.ndarray]:
    """Read ``path`` -> channel names and ``data (N, C)`` float64, the target channel LAST.

    ``all``/``M``: every channel; ``S``: the target alone; ``MS``: every channel in, the target scored.
    Row numbers in messages are the file's line numbers (the header is line 1).
    """
    if features not in FEATURES:
        raise ForecastError(f"--features must be one of {', '.join(FEATURES)}, got {features!r}")
    frame = read_csv_file(path)
    lower = {str(c).strip().lower(): c for c in frame.columns}
    if "date" not in lower:
        raise ForecastError(f"{path}: no 'date' column; expected the layout date,<channel>,<channel>,...")
    channels = [c for c in frame.columns if c != lower["date"]]
    if target not in channels:
        raise ForecastError(f"{path}: no target column {target!r}; channels: {', '.join(map(str, channels))}")
    for name in channels:
        frame[name] = _numeric(frame[name], name, path)
    names = [target] if features == "S" else [c for c in channels if c != target] + [target]
    return [str(n) for n in names], frame[names].to_numpy(dtype=np.float64)


def _numeric(column: pd.Series, name: str, path: Path) -> pd.Series:
    """The column as floats, or a ValueError naming the first bad row (text, missing, inf, too large)."""
    values = pd.to_numeric(column, errors="coerce")
    raw = values.to_numpy(dtype=np.float64)
    problems = (
        (values.isna().to_numpy() & column.notna().to_numpy(), "is not numeric"),
        (values.isna().to_numpy(), "has a missing value"),
        (np.isinf(raw), "has an infinite value"),
        (np.abs(np.nan_to_num(raw)) > _F32_MAX, "has a value beyond float32's range (3.4e38)"),
    )
    for bad, what in problems:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            text = column.iloc[i]
            shown = repr(text) if isinstance(text, str) else f"{float(text):g}"
            raise ForecastError(f"{path}: channel {name!r} {what} at row {i + 2}: {shown}")
    return values


def split_spans(
    n: int, seq_len: int, pred_len: int, split: str = "70/10/20", origin: object = "the data"
) -> list[tuple[int, int]]:
    """Row spans ``[(a, b)]`` of train/val/test for ``n`` rows; val and test start ``seq_len`` early."""
    if split == "70/10/20":
        n_train, n_test = int(n * 0.7), int(n * 0.2)
        borders = (n_train, n - n_test, n)
    elif split in _MONTH_ROWS:
        month = _MONTH_ROWS[split]
        borders = (12 * month, 16 * month, 20 * month)
        if n < borders[2]:
            raise ForecastError(
                f"{origin}: {n} rows are too short for --split {split}: it takes 12/4/4 months of "
                f"{month} rows each ({borders[2]} rows)"
            )
    else:
        raise ForecastError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    spans = [(0, borders[0]), (borders[0] - seq_len, borders[1]), (borders[1] - seq_len, borders[2])]
    if min(a for a, _ in spans) < 0 or any(b - a < seq_len + pred_len for a, b in spans):
        need = int(np.ceil((seq_len + pred_len) / 0.1))  # the 10% validation split must hold one window
        raise ForecastError(
            f"{origin}: {n} rows are too short for seq_len={seq_len} + pred_len={pred_len}: every split of "
            f"the {split} protocol needs one full window (about {need} rows); lower --seq-len/--pred-len"
        )
    return spans


def sliding_windows(
    data: np.ndarray, seq_len: int, pred_len: int, start: int = 0, stop: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``data (N, C)`` rows ``[start, stop)`` -> ``X (M, seq_len, C)``, ``Y (M, pred_len, C)``.

    Window ``m`` sees rows ``start+m .. start+m+seq_len-1`` and targets the next ``pred_len`` rows;
    ``M = stop − start − seq_len − pred_len + 1`` (0 when the span is too short).
    """
    stop = len(data) if stop is None else stop
    m = stop - start - seq_len - pred_len + 1
    c = data.shape[1]
    if m <= 0:
        return np.zeros((0, seq_len, c)), np.zeros((0, pred_len, c))
    span = data[start:stop]
    win = np.lib.stride_tricks.sliding_window_view(span, seq_len + pred_len, axis=0)  # (M, C, L+T)
    win = np.transpose(win[:m], (0, 2, 1))  # (M, L+T, C)
    return np.ascontiguousarray(win[:, :seq_len]), np.ascontiguousarray(win[:, seq_len:])
