"""``neuronet deep test|sample|analyze``: use a trained deep belief net (spec dbn.md §6.8, §6.9).

Test and Analyze evaluate in float64 on the host, as DEEP's Test always runs on the CPU: their figures do
not depend on the device a model was trained on. Generative sampling runs its Gibbs chain on ``--backend``
(``auto``: the best usable OpenCL device, else NumPy with a note).

Pictures: a model trained on images (MNIST) draws each sample or receptive field in its image shape; any
other model draws a strip of its inputs per cell (``--image RxC`` overrides both). Inputs the model dropped
as constant are drawn mid-gray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from neuronet.commands import values
from neuronet.commands.deep_data import Scaling, load_dataset, model_metadata_problem, regular_input
from neuronet.commands.deep_options import (
    Backend,
    Candles,
    Data,
    Force,
    Inputs,
    MaxCases,
    MnistImages,
    MnistLabels,
    Targets,
    check_backend,
    check_output,
    distinct_outputs,
)
from neuronet.commands.deep_report import (
    SIGNATURE,
    check_cmap,
    confusion,
    image_grid,
    write_text,
)
from neuronet.commands.errors import CommandError
from nn.io import load as load_model
from nn.mlfn import raw_error
from nn.rbm_config import SEED_LIMIT

Model = Annotated[Path, typer.Argument(help="Model file from 'deep train'.", parser=values.path)]
Image = Annotated[
    str | None,
    typer.Option(
        help="Picture shape RxC, e.g. 28x28 (default: the model's images, else one strip of inputs per "
        "cell).",
        parser=values.text,
    ),
]
MAX_SIDE, MAX_CELLS = 64, 1024  # a grid of pictures: bounded before any figure is drawn


def _sources(*paths) -> tuple[Path, ...]:
    return tuple(Path(p) for p in paths if p is not None and p != "sample")


def _model(path: Path):
    m = load_model(regular_input(path, "MODEL"), kind="dbn")
    problem = model_metadata_problem(m.metadata, m.n_inputs, m.head.layers[-1][0].shape[0])
    if problem:
        raise CommandError(f"MODEL {path}: not a model of 'neuronet deep train' ({problem})")
    return m


def _model_data(m, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases, need_targets):
    """The data in the model's scaled inputs; a table's columns default to the training columns by name."""
    meta = m.metadata
    depth = int(meta.get("candle_depth") or 4)
    if data is not None and inputs is None and targets is None:
        inputs = ",".join(meta["inputs"])
        targets = ",".join(meta["targets"]) if need_targets else None
    ds = load_dataset(
        data,
        inputs,
        targets,
        mnist_images,
        mnist_labels,
        candles,
        depth,
        max_cases,
        need_targets=need_targets,
    )
    if ds.inputs != meta["inputs"]:
        raise CommandError(
            f"the data's inputs ({len(ds.inputs)}) are not the model's {len(meta['inputs'])} "
            "training inputs in the same order"
        )
    return Scaling.from_json(meta["scaling"]).apply(ds.x), ds


def _header(command: str) -> str:
    from datetime import UTC, datetime

    return f"{SIGNATURE} {command}, {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n\n"


def test(
    model: Model,
    data: Data = None,
    inputs: Inputs = None,
    targets: Targets = None,
    mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None,
    candles: Candles = None,
    max_cases: MaxCases = 0,
    log: Annotated[Path | None, typer.Option(help="Also write the report to this file.")] = None,
    force: Force = False,
) -> None:
    """Evaluate a trained model on (new) data: the criterion, and the confusion matrix of a classifier."""
    inputs_given = _sources(model, data, mnist_images, mnist_labels, candles)
    if log is not None:
        check_output(log, "--log", force=force, inputs=inputs_given)
    m = _model(model)
    x, ds = _model_data(m, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases, True)
    n_out = m.head.layers[-1][0].shape[0]
    if ds.t.shape[1] != n_out:
        raise CommandError(f"the data has {ds.t.shape[1]} targets, the model predicts {n_out}")
    pred = m.predict(x)
    crit = "negative log likelihood" if m.head.classifier else "mean squared error"
    lines = [f"Test of {model} on {len(x)} cases: {crit} = {raw_error(pred, ds.t, m.head.classifier):.6f}"]
    if m.head.classifier:
        lines += confusion(pred.argmax(1), ds.t.argmax(1), ds.t.shape[1])[1]
    else:
        rms = np.sqrt(((pred - ds.t) ** 2).mean(axis=0))
        lines += [
            f"  RMS error of {name}: {v:.6f}" for name, v in zip(m.metadata["targets"], rms, strict=True)
        ]
    text = "\n".join(lines)
    typer.echo(text)
    if log is not None:
        write_text(log, _header("test") + text + "\n")


def _image_shape(meta: dict, n: int, option: str | None) -> tuple[int, int]:
    if option:
        try:
            r, c = (int(v) for v in option.lower().split("x"))
        except ValueError:
            raise CommandError(f"--image {option!r}: must look like 28x28") from None
        if r < 1 or c < 1 or r * c != n:
            raise CommandError(f"--image {option}: pictures of the model's {n} inputs need rows x cols = {n}")
        return r, c
    if meta.get("image_shape"):
        return tuple(meta["image_shape"])
    return 1, n


def _full_inputs(meta: dict, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model-input values ``v (N, kept)`` placed back among all raw inputs ``(N, V)``, and the mask of the
    inputs the model dropped as constant."""
    keep = np.asarray(meta["scaling"]["keep"], dtype=np.int64)
    full = np.zeros((len(v), len(meta["inputs"])))
    full[:, keep] = v
    dropped = np.ones(len(meta["inputs"]), dtype=bool)
    dropped[keep] = False
    return full, dropped


def _png(path: Path, option: str, force: bool, inputs: tuple[Path, ...]) -> Path:
    if path.suffix.lower() != ".png":
        raise CommandError(f"{option} {path}: pictures are PNG files; give a name ending in .png")
    return check_output(path, option, force=force, inputs=inputs)


def sample(
    model: Model,
    out: Annotated[Path, typer.Option(help="PNG of the generated samples.")] = Path("samples.png"),
    chain: Annotated[int, typer.Option(help="Gibbs iterations in the top RBM.")] = 1000,
    rows: int = 4,
    cols: int = 6,
    first_case: Annotated[int, typer.Option(help="1-based start case (with data); 0: random hidden")] = 0,
    data: Data = None,
    inputs: Inputs = None,
    mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None,
    candles: Candles = None,
    image: Image = None,
    backend: Backend = "auto",
    seed: int = 1,
    force: Force = False,
) -> None:
    """Generative samples (Gibbs chain at the top, mean field down) as an image grid."""
    import nn

    if not (1 <= rows <= MAX_SIDE and 1 <= cols <= MAX_SIDE and rows * cols <= MAX_CELLS):
        raise CommandError(
            f"--rows {rows} --cols {cols}: each must be 1-{MAX_SIDE}, at most {MAX_CELLS} cells"
        )
    if not 0 <= chain <= values.MAX_COUNT:
        raise CommandError(f"--chain {chain}: must be 0-{values.MAX_COUNT}")
    if first_case < 0:
        raise CommandError(f"--first-case {first_case}: must be >= 1 (a case), or 0 (random hidden states)")
    if not 0 <= seed < SEED_LIMIT:
        raise CommandError(f"--seed {seed}: must be 0-{SEED_LIMIT - 1}")
    sources = (data, mnist_images, candles)
    if first_case == 0 and any(s is not None for s in sources):
        raise CommandError("data is read only to start chains from cases: give --first-case N")
    if first_case > 0 and all(s is None for s in sources):
        raise CommandError(f"--first-case {first_case} needs the data the cases come from")
    backend = check_backend(backend)
    _png(out, "--out", force, _sources(model, data, mnist_images, mnist_labels, candles))
    m = _model(model)
    meta = m.metadata
    if not m.layers:
        raise CommandError(f"{model}: generative samples need at least one unsupervised layer")
    shape = _image_shape(meta, len(meta["inputs"]), image)
    count = rows * cols
    be = nn.get_backend(backend)
    if first_case > 0:
        x, _ = _model_data(m, data, inputs, None, mnist_images, mnist_labels, candles, 0, False)
        if first_case - 1 + count > len(x):
            raise CommandError(
                f"--first-case {first_case}: {count} cells from there exceed the {len(x)} cases"
            )
        v = m.generate(be, chain, start=x[first_case - 1 : first_case - 1 + count], seed=seed)
    else:
        v = m.generate(be, chain, count=count, seed=seed)
    full, dropped = _full_inputs(meta, v)
    image_grid(out, full, dropped, shape, cols, f"{count} samples, {chain} Gibbs steps")
    typer.echo(f"{count} samples written to {out}")


def analyze(
    model: Model,
    data: Data = None,
    inputs: Inputs = None,
    targets: Targets = None,
    mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None,
    candles: Candles = None,
    max_cases: MaxCases = 0,
    fields: Annotated[Path | None, typer.Option(help="PNG of first-layer receptive fields.")] = None,
    neurons: Annotated[int, typer.Option(help="Receptive fields to draw.")] = 24,
    image: Image = None,
    cmap: Annotated[
        str,
        typer.Option(
            help="Receptive-field colours: gray (white positive, black negative), cyan-red (DEEP's colour "
            "display: cyan positive, red negative, brightness by magnitude) or a Matplotlib map name."
        ),
    ] = "gray",
    activations: Annotated[Path | None, typer.Option(help="Write one neuron's activation per case.")] = None,
    section: Annotated[str, typer.Option(help="unsupervised or supervised")] = "unsupervised",
    layer: int = 1,
    neuron: int = 1,
    log: Annotated[Path | None, typer.Option(help="Also write the tables to this file.")] = None,
    force: Force = False,
) -> None:
    """Visible vs reconstructed means, top-layer activations; receptive fields; activation export."""
    if not 1 <= neurons <= MAX_CELLS // 2:
        raise CommandError(f"--neurons {neurons}: must be 1-{MAX_CELLS // 2}")
    if section not in ("unsupervised", "supervised"):
        raise CommandError(f"--section {section!r}: must be unsupervised or supervised")
    if layer < 1 or neuron < 1:
        raise CommandError(f"--layer {layer} --neuron {neuron}: both count from 1")
    check_cmap(cmap)
    given = _sources(model, data, mnist_images, mnist_labels, candles)
    if fields is not None:
        _png(fields, "--fields", force, given)
    if activations is not None:
        check_output(activations, "--activations", force=force, inputs=given, replace_ours=False)
    if log is not None:
        check_output(log, "--log", force=force, inputs=given)
    distinct_outputs(("--fields", fields), ("--activations", activations), ("--log", log))
    m = _model(model)
    meta = m.metadata
    x, _ = _model_data(m, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases, False)
    if fields is not None and not m.layers:
        raise CommandError("--fields: receptive fields need at least one unsupervised layer")
    shape = _image_shape(meta, len(meta["inputs"]), image) if fields is not None else None
    acts = _activations(m, x, section, layer) if activations is not None else None
    if acts is not None and neuron > acts.shape[1]:
        raise CommandError(f"--neuron {neuron}: that layer has {acts.shape[1]} neurons")
    lines = _tables(m, meta, x)
    typer.echo("\n".join(lines))
    if log is not None:
        write_text(log, _header("analyze") + "\n".join(lines) + "\n")
    if fields is not None:
        w = m.layers[0].w[:neurons]
        full, dropped = _full_inputs(meta, w)
        image_grid(
            fields,
            full,
            dropped,
            shape,
            min(8, len(w)),
            "first-layer receptive fields",
            signed=True,
            cmap=cmap,
        )
        typer.echo(f"receptive fields written to {fields}")
    if acts is not None:
        write_text(activations, "".join(f"{v:.6f}\n" for v in acts[:, neuron - 1]))
        typer.echo(f"{len(acts)} activations written to {activations}")


def _tables(m, meta: dict, x: np.ndarray) -> list[str]:
    """DEEP's Analyze (spec §6.9): each input's mean in the data and in the reconstruction, and each top
    unsupervised neuron's mean activation."""
    if not m.layers:
        return ["No unsupervised layers: nothing to reconstruct"]
    names = [meta["inputs"][i] for i in meta["scaling"]["keep"]]
    rec = m.reconstruct(x)
    lines = [f"{'Variable':<20s}{'Visible':>12s}{'Reconstructed':>15s}"]
    lines += [f"{n:<20s}{a:12.4f}{b:15.4f}" for n, a, b in zip(names, x.mean(0), rec.mean(0), strict=True)]
    top = m.features(x).mean(0)
    lines += ["", f"{'Hidden':<8s}{'Activation':>12s}  (top unsupervised layer)"]
    lines += [f"{k + 1:<8d}{v:12.4f}" for k, v in enumerate(top)]
    return lines


def _activations(m, x: np.ndarray, section: str, layer: int) -> np.ndarray:
    if section == "unsupervised":
        if not layer <= len(m.layers):
            raise CommandError(f"--layer {layer}: the model has {len(m.layers)} unsupervised layers")
        return m.features(x, layer)
    acts = [*m.head.hidden(m.features(x))[1:], m.head.predict(m.features(x))]
    if not layer <= len(acts):
        raise CommandError(f"--layer {layer}: the model has {len(acts)} supervised layers")
    return acts[layer - 1]
