"""The options of ``neuronet deep`` and their checks: one table from training parameter to option and log
line, the backend, the layer sizes (as a list, or DEEP's first/last sizes with interpolation), and the files
a command writes.

``PARAMS`` is the one owner of "which option sets which training parameter": the DEEP.LOG parameter block is
printed from it, and a ``DBNConfigError`` raised by ``nn`` for a field becomes a one-line error naming that
field's option (a test checks that every option it names exists). The ranges themselves are the configs'
(``nn.rbm.RBMConfig``, ``nn.dbn_config.DBNConfig``), so the command line and Python accept the same values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from neuronet.commands import values
from neuronet.commands.deep_report import is_ours
from neuronet.commands.errors import CommandError, CommandOSError
from nn.dbn_config import MAX_LAYERS, interpolated_sizes
from nn.rbm_config import DBNConfigError

BACKENDS = ("auto", "numpy", "opencl")

# An empty file name is refused by name (as the folder it would mean, it reached the readers as ".").
Data = Annotated[
    Path | None,
    typer.Argument(help="Numeric table: a header of names, then cases.", parser=values.path),
]
Inputs = Annotated[str | None, typer.Option(help="Input columns: names or 1-based numbers, e.g. 2-7,X.")]
Targets = Annotated[str | None, typer.Option(help="Target columns (a classifier's class is the largest).")]
MnistImages = Annotated[
    Path | None,
    typer.Option(help="MNIST IDX image file (plain or .gz) instead of a table.", parser=values.path),
]
MnistLabels = Annotated[
    Path | None,
    typer.Option(help="MNIST IDX label file, plain or .gz (ten one-hot targets).", parser=values.path),
]
Candles = Annotated[
    str | None,
    typer.Option(help="'sample' or a MetaTrader CSV: fractal classes of bars.", parser=values.text),
]
Depth = Annotated[int, typer.Option(help="Bars per input window for --candles.")]
MaxCases = Annotated[int, typer.Option(help="Use only the first N cases (0: all).")]
Force = Annotated[bool, typer.Option("--force", help="Replace existing output files.", metavar="")]
Backend = Annotated[
    str,
    typer.Option(
        help="auto (the best usable OpenCL device, else NumPy with a note), numpy, opencl or opencl:<device>."
    ),
]


@dataclass(frozen=True)
class Param:
    owner: str  # "RBM" (nn.rbm.RBMConfig) or "DBN" (nn.dbn_config.DBNConfig)
    field: str
    option: str
    label: str  # the DEEP.LOG wording (spec §6.10)


PARAMS = (
    Param("RBM", "n_rand", "--tries", "Initial random iterations for starting weights"),
    Param("RBM", "n_batches", "--batches", "Number of batches"),
    Param("RBM", "chain_start", "--chain-start", "Markov chain length start"),
    Param("RBM", "chain_end", "--chain-end", "Markov chain length end"),
    Param("RBM", "chain_rate", "--chain-rate", "Markov chain length rate"),
    Param("RBM", "learning_rate", "--lr", "Learning rate"),
    Param("RBM", "momentum_start", "--momentum-start", "Starting momentum"),
    Param("RBM", "momentum_end", "--momentum-end", "Ending momentum"),
    Param("RBM", "weight_penalty", "--weight-penalty", "Weight penalty"),
    Param("RBM", "sparsity_penalty", "--sparsity-penalty", "Sparsity penalty"),
    Param("RBM", "sparsity_target", "--sparsity-target", "Sparsity target"),
    Param("RBM", "convergence_crit", "--increment-criterion", "Increment convergence criterion"),
    Param("RBM", "max_no_improvement", "--max-no-improvement", "Max epochs with no improvement"),
    Param("RBM", "max_epochs", "--epochs", "Max epochs"),
    Param("RBM", "mean_field", "--mean-field/--sampled", "Visible layer using mean field (not stochastic)"),
    Param("RBM", "recon", "--recon", "Reconstruction error measure (mse or ce)"),
    Param("RBM", "direct_error", "--recon-error", "Reconstruction error direct (not fast)"),
    Param("RBM", "seed", "--seed", "Random seed"),
    Param("DBN", "hidden", "--layers", "Unsupervised layer sizes"),
    Param("DBN", "greedy_mean_field", "--greedy-mean-field/--greedy-sampled", "Greedy feed mean field"),
    Param("DBN", "head_hidden", "--head-hidden", "Supervised hidden layer sizes"),
    Param("DBN", "classifier", "--classifier/--regression", "Model is a classifier"),
    Param("DBN", "anneal_iters", "--anneal", "Initial annealing iterations for starting weights"),
    Param("DBN", "anneal_range", "--anneal-range", "Initial random range for starting weights"),
    Param("DBN", "sup_max_iter", "--sup-iter", "Supervised optimization max iterations"),
    Param("DBN", "sup_tol", "--sup-tol", "Supervised optimization convergence tolerance"),
    Param("DBN", "fine_tune", "--fine-tune/--no-fine-tune", "Complete model fine tuned"),
    Param("DBN", "fine_max_iter", "--fine-iter", "Complete model optimization max iterations"),
    Param("DBN", "fine_tol", "--fine-tol", "Complete model optimization convergence tolerance"),
    Param("DBN", "weight_penalty", "--sup-penalty", "Weight penalty"),
    Param("DBN", "allow_svd", "--svd/--no-svd", "Singular value decomposition allowed"),
    Param("DBN", "seed", "--seed", "Random seed"),
)
_BY_FIELD = {(p.owner, p.field): p for p in PARAMS}


def option_error(exc: DBNConfigError, renamed: dict[str, str] | None = None) -> CommandError:
    """``exc`` as a one-line error naming the option that sets its field (``renamed`` overrides a field's
    option, e.g. the layer sizes when they came from --first-unsupervised/--last-unsupervised)."""
    option = (renamed or {}).get(exc.field) or _BY_FIELD[(exc.owner, exc.field)].option
    value = ",".join(map(str, exc.value)) if isinstance(exc.value, tuple) else exc.value
    return CommandError(f"{option} {value}: {exc.rule}")


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def parameter_block(title: str, owner: str, cfg: object) -> list[str]:
    """DEEP.LOG's parameter list for ``cfg``, each line with the option that sets it."""
    lines = [title]
    for p in PARAMS:
        if p.owner == owner:
            lines.append(f"  {p.label} = {_shown(getattr(cfg, p.field))}  ({p.option})")
    return lines


def check_backend(option: str) -> str:
    """``--backend``: auto (the best usable OpenCL device, else NumPy with a note), numpy, opencl or
    opencl:<device>, as every command takes it."""
    key = option.strip().lower()
    if key in BACKENDS or (key.startswith("opencl:") and len(key) > len("opencl:")):
        return key
    raise CommandError(f"--backend {option!r}: expected auto, numpy, opencl or opencl:<device>")


def _sizes(text: str, option: str) -> tuple[int, ...]:
    parts = [s.strip() for s in text.split(",") if s.strip()]
    if len(parts) > MAX_LAYERS:
        raise CommandError(f"{option}: {len(parts)} layers; at most {MAX_LAYERS}")
    try:
        sizes = tuple(int(s) for s in parts)
    except ValueError:
        raise CommandError(f"{option} {text!r}: must be comma-separated layer sizes, e.g. 100,50") from None
    if any(s < 1 for s in sizes):
        raise CommandError(f"{option} {text}: layer sizes must be at least 1 (give '' for no layer)")
    return sizes


def _count(value: int, option: str, low: int) -> int:
    if not low <= value <= MAX_LAYERS + low:
        raise CommandError(f"{option} {value}: must be {low}-{MAX_LAYERS + low}")
    return value


@dataclass(frozen=True)
class LayerSpec:
    """Layer sizes and the option(s) a user gave them with (named in errors about them)."""

    sizes: tuple[int, ...]
    option: str


def layer_sizes(
    listed: str | None,
    default: str,
    count: int | None,
    first: int | None,
    last: int | None,
    *,
    section: str,
    list_option: str,
    output_counted: bool,
) -> LayerSpec:
    """Sizes from a list (``list_option``) or DEEP's architecture dialog (spec §6.3): ``count`` layers,
    ``first`` and ``last`` sizes, interior sizes interpolated. The supervised count includes the output
    layer (``output_counted``); with exactly one (hidden) layer, first and last must be equal."""
    names = (f"--{section}-layers", f"--first-{section}", f"--last-{section}")
    if count is None and first is None and last is None:
        return LayerSpec(_sizes(default if listed is None else listed, list_option), list_option)
    if listed is not None:
        raise CommandError(
            f"{list_option} and {names[0]}/{names[1]}/{names[2]} both give the {section} layer sizes: use one"
        )
    if count is None:
        raise CommandError(f"{names[1]}/{names[2]} need {names[0]} (how many {section} layers)")
    n = _count(count, names[0], 1 if output_counted else 0) - (1 if output_counted else 0)
    if n == 0:
        if first is not None or last is not None:
            raise CommandError(f"{names[1]}/{names[2]}: {names[0]} {count} has no {section} hidden layer")
        return LayerSpec((), names[0])
    if first is None:
        raise CommandError(f"{names[0]} {count} needs {names[1]} (neurons in the first {section} layer)")
    last = first if last is None else last
    for name, size in ((names[1], first), (names[2], last)):
        if size < 1:
            raise CommandError(f"{name} {size}: must be at least 1")
    if n == 1 and last != first:
        raise CommandError(
            f"{names[2]} {last}: with one {section} hidden layer it must equal {names[1]} {first}"
        )
    return LayerSpec(interpolated_sizes(n, first, last), f"{names[1]}/{names[2]}")


def check_output(
    path: Path, option: str, *, force: bool, inputs: tuple[Path, ...] = (), replace_ours: bool = True
) -> Path:
    """A file this command will write: not a folder, device or FIFO; never one of its inputs; an existing
    file is replaced only with ``force`` or, for logs and pictures (``replace_ours``), when it is one of
    ``neuronet deep``'s own. Its folder must exist or be creatable. Checked before any work."""
    text = os.fspath(path)
    if "\0" in text or not path.name or text.endswith(("/", os.sep)):
        raise CommandError(f"{option} {text!r}: give a file name to write")
    if path.exists():
        if path.is_dir():
            raise CommandOSError(f"{option} {path}: is a folder; give a file name to write")
        if not path.is_file():
            raise CommandOSError(f"{option} {path}: not a regular file (a device or FIFO is never written)")
        for given in inputs:
            if given.exists() and os.path.samefile(path, given):
                raise CommandError(f"{option} {path}: is an input of this command; write elsewhere")
        if not force and not (replace_ours and is_ours(path)):
            raise CommandOSError(
                f"{option} {path}: the file exists; choose a new name, or pass --force to replace it"
            )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise CommandOSError(f"{option} {path}: cannot create it in {folder}")
    return path


def distinct_outputs(*named: tuple[str, Path | None]) -> None:
    """Two outputs of one command must not be the same file (the second would replace the first)."""
    seen: dict[Path, str] = {}
    for option, path in named:
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            raise CommandError(f"{option} {path}: the same file as {seen[key]}")
        seen[key] = option
