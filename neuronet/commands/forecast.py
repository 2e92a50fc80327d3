"""``neuronet forecast``: train ATFNet (or PatchTST) on a forecasting CSV and score it next to baselines.

The protocol (CSV reading, splits, scaling, training, baselines, metrics) is ``strategies.forecasting``'s;
this command parses the options, picks the size preset for the device, shows progress and prints and writes
the results.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from datafeeds.files import atomic_write_json, atomic_write_text
from neuronet.commands import values
from neuronet.commands.errors import CommandError
from neuronet.commands.options import Force, flag, out_folder
from nn import get_backend
from nn.atfnet import F_SCALINGS
from nn.io import save
from strategies.forecast_data import FEATURES, SPLITS
from strategies.forecasting import MODELS, PRESETS, PROTOCOLS, Preset, Protocol, preset_for, run_protocol


def _summary_steps(t: int) -> list[int]:
    return sorted({1, max(1, t // 4), max(1, t // 2), t})


def _cell(v: float | None) -> str:
    return f"{'n/a':>14}" if v is None else f"{v:>14.4f}"


def format_table(doc: dict[str, Any]) -> str:
    """The console summary: MSE/MAE overall and at a few horizon steps, per forecaster."""
    keys = list(doc["mse"])
    steps = _summary_steps(doc["pred_len"])
    head = f"{'':<12}" + "".join(f"{k + ' MSE':>14}{k + ' MAE':>14}" for k in keys)
    lines = [head, "-" * len(head)]
    lines.append(f"{'all steps':<12}" + "".join(_cell(doc["mse"][k]) + _cell(doc["mae"][k]) for k in keys))
    for s in steps:
        per = doc["per_step"]
        cells = "".join(_cell(per[k]["mse"][s - 1]) + _cell(per[k]["mae"][s - 1]) for k in keys)
        lines.append(f"{'step ' + str(s):<12}{cells}")
    acc = ", ".join(f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in doc["direction_accuracy"].items())
    lines.append(f"direction accuracy of the forecast move: {acc}")
    if "all_windows" in doc:
        w, every = doc["windows"], doc["all_windows"]
        cells = ", ".join(f"{k} {_cell(v).strip()}" for k, v in every["mse"].items())
        lines.append(
            f"scored as the official test loader: the first {w['test_scored']} of {w['test']} test windows "
            f"(full batches); MSE on all {w['test']}: {cells}"
        )
    return "\n".join(lines)


def write_results(doc: dict[str, Any], out: Path) -> list[Path]:
    """``metrics.json`` (everything; strict JSON) and ``per_horizon.csv`` (one row per step), atomically."""
    keys = list(doc["per_step"])
    rows = ["step," + ",".join(f"{k}_mse,{k}_mae" for k in keys)]
    for s in range(doc["pred_len"]):
        per = doc["per_step"]
        vals = ",".join(f"{_num(per[k]['mse'][s])},{_num(per[k]['mae'][s])}" for k in keys)
        rows.append(f"{s + 1},{vals}")
    paths = [out / "metrics.json", out / "per_horizon.csv"]
    atomic_write_json(paths[0], doc)
    atomic_write_text(paths[1], "\n".join(rows) + "\n")
    return paths


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


class _Progress:
    """The run's description once training starts (the data and the model passed every check, so a
    refused value is the only line a user sees), the batches inside each epoch (a paper-size epoch on a
    CPU takes minutes) and one line per epoch; from the second epoch on, the bar knows its total (the
    first epoch's batch count)."""

    def __init__(self, enabled: bool, header: str) -> None:
        self.enabled = enabled and sys.stderr.isatty()  # a log file or pipe gets the epoch lines only
        self.header = header
        self._bar = None
        self._batches: int | None = None

    def on_train_begin(self, model: Any) -> None:
        typer.echo(self.header, err=True)

    def on_batch_end(self, epoch: int, batch: int, size: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=self._batches, unit="batch", desc=f"epoch {epoch + 1}", leave=False)
        self._bar.update(1)

    def on_epoch_end(self, record: Any) -> None:
        if self._bar is not None:
            self._batches = self._bar.n
            self._bar.close()
            self._bar = None
        val = "n/a" if record.val_loss is None else f"{record.val_loss:.4f}"
        typer.echo(
            f"epoch {record.epoch + 1}: loss {record.loss:.4f}, val_loss {val}, lr {record.lr:.2g}, "
            f"{record.wall_s:.1f} s",
            err=True,
        )


def _choose_preset(
    name: str | None, backend: Any, overrides: dict[str, Any], protocol: Protocol
) -> tuple[Preset, str]:
    """The preset (``--preset``, else the protocol's, else by device) with the explicit options applied, and
    a line saying so."""
    if name is None and protocol.preset is not None:
        name, origin = protocol.preset, f"the {protocol.name} protocol's; --preset to change"
    elif name is None:
        name, why = preset_for(backend)
        origin = f"chosen for the device: {why}; --preset to change"
    elif name in PRESETS:
        origin = "--preset"
    else:
        raise CommandError(f"--preset must be one of {', '.join(PRESETS)}, got {name!r}")
    preset = replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
    sizes = ", ".join(f"{k} {v:g}" for k, v in asdict(preset).items())
    line = f"preset {name} ({origin}): {sizes}"
    if name == "paper" and preset_for(backend)[0] != "paper":
        line += "\nnote: the paper's size on a CPU takes minutes per epoch (--preset cpu: seconds)"
    return preset, line


def _count(help: str, most: int = values.MAX_COUNT) -> Any:
    """A whole-number option of at least 1."""
    return typer.Option(help=help, min=1, max=most)


Size = Annotated[int | None, _count("Model size (default: the preset's).", values.MAX_WIDTH)]


def forecast(
    csv: Annotated[
        Path,
        typer.Option("--csv", help="CSV with a 'date' column, then numeric channels.", parser=values.path),
    ],
    target: Annotated[
        str,
        typer.Option("--target", help="Channel to forecast (scored alone with S/MS).", parser=values.text),
    ],
    features: Annotated[
        str, typer.Option(help=f"{', '.join(FEATURES)}: all = M (every channel).", parser=values.text)
    ] = "all",
    seq_len: Annotated[int, _count("Input window L (points).")] = 96,
    pred_len: Annotated[int, _count("Forecast horizon T (points).")] = 96,
    split: Annotated[
        str | None,
        typer.Option(
            help=f"{', '.join(SPLITS)}: rows by share, or ETT's 12/4/4 months (default: 70/10/20).",
            parser=values.text,
        ),
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            help="neuronet (every window trained, validated and scored) or official (the official ATFNet "
            "scripts step by step: full batches only, their schedule and initialisation, paper size).",
            parser=values.text,
        ),
    ] = "neuronet",
    model: Annotated[
        str, typer.Option(help=f"{' or '.join(MODELS)} (the T block alone).", parser=values.text)
    ] = "atfnet",
    preset: Annotated[
        str | None,
        typer.Option(
            help="paper (d_model 512, d_ff 2048, lr 1e-4) or cpu (64/128, lr 1e-3); default: paper "
            "with --protocol official, else by device (paper on a GPU).",
            parser=values.text,
        ),
    ] = None,
    epochs: Annotated[int, _count("Maximum epochs (early stopping on validation).")] = 10,
    batch_size: Annotated[int | None, _count("Windows per step (default: the preset's).")] = None,
    lr: Annotated[
        float | None,
        typer.Option(help="Adam learning rate: epochs 1-2, then halved every epoch (default: the preset's)."),
    ] = None,
    patience: Annotated[
        int, typer.Option(help="Early-stopping patience (epochs).", min=0, max=values.MAX_COUNT)
    ] = 3,
    d_model: Size = None,
    n_heads: Annotated[
        int | None, _count("Attention heads (default: the preset's).", values.MAX_WIDTH)
    ] = None,
    layers: Annotated[
        int | None, _count("Encoder layers per block (default: the preset's).", values.MAX_DEPTH)
    ] = None,
    d_ff: Size = None,
    dropout: Annotated[float | None, typer.Option(help="Dropout (default: the preset's).")] = None,
    f_scaling: Annotated[
        str | None,
        typer.Option(
            help="F block inverse DFT: official (the official code's; default) or exact (the inverse "
            "of the forward DFT, N/F times the official).",
            parser=values.text,
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            help="auto (the best usable OpenCL device, else NumPy), numpy, opencl[:<device>].",
            parser=values.backend,
        ),
    ] = "auto",
    seed: Annotated[
        int, typer.Option(help="Initial weights, dropout masks and batch order.", min=0, max=values.MAX_SEED)
    ] = 0,
    out: Annotated[
        Path | None,
        typer.Option(
            help="New or empty folder for metrics.json, per_horizon.csv, the model.", parser=values.path
        ),
    ] = None,
    force: Force = False,
    progress: Annotated[bool, flag("--progress/--no-progress", help="Batch progress, epoch lines.")] = True,
) -> None:
    """Train and evaluate a forecaster on a CSV with the neuronet or the official ATFNet protocol."""
    if model not in MODELS:
        raise CommandError(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    if protocol not in PROTOCOLS:
        raise CommandError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if split is not None and split not in SPLITS:
        raise CommandError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    if f_scaling is not None and f_scaling not in F_SCALINGS:
        raise CommandError(f"--f-scaling must be one of {', '.join(F_SCALINGS)}, got {f_scaling!r}")
    overrides = dict(d_model=d_model, n_heads=n_heads, layers=layers, d_ff=d_ff, dropout=dropout, lr=lr,
                     batch_size=batch_size)  # fmt: skip
    with out_folder(out, force) if out is not None else nullcontext():  # occupied: refused before any work
        be = get_backend(backend)
        proto = PROTOCOLS[protocol]
        chosen, line = _choose_preset(preset, be, overrides, proto)
        chosen.check({field: "--" + field.replace("_", "-") for field in asdict(chosen)})
        doc, net = run_protocol(
            csv,
            target,
            features=features,
            seq_len=seq_len,
            pred_len=pred_len,
            split=split,
            model=model,
            preset=chosen,
            epochs=epochs,
            patience=patience,
            f_scaling=f_scaling,
            backend=be,
            seed=seed,
            callbacks=[_Progress(progress, f"{model} on {be.name}, {protocol} protocol, {line}")],
            protocol=proto,
        )
        w = doc["windows"]
        typer.echo(
            f"{doc['model']} on {csv.name} ({', '.join(doc['channels'])}; {doc['parameters']:,} parameters, "
            f"{doc['backend']}, {doc['protocol']['name']} protocol, split {doc['split']}): {w['train']} "
            f"train / {w['val']} val / {w['test']} test windows, {len(doc['epochs'])} epochs in "
            f"{doc['train_s']:.1f} s; standardised test metrics:"
        )
        typer.echo(format_table(doc))
        if out is not None:
            for path in [*write_results(doc, out), save(net, out / "model.nnz")]:
                typer.echo(f"wrote {path}")
