"""DEEP.LOG-style text and PNG pictures for ``neuronet deep`` (spec dbn.md §6.9, §6.10).

Every file is written to a temporary name next to the target and moved into place, so an interrupted
run never leaves a half-written log or picture.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from nn.dbn import DBN


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DeepLog:
    """Lines accumulated in order and rewritten to disk after each section (a crash keeps what was done)."""

    def __init__(self, path: Path) -> None:
        self.path, self.lines = path, [f"neuronet deep, {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", ""]

    def add(self, *lines: str) -> None:
        self.lines += list(lines)

    def flush(self) -> None:
        write_atomic(self.path, "\n".join(self.lines) + "\n")


def variable_table(names: list[str], x: np.ndarray) -> list[str]:
    out = [f"{'Variable':<20s}{'Mean':>14s}{'StdDev':>14s}"]
    out += [f"{n:<20s}{m:14.5f}{s:14.5f}" for n, m, s in zip(names, x.mean(0), x.std(0), strict=True)]
    return out


def parameter_block(title: str, obj) -> list[str]:
    return [title] + [f"  {f.name:<22s} {getattr(obj, f.name)}" for f in fields(obj)
                      if f.name not in ("rbm", "n_hidden")]


def weight_tables(model: DBN, inputs: list[str], targets: list[str]) -> list[str]:
    out = ["Trained weights for this model, predicting the following target(s):", *targets,
           "(weights refer to inputs rescaled 0-1 over their training min/max)"]
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
    out = ["Confusion matrix (row is true class, column is predicted class): count / row % / total %"]
    for i in range(k):
        row = m[i]
        out.append(f"{i + 1:>4d} " + "".join(f"{c:9d}" for c in row))
        out.append("     " + "".join(f"{100 * c / max(1, row.sum()):9.2f}" for c in row))
        out.append("     " + "".join(f"{100 * c / n:9.2f}" for c in row))
    out.append(f"Total misclassification = {100 * (1 - np.trace(m) / n):.4f} percent")
    return m, out


def image_grid(path: Path, images: np.ndarray, shape: tuple[int, int], cols: int, title: str,
               signed: bool = False) -> None:
    """Save ``images (N, rows·cols)`` as a grid PNG; ``signed`` scales each around 0 (weights)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(images)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(1.2 * cols, 1.2 * rows + 0.4), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, img in zip(axes.ravel(), images, strict=False):
        img = img.reshape(shape)
        if signed:
            lim = max(float(np.abs(img).max()), 1e-12)
            ax.imshow(img, cmap="gray", vmin=-lim, vmax=lim)
        else:
            ax.imshow(img, cmap="gray", vmin=0.0, vmax=1.0)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=80)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
