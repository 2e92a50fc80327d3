"""``neuronet deep train|test|sample|analyze``: Masters' DEEP workflow (spec dbn.md §6) from the shell.

    neuronet deep train data.csv --targets RAND1,RAND2,RAND3 --inputs 2-7 --layers 5 --classifier
    neuronet deep train --mnist-images train-images-idx3-ubyte --mnist-labels train-labels-idx1-ubyte
    neuronet deep test model.dbn test.csv            # criterion, confusion matrix for classifiers
    neuronet deep sample model.dbn --out samples.png --chain 1000
    neuronet deep analyze model.dbn data.csv --fields fields.png --activations act.txt

Defaults are the book's (RBM: 50 random tries, 24 batches, CD 1 -> 4 at rate 0.005, learning rate 0.05,
momentum 0.1 -> 0.9, penalties 1e-4 / 1e-3 toward 0.1; supervised: 100 annealing tries, CG 1000 / 5e-5,
fine-tune 2000 / 1e-5), except ``--epochs`` (the book's backstop is 10000).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from tqdm import tqdm

from neuronet.commands.deep_data import Dataset, Scaling, read_candles, read_mnist, read_table
from neuronet.commands.deep_report import (
    DeepLog,
    confusion,
    image_grid,
    parameter_block,
    variable_table,
    weight_tables,
    write_atomic,
)
from neuronet.commands.errors import CommandError
from nn.dbn import DBNConfig, train_dbn
from nn.io import load as load_model
from nn.io import save as save_model
from nn.mlfn import raw_error
from nn.rbm import RBMConfig

app = typer.Typer(help="Deep belief nets (Masters' DEEP): train, test, sample, analyze.",
                  no_args_is_help=True)

Data = Annotated[Path | None, typer.Argument(help="Numeric table: a header of names, then cases.")]
Inputs = Annotated[str | None, typer.Option(help="Input columns: names or 1-based numbers, e.g. 2-7,X.")]
Targets = Annotated[str | None, typer.Option(help="Target columns (a classifier's class is the largest).")]
MnistImages = Annotated[Path | None, typer.Option(help="MNIST IDX image file instead of a table.")]
MnistLabels = Annotated[Path | None, typer.Option(help="MNIST IDX label file (ten one-hot targets).")]
Candles = Annotated[str | None, typer.Option(help="'sample' or a MetaTrader CSV: fractal classes of bars.")]
Depth = Annotated[int, typer.Option(help="Bars per input window for --candles.")]
MaxCases = Annotated[int, typer.Option(help="Use only the first N cases (0: all).")]
Backend = Annotated[str, typer.Option(help="opencl (default device) or numpy (float64 reference).")]


def _load(data, inputs, targets, mnist_images, mnist_labels, candles, depth, max_cases) -> Dataset:
    given = sum(v is not None for v in (data, mnist_images, candles))
    if given != 1:
        raise CommandError("give exactly one data source: a table file, --mnist-images or --candles")
    if data is not None:
        ds = read_table(data, inputs, targets)
    elif mnist_images is not None:
        ds = read_mnist(mnist_images, mnist_labels)
    else:
        ds = read_candles(candles, depth)
    if max_cases < 0:
        raise CommandError(f"--max-cases must be >= 0, got {max_cases}")
    if max_cases:
        ds.x, ds.t = ds.x[:max_cases], ds.t[:max_cases]
    if len(ds.x) == 0:
        raise CommandError("the data source holds no cases")
    return ds


def _sizes(text: str, what: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise CommandError(
            f"--{what} must be comma-separated layer sizes, e.g. 100,50; got {text!r}"
        ) from None
    return sizes


@app.command()
def train(
    data: Data = None, inputs: Inputs = None, targets: Targets = None, mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None, candles: Candles = None, depth: Depth = 4, max_cases: MaxCases = 0,
    layers: Annotated[str, typer.Option(help="Unsupervised layer sizes, bottom first ('' none).")] = "100",
    head_hidden: Annotated[str, typer.Option(help="Supervised hidden layer sizes before the output.")] = "",
    classifier: Annotated[bool | None, typer.Option("--classifier/--regression")] = None,
    model: Annotated[Path, typer.Option(help="Model file to write.")] = Path("model.dbn"),
    log: Annotated[Path, typer.Option(help="DEEP.LOG-style training log.")] = Path("DEEP.LOG"),
    backend: Backend = "opencl",
    epochs: Annotated[int, typer.Option(help="Max RBM epochs per layer.")] = 300,
    batches: int = 24, tries: int = 50, chain_start: int = 1, chain_end: int = 4, chain_rate: float = 0.005,
    lr: float = 0.05, momentum_start: float = 0.1, momentum_end: float = 0.9, weight_penalty: float = 1e-4,
    sparsity_penalty: float = 1e-3, sparsity_target: float = 0.1, max_no_improvement: int = 500,
    mean_field: Annotated[bool, typer.Option("--mean-field/--sampled")] = True,
    greedy_mean_field: Annotated[bool, typer.Option("--greedy-mean-field/--greedy-sampled")] = True,
    anneal: int = 100, anneal_range: float = 1.0, sup_iter: int = 1000, sup_tol: float = 5e-5,
    fine_tune: Annotated[bool, typer.Option("--fine-tune/--no-fine-tune")] = False,
    fine_iter: int = 2000, fine_tol: float = 1e-5, sup_penalty: float = 1e-3, seed: int = 1,
    binary_splits: Annotated[bool, typer.Option(help="Inputs 1 above their training mean, else 0.")] = False,
    kernel_log: Annotated[Path | None, typer.Option(help="OpenCL kernel times (DEEP's CUDA.LOG).")] = None,
) -> None:
    """Train a deep belief net: RBM layers greedily, then the supervised head (and optional fine-tune)."""
    import nn

    ds = _load(data, inputs, targets, mnist_images, mnist_labels, candles, depth, max_cases)
    is_class = ds.classifier if classifier is None else classifier
    rbm = RBMConfig(n_hidden=1, n_rand=tries, n_batches=batches, chain_start=chain_start, chain_end=chain_end,
                    chain_rate=chain_rate, learning_rate=lr, momentum_start=momentum_start,
                    momentum_end=momentum_end, weight_penalty=weight_penalty,
                    sparsity_penalty=sparsity_penalty,
                    sparsity_target=sparsity_target, max_no_improvement=max_no_improvement, max_epochs=epochs,
                    mean_field=mean_field, seed=seed)
    cfg = DBNConfig(hidden=_sizes(layers, "layers"), rbm=rbm, greedy_mean_field=greedy_mean_field,
                    classifier=is_class, head_hidden=_sizes(head_hidden, "head-hidden"), anneal_iters=anneal,
                    anneal_range=anneal_range, sup_max_iter=sup_iter, sup_tol=sup_tol, fine_tune=fine_tune,
                    fine_max_iter=fine_iter, fine_tol=fine_tol, weight_penalty=sup_penalty, seed=seed)
    scaling = Scaling.fit(ds.x, binary_splits)
    x = scaling.apply(ds.x)
    names = [ds.inputs[i] for i in scaling.keep]
    be = nn.get_backend(backend)
    if kernel_log is not None and backend.lower().startswith("opencl"):  # a separate, profiling runtime
        from nn.ops_opencl import OpenCLBackend

        be = OpenCLBackend(device=backend.split(":", 1)[1] if ":" in backend else None, profile=True)
    out = DeepLog(log)
    out.add(f"Found {len(ds.inputs) + len(ds.targets)} variables, {len(x)} cases read", "",
            *variable_table(ds.inputs + ds.targets, np.hstack([ds.x, ds.t])), "",
            f"Dropped {len(ds.inputs) - len(names)} constant inputs; {len(names)} inputs remain",
            f"There are {len(cfg.hidden)} unsupervised layers, not including input: {list(cfg.hidden)}",
            f"There are {len(cfg.head_hidden) + 1} supervised layers, including output", "",
            *parameter_block("RBM training parameters", rbm), "",
            *parameter_block("Supervised parameters", cfg),
            "", f"Backend: {be.name}")
    out.flush()
    bar = tqdm(total=epochs, desc="layer 1", unit="epoch", leave=False)

    def on_epoch(layer: int, e) -> None:
        if e.epoch == 1:
            bar.reset()
            bar.set_description(f"layer {layer + 1}")
            out.add("", f"Training unsupervised layer {layer + 1}",
                    "epoch  recon_err      lr   momentum  chain     ratio   cosine  seconds")
        bar.update(1)
        bar.set_postfix(err=f"{e.recon_rms:.4f}", lr=f"{e.learning_rate:.3g}")
        out.add(f"{e.epoch:5d} {e.recon_rms:10.5f} {e.learning_rate:7.4f} {e.momentum:10.4f} {e.chain:6d} "
                f"{e.ratio:9.2e} {e.cosine:8.3f} {e.seconds:8.3f}")

    def on_phase(text: str) -> None:
        out.flush()
        tqdm.write(text)

    try:
        m = train_dbn(x, ds.t, cfg, be, on_epoch=on_epoch, on_phase=on_phase)
    finally:
        bar.close()
    crit = "negative log likelihood" if is_class else "error"
    for k, layer in enumerate(m.layers):
        out.add(f"Layer {k + 1}: initial weight search RMS reconstruction error = {layer.initial_error:.5f}",
                f"Layer {k + 1}: unsupervised training complete; RMS reconstruction error = "
                f"{layer.history[-1].recon_rms:.5f} ({len(layer.history)} epochs)")
    out.add(f"Optimization of supervised section is complete with {crit} = {m.log['supervised']:.6f}")
    if "fine_tune" in m.log:
        out.add(f"Fine tuning of the entire model is complete with {crit} = {m.log['fine_tune']:.6f}")
    out.add("", *weight_tables(m, names, ds.targets))
    meta = {"inputs": ds.inputs, "targets": ds.targets, "scaling": scaling.to_json(),
            "image_shape": list(ds.image_shape) if ds.image_shape else None, "candle_depth": depth}
    save_model(m, model, meta)
    pred = m.predict(x)
    out.add("", f"In-sample (training cases) {crit} = {raw_error(pred, ds.t, is_class):.6f}")
    if is_class:
        out.add("In-sample " + confusion(pred.argmax(1), ds.t.argmax(1), ds.t.shape[1])[1][-1])
    out.flush()
    if kernel_log is not None and hasattr(be, "runtime"):
        write_atomic(kernel_log, be.runtime.profiler.table() + "\n")
    typer.echo(f"model written to {model}; log in {log}")


def _model_data(model: Path, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases):
    m = load_model(model, kind="dbn")
    meta = m.metadata
    depth = int(meta.get("candle_depth") or 4)
    if data is not None and inputs is None and targets is None:  # the training columns, by name
        inputs, targets = ",".join(meta["inputs"]), ",".join(meta["targets"])
    ds = _load(data, inputs, targets, mnist_images, mnist_labels, candles, depth, max_cases)
    if ds.inputs != meta["inputs"]:
        raise CommandError(f"the data's inputs ({len(ds.inputs)}) are not the model's {len(meta['inputs'])} "
                         "training inputs in the same order")
    return m, meta, Scaling.from_json(meta["scaling"]).apply(ds.x), ds


@app.command()
def test(
    model: Annotated[Path, typer.Argument(help="Model file from 'deep train'.")], data: Data = None,
    inputs: Inputs = None, targets: Targets = None, mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None, candles: Candles = None, max_cases: MaxCases = 0,
    log: Annotated[Path | None, typer.Option(help="Also write the report to this file.")] = None,
) -> None:
    """Evaluate a trained model on (new) data: the criterion, and the confusion matrix of a classifier."""
    m, meta, x, ds = _model_data(model, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases)
    if ds.t.shape[1] != m.head.layers[-1][0].shape[0]:
        raise CommandError(f"the data has {ds.t.shape[1]} targets, the model predicts "
                         f"{m.head.layers[-1][0].shape[0]}")
    pred = m.predict(x)
    crit = "negative log likelihood" if m.head.classifier else "mean squared error"
    lines = [f"Test of {model} on {len(x)} cases: {crit} = {raw_error(pred, ds.t, m.head.classifier):.6f}"]
    if m.head.classifier:
        lines += confusion(pred.argmax(1), ds.t.argmax(1), ds.t.shape[1])[1]
    else:
        rms = np.sqrt(((pred - ds.t) ** 2).mean(axis=0))
        lines += [f"  RMS error of {name}: {v:.6f}" for name, v in zip(meta["targets"], rms, strict=True)]
    text = "\n".join(lines)
    typer.echo(text)
    if log is not None:
        write_atomic(log, text + "\n")


def _shape(meta: dict, n: int, option: str | None) -> tuple[int, int]:
    if option:
        try:
            r, c = (int(v) for v in option.lower().split("x"))
        except ValueError:
            raise CommandError(f"--image must look like 28x28, got {option!r}") from None
        shape = (r, c)
    elif meta.get("image_shape"):
        shape = tuple(meta["image_shape"])
    else:
        side = math.isqrt(n)
        shape = (side, side)
    if shape[0] * shape[1] != n:
        raise CommandError(
            f"images of {shape[0]}x{shape[1]} do not hold the model's {n} inputs (use --image)"
        )
    return shape


def _full_inputs(meta: dict, v: np.ndarray) -> np.ndarray:
    """Model-input values placed back among the raw inputs; dropped constant inputs shown mid-gray."""
    full = np.full((len(v), len(meta["inputs"])), 0.5)
    full[:, meta["scaling"]["keep"]] = v
    return full


@app.command()
def sample(
    model: Annotated[Path, typer.Argument(help="Model file from 'deep train'.")],
    out: Annotated[Path, typer.Option(help="PNG of the generated samples.")] = Path("samples.png"),
    chain: Annotated[int, typer.Option(help="Gibbs iterations in the top RBM.")] = 1000,
    rows: int = 4, cols: int = 6,
    first_case: Annotated[int, typer.Option(help="1-based start case (with data); 0: random hidden")] = 0,
    data: Data = None, inputs: Inputs = None, targets: Targets = None, mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None, image: Annotated[str | None, typer.Option(help="e.g. 28x28")] = None,
    backend: Backend = "opencl", seed: int = 1,
) -> None:
    """Generative samples (Gibbs chain at the top, mean field down) as an image grid."""
    import nn

    if rows < 1 or cols < 1 or chain < 0:
        raise CommandError("--rows and --cols must be >= 1 and --chain >= 0")
    m = load_model(model, kind="dbn")
    meta = m.metadata
    count = rows * cols
    if first_case > 0:
        m, meta, x, _ = _model_data(model, data, inputs, targets, mnist_images, mnist_labels, None, 0)
        if first_case - 1 + count > len(x):
            raise CommandError(f"--first-case {first_case} + {count} cells exceeds the {len(x)} cases")
        start = x[first_case - 1:first_case - 1 + count]
        v = m.generate(nn.get_backend(backend), chain, start=start, seed=seed)
    else:
        v = m.generate(nn.get_backend(backend), chain, count=count, seed=seed)
    full = _full_inputs(meta, v)
    image_grid(out, full, _shape(meta, full.shape[1], image), cols, f"{count} samples, {chain} Gibbs steps")
    typer.echo(f"{count} samples written to {out}")


@app.command()
def analyze(
    model: Annotated[Path, typer.Argument(help="Model file from 'deep train'.")], data: Data = None,
    inputs: Inputs = None, targets: Targets = None, mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None, candles: Candles = None, max_cases: MaxCases = 0,
    fields: Annotated[Path | None, typer.Option(help="PNG of first-layer receptive fields.")] = None,
    neurons: Annotated[int, typer.Option(help="Receptive fields to draw.")] = 24,
    image: Annotated[str | None, typer.Option(help="e.g. 28x28")] = None,
    activations: Annotated[Path | None, typer.Option(help="Write one neuron's activation per case.")] = None,
    section: Annotated[str, typer.Option(help="unsupervised or supervised")] = "unsupervised",
    layer: int = 1, neuron: int = 1,
    log: Annotated[Path | None, typer.Option(help="Also write the tables to this file.")] = None,
) -> None:
    """Visible vs reconstructed means, top-layer activations; receptive fields; activation export."""
    m, meta, x, _ = _model_data(model, data, inputs, targets, mnist_images, mnist_labels, candles, max_cases)
    names = [meta["inputs"][i] for i in meta["scaling"]["keep"]]
    rec = m.reconstruct(x)
    lines = [f"{'Variable':<20s}{'Visible':>12s}{'Reconstructed':>15s}"]
    lines += [f"{n:<20s}{a:12.4f}{b:15.4f}" for n, a, b in zip(names, x.mean(0), rec.mean(0), strict=True)]
    top = m.features(x)
    lines += ["", "Top unsupervised layer mean activations:", " ".join(f"{v:.4f}" for v in top.mean(0))]
    typer.echo("\n".join(lines))
    if log is not None:
        write_atomic(log, "\n".join(lines) + "\n")
    if fields is not None:
        if not m.layers:
            raise CommandError("receptive fields need at least one unsupervised layer")
        w = m.layers[0].w[: max(1, neurons)]
        full = _full_inputs(meta, w) - 0.5 * np.isin(np.arange(len(meta["inputs"])), meta["scaling"]["keep"],
                                                     invert=True)
        image_grid(fields, full, _shape(meta, full.shape[1], image), min(8, len(w)),
                   "first-layer receptive fields", signed=True)
        typer.echo(f"receptive fields written to {fields}")
    if activations is not None:
        acts = _activations(m, x, section, layer)
        if not 1 <= neuron <= acts.shape[1]:
            raise CommandError(f"--neuron must be in 1-{acts.shape[1]} for that layer, got {neuron}")
        write_atomic(activations, "".join(f"{v:.6f}\n" for v in acts[:, neuron - 1]))
        typer.echo(f"{len(acts)} activations written to {activations}")


def _activations(m, x: np.ndarray, section: str, layer: int) -> np.ndarray:
    if section == "unsupervised":
        if not 1 <= layer <= len(m.layers):
            raise CommandError(f"--layer must be in 1-{len(m.layers)} for unsupervised layers, got {layer}")
        return m.features(x, layer)
    if section != "supervised":
        raise CommandError(f"--section must be unsupervised or supervised, got {section!r}")
    acts = [*m.head.hidden(m.features(x))[1:], m.head.predict(m.features(x))]
    if not 1 <= layer <= len(acts):
        raise CommandError(f"--layer must be in 1-{len(acts)} for the supervised section, got {layer}")
    return acts[layer - 1]
