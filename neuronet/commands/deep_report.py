"""DEEP.LOG-style text and PNG pictures for ``neuronet deep`` (spec dbn.md §6.9, §6.10).

Every file is written to a temporary name next to the target and moved into place (``neuronet.atomic``),
so an interrupted run never leaves a half-written log or picture, with the usual permissions (0644 under
the usual umask: logs and pictures are meant to be shared). Each file says it is ours (a log's first line,
a PNG's ``Software`` text chunk), so a later run may replace it without ``--force`` while a file of the
user's is never overwritten unasked (``is_ours``).
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from neuronet.atomic import replace_atomically
from neuronet.commands.errors import CommandError
from nn.dbn import DBN

SIGNATURE = "neuronet deep"  # first words of every log; the Software text of every picture
_PNG = b"\x89PNG\r\n\x1a\n"
_PNG_TAG = b"tEXtSoftware\x00" + SIGNATURE.encode()
CMAPS = ("gray", "cyan-red")  # besides any Matplotlib colour map name


def write_text(path: Path, text: str) -> None:
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, lambda f: f.write(data))


def is_ours(path: Path) -> bool:
    """Whether the existing file ``path`` was written by ``neuronet deep`` (a log or a picture)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(_PNG):
        return _PNG_TAG in head
    return head.startswith(SIGNATURE.encode())


class DeepLog:
    """Lines accumulated in order and rewritten to disk after each section, and at least every
    ``FLUSH_EVERY_S`` seconds while lines keep coming (a crash or a kill keeps what was done)."""

    FLUSH_EVERY_S = 10.0

    def __init__(self, path: Path, command: str) -> None:
        self.path = path
        self.lines = [f"{SIGNATURE} {command}, {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", ""]
        self.flushed_at = time.monotonic()

    def add(self, *lines: str) -> None:
        self.lines += list(lines)
        if time.monotonic() - self.flushed_at > self.FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        write_text(self.path, "\n".join(self.lines) + "\n")
        self.flushed_at = time.monotonic()


def variable_table(stats: list[tuple[str, float, float]]) -> list[str]:
    out = ["Means and standard deviations...", f"{'Variable':<20s}{'Mean':>14s}{'StdDev':>14s}"]
    out += [f"{n:<20s}{m:14.5f}{s:14.5f}" for n, m, s in stats]
    return out


def weight_tables(model: DBN, inputs: list[str], targets: list[str]) -> list[str]:
    out = [
        "Trained weights for this model, predicting the following target(s):",
        *targets,
        "(weights refer to inputs rescaled 0-1 over their training min/max)",
    ]
    names = inputs
    for k, layer in enumerate(model.layers):
        cols = min(10, layer.w.shape[0])
        out += ["", f"Weights for unsupervised hidden layer {k + 1} (first {cols} neurons)"]
        out.append(f"{'':<16s}" + "".join(f"{j + 1:>11d}" for j in range(cols)))
        out.append(f"{'Q mean':<16s}" + "".join(f"{v:11.4f}" for v in layer.q_mean[:cols]))
        out.append(f"{'skewness':<16s}" + "".join(f"{v:11.4f}" for v in layer.skewness[:cols]))
        for i, name in enumerate(names):
            out.append(f"{name[:15]:<16s}" + "".join(f"{v:11.4f}" for v in layer.w[:cols, i]))
        out.append(f"{'BIAS':<16s}" + "".join(f"{v:11.4f}" for v in layer.c[:cols]))
        names = [f"Unsupervised output {j + 1}" for j in range(layer.w.shape[0])]
    w, b = model.head.layers[-1]
    if len(model.head.layers) > 1:  # the output reads the last supervised hidden layer
        names = [f"Supervised hidden {j + 1}" for j in range(w.shape[1])]
    out += ["", "Weights for final (output) layer"]
    for k, target in enumerate(targets):
        out.append(f"Target {k + 1} of {len(targets)}: {target}")
        out += [f"  {name[:24]:<26s}{v:12.6f}" for name, v in zip(names, w[k], strict=False)]
        out.append(f"  {'CONSTANT':<26s}{b[k]:12.6f}")
    return out


def confusion(pred: np.ndarray, true: np.ndarray, k: int) -> tuple[np.ndarray, list[str]]:
    """Counts (rows true, columns predicted) and DEEP's three-row layout with the total misclassification."""
    m = np.zeros((k, k), dtype=np.int64)
    np.add.at(m, (true, pred), 1)
    n = max(1, len(true))
    out = [
        "Confusion matrix (row is true class, column is predicted class): count / row % / total %",
        "     " + "".join(f"{j + 1:>9d}" for j in range(k)),
    ]
    for i in range(k):
        row = m[i]
        out.append(f"{i + 1:>4d} " + "".join(f"{c:9d}" for c in row))
        out.append("     " + "".join(f"{100 * c / max(1, row.sum()):9.2f}" for c in row))
        out.append("     " + "".join(f"{100 * c / n:9.2f}" for c in row))
    out.append(f"Total misclassification = {100 * (1 - np.trace(m) / n):.4f} percent")
    return m, out


def check_cmap(name: str) -> str:
    """``gray``, ``cyan-red`` or a Matplotlib colour map name; anything else is a one-line error."""
    import matplotlib

    if name in CMAPS or name in matplotlib.colormaps:
        return name
    raise CommandError(
        f"--cmap {name!r}: not a colour map; use gray, cyan-red or a Matplotlib name such as RdBu"
    )


def _rgb(values: np.ndarray, dropped: np.ndarray, signed: bool, cmap: str) -> np.ndarray:
    """``values (P,)`` -> ``(P, 3)`` colours. Signed values (weights) are scaled by their largest magnitude:
    gray runs black (negative) to white (positive), DEEP's colour display is cyan for positive and red for
    negative with brightness ∝ |w|; probabilities map 0..1. Dropped (constant) inputs are mid-gray."""
    import matplotlib

    if signed:
        u = values / max(float(np.abs(values[~dropped]).max(initial=0.0)), 1e-12)  # in [-1, 1]
    else:
        u = 2.0 * values - 1.0
    if cmap == "cyan-red":
        pos, neg = np.clip(u, 0.0, 1.0), np.clip(-u, 0.0, 1.0)
        rgb = np.stack([neg, pos, pos], axis=1)
    elif cmap == "gray":
        rgb = np.repeat(((u + 1.0) / 2.0)[:, None], 3, axis=1)
    else:
        rgb = matplotlib.colormaps[cmap]((u + 1.0) / 2.0)[:, :3]
    rgb[dropped] = 0.5
    return rgb


def image_grid(
    path: Path,
    images: np.ndarray,
    dropped: np.ndarray,
    shape: tuple[int, int],
    cols: int,
    title: str,
    *,
    signed: bool = False,
    cmap: str = "gray",
) -> None:
    """Save ``images (N, rows·cols)`` as a grid PNG; ``dropped (rows·cols,)`` marks inputs the model does
    not use (drawn mid-gray); ``signed`` scales each image around 0 (weights)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(images)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(1.2 * cols, 1.2 * rows + 0.4), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for ax, img in zip(axes.ravel(), images, strict=False):
        ax.set_xticks([])  # a thin frame keeps white and black cells apart from the page
        ax.set_yticks([])
        rgb = _rgb(np.asarray(img, dtype=np.float64), dropped, signed, cmap)
        ax.imshow(rgb.reshape(*shape, 3), interpolation="nearest", aspect="auto" if shape[0] == 1 else None)
    fig.suptitle(title, fontsize=9)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=80, metadata={"Software": SIGNATURE})
    finally:
        plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, lambda f: f.write(buf.getvalue()))
