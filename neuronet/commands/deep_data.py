"""Data for ``neuronet deep``: numeric tables, MNIST IDX files, candle features; DEEP's input scaling.

Tables (spec dbn.md §6.2): a header line of variable names, then one case per line, delimited by commas,
spaces or tabs, no missing values. Inputs and targets are chosen by name or 1-based column number
(``RAND1,RAND2``, ``2-7``). MNIST: IDX images (magic 2051) and labels (magic 2049, ten one-hot targets).
Candles: the Fractal EA's causal bar features over a window of bars, targets its three fractal classes.
Inputs feeding an RBM are min/max scaled to [0, 1] over the training set, or split at their training mean
("binary splits"); constant inputs are dropped (§6.4). Test data outside the training range is clipped
to [0, 1] (a decision: the RBM needs [0, 1]).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from datafeeds.files import read_csv_file
from neuronet.commands.errors import CommandError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass
class Dataset:
    x: np.ndarray  # (N, V) raw inputs
    t: np.ndarray  # (N, K) targets
    inputs: list[str]
    targets: list[str]
    image_shape: tuple[int, int] | None = None
    classifier: bool = False  # the source's default model type


def _pick(spec: str | None, names: list[str], what: str, path: Path) -> list[int]:
    """Column indices for ``spec``: names or 1-based numbers, comma-separated, ``a-b`` ranges of numbers."""
    if not spec:
        return []
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part in names:
            out.append(names.index(part))
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise CommandError(f"{path}: {what} {part!r} is neither a column name nor a column number")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= lo <= hi <= len(names):
            raise CommandError(f"{path}: {what} columns {part} outside 1-{len(names)}")
        out += list(range(lo - 1, hi))
    return out


def read_table(path: Path, inputs: str | None, targets: str | None) -> Dataset:
    """A numeric table; inputs default to every column that is not a target."""
    frame = read_csv_file(path, "table", sep=r"[,\s]+", engine="python")
    names = [str(c) for c in frame.columns]
    for name in names:
        if not _NAME.match(name):
            raise CommandError(f"{path}: variable name {name!r} must start with a letter and hold only "
                             "letters, digits and _")
    values = frame.apply(pd.to_numeric, errors="coerce")
    bad = values.isna().to_numpy()
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise CommandError(f"{path}: line {r + 2}, variable {names[c]!r}: missing or not a number "
                         f"({frame.iat[r, c]!r})")
    tcols = _pick(targets, names, "target", path)
    if not tcols:
        raise CommandError(f"{path}: choose the target column(s) with --targets (names or numbers)")
    icols = _pick(inputs, names, "input", path) or [i for i in range(len(names)) if i not in tcols]
    if not icols:
        raise CommandError(f"{path}: no input columns left")
    data = values.to_numpy(dtype=np.float64)
    return Dataset(data[:, icols], data[:, tcols], [names[i] for i in icols], [names[i] for i in tcols])


def _idx(path: Path, magic: int) -> tuple[list[int], bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    if len(raw) < 8 or struct.unpack(">i", raw[:4])[0] != magic:
        raise CommandError(f"{path}: not an IDX file with magic number {magic}")
    ndim = 3 if magic == 2051 else 1
    dims = list(struct.unpack(f">{ndim}i", raw[4:4 + 4 * ndim]))
    body = raw[4 + 4 * ndim:]
    if any(d <= 0 for d in dims) or len(body) != int(np.prod(dims)):
        raise CommandError(f"{path}: IDX header says {dims} but the file holds {len(body)} bytes of data")
    return dims, body


def read_mnist(images: Path, labels: Path | None) -> Dataset:
    """Pixels ``P_row_col`` (0-255) and, with a label file, one-hot targets ``Label_0..Label_9``."""
    (n, rows, cols), body = _idx(images, 2051)
    if rows * cols > 4086:
        raise CommandError(f"{images}: {rows} x {cols} images exceed DEEP's 4086 inputs")
    x = np.frombuffer(body, dtype=np.uint8).reshape(n, rows * cols).astype(np.float64)
    names = [f"P_{r}_{c}" for r in range(rows) for c in range(cols)]
    t = np.zeros((n, 10))
    if labels is not None:
        (m,), lab = _idx(labels, 2049)
        if m != n:
            raise CommandError(f"{labels}: {m} labels for {n} images in {images}")
        y = np.frombuffer(lab, dtype=np.uint8)
        if y.max() > 9:
            raise CommandError(f"{labels}: label {int(y.max())} outside 0-9")
        t[np.arange(n), y] = 1.0
    return Dataset(x, t, names, [f"Label_{d}" for d in range(10)], (rows, cols), True)


def read_candles(source: str, depth: int, rule: str = "3bar") -> Dataset:
    """Windows of ``depth`` bars of the Fractal EA's 12 features; targets one-hot fractal classes.

    ``source`` is ``sample`` (the embedded EURUSD H1 candles) or a MetaTrader CSV file. Bars whose label
    needs future bars that do not exist are dropped (no look-ahead, no guessed labels).
    """
    from datafeeds import load_candles
    from strategies.features import CLASSES, FEATURES, UNKNOWN, bar_features, fractal_labels, windows

    df = load_candles() if source == "sample" else load_candles("csv", path=source)
    feats = bar_features(df["open"], df["high"], df["low"], df["close"], df["tick_volume"], df.index)
    x, rows = windows(feats, depth)
    labels = fractal_labels(df["high"].to_numpy(), df["low"].to_numpy(), rule)[rows]
    keep = labels != UNKNOWN
    names = [f"{f.replace('-', '_').replace('/', '_')}_{lag}" for lag in range(depth - 1, -1, -1)
             for f in FEATURES]
    t = np.eye(len(CLASSES))[labels[keep]]
    return Dataset(x[keep], t, names, [f"class_{c}" for c in CLASSES], None, True)


@dataclass
class Scaling:
    """Min/max scaling to [0, 1] of the non-constant training columns (``keep``), or DEEP's "binary
    splits": 1 where a value exceeds its training mean, else 0."""

    keep: np.ndarray
    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray | None = None  # set for binary splits

    @classmethod
    def fit(cls, x: np.ndarray, binary: bool = False) -> Scaling:
        low, high = x.min(axis=0), x.max(axis=0)
        keep = np.flatnonzero(high > low)
        if keep.size == 0:
            raise CommandError("every input is constant over the training cases: nothing to learn from")
        return cls(keep, low[keep], high[keep], x[:, keep].mean(axis=0) if binary else None)

    def apply(self, x: np.ndarray) -> np.ndarray:
        if self.mean is not None:
            return (x[:, self.keep] > self.mean).astype(np.float64)
        return np.clip((x[:, self.keep] - self.low) / (self.high - self.low), 0.0, 1.0)

    def to_json(self) -> dict:
        out = {"keep": self.keep.tolist(), "low": self.low.tolist(), "high": self.high.tolist()}
        if self.mean is not None:
            out["mean"] = self.mean.tolist()
        return out

    @classmethod
    def from_json(cls, d: dict) -> Scaling:
        mean = np.asarray(d["mean"]) if "mean" in d else None
        return cls(np.asarray(d["keep"], dtype=np.int64), np.asarray(d["low"]), np.asarray(d["high"]), mean)
