"""``neuronet deep train|test|sample|analyze``: Masters' DEEP workflow (spec dbn.md §6) from the shell.

    neuronet deep train data.csv --targets RAND1,RAND2,RAND3 --inputs 2-7 --layers 5 --classifier
    neuronet deep train --mnist-images train-images-idx3-ubyte.gz --mnist-labels train-labels-idx1-ubyte.gz
    neuronet deep test model.dbn test.csv            # criterion, confusion matrix for classifiers
    neuronet deep sample model.dbn --out samples.png --chain 1000
    neuronet deep analyze model.dbn data.csv --fields fields.png --activations act.txt

Every default is the book's and comes from the configs themselves (``nn.rbm.RBMConfig``,
``nn.dbn_config.DBNConfig``), so the command line and Python train the same model: RBM layers stop by the
book's convergence tests (no new low of the increment ratio for 500 epochs, or the ratio below 1e-5), with
10,000 epochs as a backstop only. This module holds the ``train`` command; ``deep_use`` the others.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from tqdm import tqdm

from neuronet.commands import deep_use
from neuronet.commands.deep_data import Scaling, load_dataset, variable_stats
from neuronet.commands.deep_options import (
    Candles,
    Data,
    Depth,
    Force,
    Inputs,
    MaxCases,
    MnistImages,
    MnistLabels,
    Targets,
    check_backend,
    check_output,
    distinct_outputs,
    layer_sizes,
    option_error,
    parameter_block,
)
from neuronet.commands.deep_report import DeepLog, confusion, variable_table, weight_tables, write_text
from neuronet.commands.errors import CommandError
from nn.dbn_config import DBNConfig, check_memory
from nn.io import save as save_model
from nn.mlfn import raw_error
from nn.rbm_config import DBNConfigError, RBMConfig

app = typer.Typer(
    help="Deep belief nets (Masters' DEEP): train, test, sample, analyze.", no_args_is_help=True
)
app.command("test")(deep_use.test)
app.command("sample")(deep_use.sample)
app.command("analyze")(deep_use.analyze)

_R = RBMConfig(n_hidden=1)  # the defaults: the book's, owned by the configs
_D = DBNConfig()
RECON = {"mse": "mse", "ce": "ce"}
RECON_FORMS = {"fast": False, "direct": True}


def _choice(value: str, table: dict, option: str):
    key = value.strip().lower()
    if key not in table:
        raise CommandError(f"{option} {value!r}: expected {' or '.join(table)}")
    return table[key]


@app.command()
def train(
    data: Data = None,
    inputs: Inputs = None,
    targets: Targets = None,
    mnist_images: MnistImages = None,
    mnist_labels: MnistLabels = None,
    candles: Candles = None,
    depth: Depth = 4,
    max_cases: MaxCases = 0,
    layers: Annotated[
        str | None, typer.Option(help="Unsupervised layer sizes, bottom first ('' none); default 100.")
    ] = None,
    unsupervised_layers: Annotated[
        int | None,
        typer.Option(help="Number of unsupervised layers (with --first-unsupervised/--last-unsupervised)."),
    ] = None,
    first_unsupervised: Annotated[int | None, typer.Option(help="Neurons in the bottom RBM layer.")] = None,
    last_unsupervised: Annotated[
        int | None, typer.Option(help="Neurons in the top RBM layer (interior sizes interpolated).")
    ] = None,
    head_hidden: Annotated[
        str | None,
        typer.Option(help="Supervised hidden layer sizes before the output ('' none, the default)."),
    ] = None,
    supervised_layers: Annotated[
        int | None,
        typer.Option(
            help="Number of supervised layers, output included (with --first-supervised/--last-supervised)."
        ),
    ] = None,
    first_supervised: Annotated[
        int | None, typer.Option(help="Neurons in the first supervised layer.")
    ] = None,
    last_supervised: Annotated[
        int | None,
        typer.Option(help="Neurons in the last supervised hidden layer (interior sizes interpolated)."),
    ] = None,
    classifier: Annotated[
        bool | None,
        typer.Option(
            "--classifier/--regression", help="Model type (default: classifier for MNIST and candles)."
        ),
    ] = None,
    model: Annotated[Path, typer.Option(help="Model file to write (an existing one needs --force).")] = Path(
        "model.dbn"
    ),
    force: Force = False,
    log: Annotated[Path, typer.Option(help="DEEP.LOG-style training log.")] = Path("DEEP.LOG"),
    backend: Annotated[
        str,
        typer.Option(
            help="auto (the best usable OpenCL device, else NumPy with a note), numpy, opencl or "
            "opencl:<device>."
        ),
    ] = "auto",
    epochs: Annotated[
        int,
        typer.Option(help="Max RBM epochs per layer: a backstop; the convergence tests stop training first."),
    ] = _R.max_epochs,
    max_no_improvement: Annotated[
        int, typer.Option(help="Primary convergence test: epochs without a new low of the increment ratio.")
    ] = _R.max_no_improvement,
    increment_criterion: Annotated[
        float,
        typer.Option(
            help="Secondary convergence test: stop when max |increment| / max |weight| falls below this."
        ),
    ] = _R.convergence_crit,
    batches: int = _R.n_batches,
    tries: int = _R.n_rand,
    chain_start: int = _R.chain_start,
    chain_end: int = _R.chain_end,
    chain_rate: float = _R.chain_rate,
    lr: float = _R.learning_rate,
    momentum_start: float = _R.momentum_start,
    momentum_end: float = _R.momentum_end,
    weight_penalty: float = _R.weight_penalty,
    sparsity_penalty: float = _R.sparsity_penalty,
    sparsity_target: float = _R.sparsity_target,
    mean_field: Annotated[bool, typer.Option("--mean-field/--sampled")] = _R.mean_field,
    recon: Annotated[str, typer.Option(help="Reconstruction error: mse or ce (cross entropy).")] = _R.recon,
    recon_error: Annotated[
        str,
        typer.Option(
            help="fast (first chain step, sampled hidden states) or direct (mean field from the data)."
        ),
    ] = "fast",
    greedy_mean_field: Annotated[
        bool, typer.Option("--greedy-mean-field/--greedy-sampled")
    ] = _D.greedy_mean_field,
    anneal: int = _D.anneal_iters,
    anneal_range: float = _D.anneal_range,
    sup_iter: int = _D.sup_max_iter,
    sup_tol: float = _D.sup_tol,
    fine_tune: Annotated[bool, typer.Option("--fine-tune/--no-fine-tune")] = _D.fine_tune,
    fine_iter: int = _D.fine_max_iter,
    fine_tol: float = _D.fine_tol,
    sup_penalty: float = _D.weight_penalty,
    svd: Annotated[
        bool,
        typer.Option("--svd/--no-svd", help="SVD output weights (always off above 400 output-layer inputs)."),
    ] = _D.allow_svd,
    seed: int = _D.seed,
    binary_splits: Annotated[bool, typer.Option(help="Inputs 1 above their training mean, else 0.")] = False,
    kernel_log: Annotated[Path | None, typer.Option(help="OpenCL kernel times (DEEP's CUDA.LOG).")] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Progress bar of epochs (only on a terminal).")
    ] = True,
) -> None:
    """Train a deep belief net: RBM layers greedily, then the supervised head (and optional fine-tune)."""
    import nn

    backend = check_backend(backend)
    unsup = layer_sizes(
        layers,
        ",".join(map(str, _D.hidden)),
        unsupervised_layers,
        first_unsupervised,
        last_unsupervised,
        section="unsupervised",
        list_option="--layers",
        output_counted=False,
    )
    sup = layer_sizes(
        head_hidden,
        "",
        supervised_layers,
        first_supervised,
        last_supervised,
        section="supervised",
        list_option="--head-hidden",
        output_counted=True,
    )
    renamed = {"hidden": unsup.option, "head_hidden": sup.option}
    try:
        rbm = RBMConfig(
            n_hidden=1,
            n_rand=tries,
            n_batches=batches,
            chain_start=chain_start,
            chain_end=chain_end,
            chain_rate=chain_rate,
            learning_rate=lr,
            momentum_start=momentum_start,
            momentum_end=momentum_end,
            weight_penalty=weight_penalty,
            sparsity_penalty=sparsity_penalty,
            sparsity_target=sparsity_target,
            convergence_crit=increment_criterion,
            max_no_improvement=max_no_improvement,
            max_epochs=epochs,
            mean_field=mean_field,
            recon=_choice(recon, RECON, "--recon"),
            direct_error=_choice(recon_error, RECON_FORMS, "--recon-error"),
            seed=seed,
        )
        cfg = DBNConfig(
            hidden=unsup.sizes,
            rbm=rbm,
            greedy_mean_field=greedy_mean_field,
            classifier=True,
            head_hidden=sup.sizes,
            anneal_iters=anneal,
            anneal_range=anneal_range,
            sup_max_iter=sup_iter,
            sup_tol=sup_tol,
            fine_tune=fine_tune,
            fine_max_iter=fine_iter,
            fine_tol=fine_tol,
            weight_penalty=sup_penalty,
            allow_svd=svd,
            seed=seed,
        )
    except DBNConfigError as exc:
        raise option_error(exc, renamed) from None
    sources = tuple(Path(p) for p in (data, mnist_images, mnist_labels, candles) if p and p != "sample")
    check_output(model, "--model", force=force, inputs=sources, replace_ours=False)
    check_output(log, "--log", force=force, inputs=sources)
    if kernel_log is not None:
        check_output(kernel_log, "--kernel-log", force=force, inputs=sources)
    distinct_outputs(("--model", model), ("--log", log), ("--kernel-log", kernel_log))

    ds = load_dataset(
        data, inputs, targets, mnist_images, mnist_labels, candles, depth, max_cases, need_targets=True
    )
    is_class = ds.classifier if classifier is None else classifier
    if is_class and ds.t.shape[1] < 2:
        raise CommandError(
            f"--classifier needs at least 2 targets (the class is the largest); got {', '.join(ds.targets)}"
        )
    cfg = replace(cfg, classifier=is_class)
    scaling = Scaling.fit(ds.x, binary_splits)
    x = scaling.apply(ds.x)
    names = [ds.inputs[i] for i in scaling.keep]
    be = nn.get_backend(backend, profile=kernel_log is not None)
    try:
        check_memory(len(x), x.shape[1], ds.t.shape[1], cfg, be)
    except DBNConfigError as exc:
        raise option_error(exc, renamed) from None

    out = DeepLog(log, "train")
    stats = ds.variables or variable_stats(ds.inputs + ds.targets, np.hstack([ds.x, ds.t]))
    out.add(
        ds.origin,
        f"{len(x)} cases read",
        *variable_table(stats),
        "",
        f"Inputs: {len(ds.inputs)}, of which {len(ds.inputs) - len(names)} constant over the training "
        f"cases and dropped; {len(names)} model inputs. Targets: {', '.join(ds.targets)}",
        f"There are {len(cfg.hidden)} unsupervised layers, not including input",
        *(f"  Hidden layer {k + 1} has {h} neurons" for k, h in enumerate(cfg.hidden)),
        f"There are {len(cfg.head_hidden) + 1} supervised layers, including output",
        *(f"  Supervised hidden layer {k + 1} has {h} neurons" for k, h in enumerate(cfg.head_hidden)),
        "",
        *parameter_block("Restricted Boltzmann Machine training parameters...", "RBM", rbm),
        "",
        *parameter_block("Supervised layer(s) training parameters...", "DBN", cfg),
        f"  Inputs {'split at their training mean (binary)' if binary_splits else 'rescaled 0-1'}",
        "",
        f"Backend: {be.name}",
    )
    out.flush()
    _train_and_report(out, be, x, ds, cfg, names, scaling, depth, model, kernel_log, progress)


def _recon_label(rbm: RBMConfig) -> str:
    kind = "RMS" if rbm.recon == "mse" else "cross-entropy"
    return f"{kind} reconstruction error ({'direct' if rbm.direct_error else 'fast'})"


def _train_and_report(
    out: DeepLog, be, x, ds, cfg: DBNConfig, names, scaling, depth, model, kernel_log, progress: bool = True
):
    from nn.dbn import train_dbn

    shown = progress and sys.stderr.isatty()  # a log file or pipe gets the epoch lines, not bar redraws
    bar = tqdm(total=cfg.rbm.max_epochs, desc="layer 1", unit="epoch", leave=False, disable=not shown)

    def on_epoch(layer: int, e) -> None:
        if e.epoch == 1:
            bar.reset()
            bar.set_description(f"layer {layer + 1}")
            out.add(
                "",
                f"Training unsupervised layer {layer + 1}",
                "epoch  recon_err      lr   momentum  chain     ratio  rms_grad   cosine  no_imp  seconds",
            )
        bar.update(1)
        bar.set_postfix(err=f"{e.recon_rms:.4f}", no_imp=e.no_improvement)
        out.add(
            f"{e.epoch:5d} {e.recon_rms:10.5f} {e.learning_rate:7.4f} {e.momentum:10.4f} {e.chain:6d} "
            f"{e.ratio:9.2e} {e.rms_gradient:9.2e} {e.cosine:8.3f} {e.no_improvement:7d} {e.seconds:8.3f}"
        )

    def on_layer(k: int, layer) -> None:
        out.add(
            f"Initial weight search RMS reconstruction error = {layer.initial_error:.5f}",
            f"Unsupervised training complete after {len(layer.history)} epochs "
            f"({layer.stop_reason}); {_recon_label(cfg.rbm)} = {layer.history[-1].recon_rms:.5f}",
        )
        out.flush()

    def on_phase(text: str) -> None:
        out.flush()
        tqdm.write(text, file=sys.stderr)

    try:
        m = train_dbn(x, ds.t, cfg, be, on_epoch=on_epoch, on_phase=on_phase, on_layer=on_layer)
    except BaseException as exc:  # Ctrl-C, a diverged run, a crash: the log keeps every epoch and says why
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        out.add("", f"Training stopped ({why}); no model written")
        out.flush()
        raise
    finally:
        bar.close()
    crit = "negative log likelihood" if cfg.classifier else "mean squared error"
    for phase, what in (
        ("supervised", "Optimization of supervised section"),
        ("fine_tune", "Fine tuning of the entire model"),
    ):
        if phase in m.log:
            out.add(
                "",
                f"{what} is complete with {crit} = {m.log[f'{phase}_error']:.6f}",
                f"  (plus weight penalty {m.log[f'{phase}_penalty']:.6f}: criterion minimised "
                f"{m.log[phase]:.6f})",
            )
    out.add("", *weight_tables(m, names, ds.targets))
    meta = {
        "inputs": ds.inputs,
        "targets": ds.targets,
        "scaling": scaling.to_json(),
        "image_shape": list(ds.image_shape) if ds.image_shape else None,
        "candle_depth": depth,
    }
    save_model(m, model, meta)
    pred = m.predict(x)
    out.add("", f"In-sample (training cases) {crit} = {raw_error(pred, ds.t, cfg.classifier):.6f}")
    if cfg.classifier:
        out.add(*confusion(pred.argmax(1), ds.t.argmax(1), ds.t.shape[1])[1])
    if kernel_log is not None:
        if hasattr(be, "runtime"):
            write_text(kernel_log, be.runtime.profiler.table() + "\n")
        else:
            note = (
                f"note: no kernel times for --kernel-log on the {be.name} backend; {kernel_log} not written"
            )
            out.add("", note)
            typer.echo(note, err=True)
    out.flush()
    typer.echo(f"model written to {model}; log in {out.path}")
