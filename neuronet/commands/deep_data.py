"""Data for ``neuronet deep``: numeric tables, MNIST IDX files, candle features; DEEP's input scaling.

Tables (spec dbn.md §6.2): a header line of variable names, then one case per line, delimited by commas,
spaces or tabs, no missing values. Inputs and targets are chosen by name or 1-based column number
(``RAND1,RAND2``, ``2-7``). MNIST: IDX images (magic 2051) and labels (magic 2049, ten one-hot targets),
plain or gzipped as they are distributed (recognised by the gzip magic bytes, not the name). Candles: the
Fractal EA's causal bar features over a window of bars, targets its three fractal classes.
Inputs feeding an RBM are min/max scaled to [0, 1] over the training set, or split at their training mean
("binary splits"); constant inputs are dropped (§6.4). Test data outside the training range is clipped
to [0, 1] (a decision: the RBM needs [0, 1]).

Every file is checked before it is read: a regular file (not a folder, a device such as ``/dev/zero``, or a
FIFO that would block forever), and an IDX file's declared sizes against what it holds and against the
memory available, before the data is read.
"""

from __future__ import annotations

import gzip
import math
import re
import stat
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from datafeeds.files import read_csv_file
from neuronet.commands.errors import CommandError, CommandOSError
from nn.dbn_config import byte_size

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SEP = r"[,\s]+"  # DEEP's delimiters: commas, spaces or tabs
MNIST_MAX_INPUTS = 4086  # DEEP's limit: 4096 columns less ten labels
MAX_DEPTH = 1000  # bars per --candles window


@dataclass
class Dataset:
    x: np.ndarray  # (N, V) raw inputs
    t: np.ndarray  # (N, K) targets; (N, 0) when the source has none (images without labels)
    inputs: list[str]
    targets: list[str]
    image_shape: tuple[int, int] | None = None
    classifier: bool = False  # the source's default model type
    origin: str = ""  # "found N variables in ..." for the log
    variables: list[tuple[str, float, float]] = field(default_factory=list)  # every variable read: mean, SD


def regular_input(path: Path, what: str) -> Path:
    """``path`` if it names a readable regular file (symbolic links followed), else a one-line error naming
    ``what`` (the option or argument): a folder, a device or a FIFO is never opened."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise CommandOSError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise CommandOSError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CommandOSError(f"{what} {path}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise CommandOSError(f"{what} {path}: not a regular file (a device, FIFO or socket is never read)")
    return path


def check_memory(n_bytes: int, what: str) -> None:
    """Refuse to build ``n_bytes`` of arrays when the host has less memory available now."""
    import psutil

    have = psutil.virtual_memory().available
    if n_bytes > have:
        raise CommandError(f"{what} needs about {byte_size(n_bytes)} of memory; {byte_size(have)} available")


def variable_stats(names: list[str], x: np.ndarray) -> list[tuple[str, float, float]]:
    """``(name, mean, standard deviation)`` of each column of ``x (N, V)``: the log's variable table."""
    return [(n, float(m), float(s)) for n, m, s in zip(names, x.mean(0), x.std(0), strict=True)]


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
            raise CommandError(f"--{what}s {part!r}: neither a column name nor a column number of {path}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= lo <= hi <= len(names):
            raise CommandError(f"--{what}s {part}: outside columns 1-{len(names)} of {path}")
        out += list(range(lo - 1, hi))
    return out


def read_table(path: Path, inputs: str | None, targets: str | None, *, need_targets: bool = True) -> Dataset:
    """A numeric table; inputs default to every column that is not a target. Without ``need_targets``
    (analysis, sampling) the targets may be absent from the file."""
    frame = read_csv_file(regular_input(path, "data file"), "table", sep=_SEP, engine="python")
    names = [str(c) for c in frame.columns]
    with path.open(encoding="utf-8", errors="replace") as f:  # as written: pandas renames a repeated A to A.1
        written = [n for n in re.split(_SEP, f.readline(1 << 20).strip()) if n]
    for name in written:
        if not _NAME.match(name):
            raise CommandError(
                f"{path}: variable name {name!r} must start with a letter and hold only letters, digits and _"
            )
        if written.count(name) > 1:
            raise CommandError(f"{path}: variable name {name!r} appears twice in the header")
    values = frame.apply(pd.to_numeric, errors="coerce")
    bad = values.isna().to_numpy() | ~np.isfinite(values.to_numpy(dtype=np.float64))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise CommandError(
            f"{path}: line {r + 2}, variable {names[c]!r}: missing or not a finite number "
            f"({frame.iat[r, c]!r})"
        )
    if len(frame) == 0:
        raise CommandError(f"{path}: the table holds no cases")
    tcols = _pick(targets, names, "target", path)
    if not tcols and need_targets:
        raise CommandError(f"{path}: choose the target column(s) with --targets (names or numbers)")
    icols = _pick(inputs, names, "input", path) or [i for i in range(len(names)) if i not in tcols]
    if not icols:
        raise CommandError(f"{path}: no input columns left")
    data = values.to_numpy(dtype=np.float64)
    return Dataset(
        data[:, icols],
        data[:, tcols],
        [names[i] for i in icols],
        [names[i] for i in tcols],
        origin=f"Found {len(names)} variables in input file {path}",
        variables=variable_stats(names, data),
    )


def _idx(path: Path, magic: int, option: str) -> tuple[list[int], bytes]:
    """An IDX file's dimensions and its data bytes (big-endian header: magic, then one int32 per dimension),
    plain or gzipped. Declared sizes are checked against the file (or the stream) and the memory available
    before the data is read: a header that lies never makes us allocate what it claims."""
    regular_input(path, option)
    ndim = 3 if magic == 2051 else 1
    head_size = 4 + 4 * ndim
    packed = False
    try:
        with path.open("rb") as raw:
            packed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            f = gzip.GzipFile(fileobj=raw) if packed else raw
            head = f.read(head_size)
            if len(head) < head_size or struct.unpack(">i", head[:4])[0] != magic:
                raise CommandError(
                    f"{option} {path}: not an IDX file with magic number {magic}"
                    f"{' (after gunzip)' if packed else ''}"
                )
            dims = list(struct.unpack(f">{ndim}i", head[4:]))
            if any(d <= 0 for d in dims):
                raise CommandError(f"{option} {path}: IDX header declares sizes {dims}")
            size = math.prod(dims)
            if not packed and path.stat().st_size - head_size != size:
                raise CommandError(
                    f"{option} {path}: IDX header says {dims} ({size} bytes of data) but the "
                    f"file holds {path.stat().st_size - head_size}"
                )
            check_memory(9 * size, f"{option} {path} ({' x '.join(map(str, dims))})")  # bytes + float64
            body = f.read(size + 1)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, CommandError | CommandOSError):
            raise
        raise CommandError(
            f"{option} {path}: not a readable {'gzip' if packed else 'IDX'} file ({exc})"
        ) from None
    if len(body) != size:
        raise CommandError(
            f"{option} {path}: IDX header says {dims} ({size} bytes of data) but the "
            f"{'stream' if packed else 'file'} holds {'more' if len(body) > size else len(body)}"
        )
    return dims, body


def read_mnist(images: Path, labels: Path | None) -> Dataset:
    """Pixels ``P_row_col`` (0-255) and, with a label file, one-hot targets ``Label_0..Label_9``."""
    (n, rows, cols), body = _idx(images, 2051, "--mnist-images")
    if rows * cols > MNIST_MAX_INPUTS:
        raise CommandError(
            f"--mnist-images {images}: {rows} x {cols} images exceed DEEP's {MNIST_MAX_INPUTS} inputs"
        )
    x = np.frombuffer(body, dtype=np.uint8).reshape(n, rows * cols).astype(np.float64)  # (N, rows·cols)
    names = [f"P_{r}_{c}" for r in range(rows) for c in range(cols)]
    t = np.zeros((n, 0))
    if labels is not None:
        (m,), lab = _idx(labels, 2049, "--mnist-labels")
        if m != n:
            raise CommandError(f"--mnist-labels {labels}: {m} labels for {n} images in {images}")
        y = np.frombuffer(lab, dtype=np.uint8)
        if y.max() > 9:
            raise CommandError(f"--mnist-labels {labels}: label {int(y.max())} outside 0-9")
        t = np.eye(10)[y]
    target_names = [f"Label_{d}" for d in range(10)] if labels is not None else []
    origin = f"MNIST: {n} images of {rows} x {cols} in {images}" + (f", labels in {labels}" if labels else "")
    return Dataset(x, t, names, target_names, (rows, cols), True, origin)


def read_candles(source: str, depth: int, rule: str = "3bar") -> Dataset:
    """Windows of ``depth`` bars of the Fractal EA's 12 features; targets one-hot fractal classes.

    ``source`` is ``sample`` (the embedded EURUSD H1 candles) or a MetaTrader CSV file. Bars whose label
    needs future bars that do not exist are dropped (no look-ahead, no guessed labels).
    """
    from datafeeds import load_candles
    from strategies.features import CLASSES, FEATURES, UNKNOWN, bar_features, fractal_labels, windows

    if source == "sample":
        df = load_candles()
    else:
        df = load_candles("csv", path=str(regular_input(Path(source), "--candles")))
    feats = bar_features(df["open"], df["high"], df["low"], df["close"], df["tick_volume"], df.index)
    check_memory(8 * len(df) * depth * feats.shape[1], f"--depth {depth} over {len(df)} bars")
    x, rows = windows(feats, depth)
    labels = fractal_labels(df["high"].to_numpy(), df["low"].to_numpy(), rule)[rows]
    keep = labels != UNKNOWN
    names = [
        f"{f.replace('-', '_').replace('/', '_')}_{lag}" for lag in range(depth - 1, -1, -1) for f in FEATURES
    ]
    t = np.eye(len(CLASSES))[labels[keep]]
    origin = f"Candles: {len(df)} bars of {source}, windows of {depth} bars"
    return Dataset(x[keep], t, names, [f"class_{c}" for c in CLASSES], None, True, origin)


def load_dataset(
    data: Path | None,
    inputs: str | None,
    targets: str | None,
    mnist_images: Path | None,
    mnist_labels: Path | None,
    candles: str | None,
    depth: int,
    max_cases: int,
    *,
    need_targets: bool,
) -> Dataset:
    """The one data source given (a table, MNIST files or candles), cut to ``max_cases``. Options that do
    not apply to it, and a training or test source without targets, are one-line errors."""
    given = [v for v in (data, mnist_images, candles) if v is not None]
    if len(given) != 1:
        raise CommandError("give exactly one data source: a table file, --mnist-images or --candles")
    if mnist_labels is not None and mnist_images is None:
        raise CommandError("--mnist-labels goes with --mnist-images")
    if (inputs is not None or targets is not None) and data is None:
        raise CommandError("--inputs/--targets choose the columns of a table file")
    if max_cases < 0:
        raise CommandError(f"--max-cases {max_cases}: must be >= 0 (0: all cases)")
    if not 1 <= depth <= MAX_DEPTH:
        raise CommandError(f"--depth {depth}: must be 1-{MAX_DEPTH} bars")
    if mnist_images is not None and mnist_labels is None and need_targets:
        raise CommandError(
            f"--mnist-images {mnist_images} needs --mnist-labels: without labels there is nothing to classify"
        )
    if data is not None:
        ds = read_table(data, inputs, targets, need_targets=need_targets)
    elif mnist_images is not None:
        ds = read_mnist(mnist_images, mnist_labels)
    else:
        ds = read_candles(candles, depth)
    if max_cases:
        ds.x, ds.t = ds.x[:max_cases], ds.t[:max_cases]
    if len(ds.x) == 0:
        raise CommandError("the data source holds no cases")
    return ds


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


def _names(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(n, str) for n in value)


def _reals(value: object, n: int) -> bool:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.shape == (n,) and bool(np.isfinite(a).all())


def model_metadata_problem(meta: dict, n_model_inputs: int, n_outputs: int) -> str | None:
    """What is wrong with a model file's ``neuronet deep`` metadata (input and target names, scaling, image
    shape, candle depth) for a net of ``n_model_inputs`` inputs and ``n_outputs`` outputs; None if nothing.

    The metadata is JSON the file carries beside the checked arrays: a file from elsewhere (another tool's
    DBN, an edited header) must be refused in one line before its values index or reshape anything."""
    inputs, targets, scaling = meta.get("inputs"), meta.get("targets"), meta.get("scaling")
    if not _names(inputs):
        return "no input names"
    if not _names(targets) or len(targets) != n_outputs:
        return f"target names do not match the model's {n_outputs} outputs"
    if not isinstance(scaling, dict):
        return "no input scaling"
    keep = scaling.get("keep")
    if (
        not isinstance(keep, list)
        or len(keep) != n_model_inputs
        or len(set(map(str, keep))) != len(keep)
        or not all(isinstance(i, int) and 0 <= i < len(inputs) for i in keep)
    ):
        return f"the scaling's kept inputs do not fit {n_model_inputs} model inputs of {len(inputs)}"
    if not (_reals(scaling.get("low"), len(keep)) and _reals(scaling.get("high"), len(keep))):
        return "the scaling's low/high values are missing or not finite"
    if not (np.asarray(scaling["high"]) > np.asarray(scaling["low"])).all():
        return "the scaling's high values are not above its low values"
    if "mean" in scaling and not _reals(scaling["mean"], len(keep)):
        return "the scaling's means are missing or not finite"
    shape = meta.get("image_shape")
    if shape is not None and not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(v, int) and v >= 1 for v in shape)
        and shape[0] * shape[1] == len(inputs)
    ):
        return f"image shape {shape!r} does not hold {len(inputs)} inputs"
    depth = meta.get("candle_depth")
    if depth is not None and not (isinstance(depth, int) and 1 <= depth <= MAX_DEPTH):
        return f"candle depth {depth!r} outside 1-{MAX_DEPTH}"
    return None
