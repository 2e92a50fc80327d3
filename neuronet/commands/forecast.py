"""``neuronet forecast``: train ATFNet (or PatchTST) on a forecasting CSV with the ATFNet paper's protocol.

The CSV has the common long-horizon layout (ETT, Exchange-rate, Weather, ...): a ``date`` column, then
numeric channels. Protocol (as the official ATFNet / Time-Series-Library code): chronological 70/10/20
split of the rows, each later split starting ``seq_len`` rows early so its first window has a full history;
standardisation fitted on the training rows only; early stopping on the validation loss (patience 3, best
weights restored); learning rate halved every epoch; MSE and MAE on the standardised test windows, reported
per horizon step next to the naive "repeat last value" forecast and a least-squares linear (DLinear-class)
baseline, plus the direction accuracy of the forecast move.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from nn.io import save
from strategies.forecast import (
    MODELS,
    LinearBaseline,
    build_forecaster,
    direction_accuracy,
    horizon_errors,
    naive_forecast,
    sliding_windows,
    train_forecaster,
)

FEATURES = ("all", "M", "S", "MS")


def load_series(path: Path, target: str, features: str) -> tuple[list[str], np.ndarray]:
    """Read ``path`` -> channel names and ``data (N, C)`` float64, the target channel LAST.

    ``all``/``M``: every channel; ``S``: the target alone; ``MS``: every channel in, the target scored.
    """
    if features not in FEATURES:
        raise ValueError(f"--features must be one of {', '.join(FEATURES)}, got {features!r}")
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{path}: is a folder, not a CSV file") from None
    except PermissionError:
        raise PermissionError(f"{path}: not readable (permission denied)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV ({exc})") from None
    lower = {str(c).strip().lower(): c for c in frame.columns}
    if "date" not in lower:
        raise ValueError(f"{path}: no 'date' column; expected the layout date,<channel>,<channel>,...")
    channels = [c for c in frame.columns if c != lower["date"]]
    if target not in channels:
        raise ValueError(f"{path}: no target column {target!r}; channels: {', '.join(map(str, channels))}")
    for name in channels:
        values = pd.to_numeric(frame[name], errors="coerce")
        bad = values.isna() & frame[name].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 2  # 1-based, after the header line
            raise ValueError(
                f"{path}: channel {name!r} is not numeric (row {row}: {frame[name].iloc[row - 2]!r})"
            )
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0]) + 2
            raise ValueError(f"{path}: channel {name!r} has a missing value at row {row}")
        frame[name] = values
    names = [target] if features == "S" else [c for c in channels if c != target] + [target]
    return [str(n) for n in names], frame[names].to_numpy(dtype=np.float64)


def split_borders(n: int, seq_len: int, pred_len: int, path: Path) -> list[tuple[int, int]]:
    """Row spans ``[(a, b)]`` of train/val/test for ``n`` rows: 70/10/20, val and test start seq_len early."""
    n_train, n_test = int(n * 0.7), int(n * 0.2)
    n_val = n - n_train - n_test
    spans = [(0, n_train), (n_train - seq_len, n_train + n_val), (n - n_test - seq_len, n)]
    need = int(np.ceil((seq_len + pred_len) / 0.1))  # the 10% validation split must hold one window
    if (
        n < seq_len + pred_len
        or any(b - a < seq_len + pred_len for a, b in spans)
        or min(a for a, _ in spans) < 0
    ):
        raise ValueError(
            f"{path}: {n} rows are too short for seq_len={seq_len} + pred_len={pred_len}: every split of the "
            f"70/10/20 protocol needs one full window (about {need} rows); lower --seq-len/--pred-len"
        )
    return spans


def _summary_steps(t: int) -> list[int]:
    return sorted({1, max(1, t // 4), max(1, t // 2), t})


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_forecast(
    csv: Path,
    target: str,
    *,
    features: str = "all",
    seq_len: int = 96,
    pred_len: int = 96,
    model: str = "atfnet",
    epochs: int = 10,
    batch_size: int = 256,
    lr: float = 1e-4,
    patience: int = 3,
    backend: str = "opencl",
    seed: int = 0,
    sizes: dict[str, Any] | None = None,
    progress: bool = False,
    model_path: Path | None = None,
) -> dict[str, Any]:
    """The whole protocol; returns the results document (also what ``--out`` writes as metrics.json).

    With ``model_path`` the trained model is saved there (``nn.io`` format) with the channel names and the
    training-split scaler in its metadata, so its inputs can be prepared exactly as in training.
    """
    for name, value in (
        ("--seq-len", seq_len),
        ("--pred-len", pred_len),
        ("--epochs", epochs),
        ("--batch-size", batch_size),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not lr > 0:
        raise ValueError(f"--lr must be > 0, got {lr}")
    if patience < 0:
        raise ValueError(f"--patience must be >= 0, got {patience}")
    names, data = load_series(csv, target, features)
    spans = split_borders(len(data), seq_len, pred_len, csv)
    train_rows = data[: spans[0][1]]
    mean, std = train_rows.mean(axis=0), train_rows.std(axis=0)
    std[std == 0] = 1.0  # a constant training channel stays at 0 instead of dividing by zero
    z = (data - mean) / std
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = (sliding_windows(z, seq_len, pred_len, a, b) for a, b in spans)
    net = build_forecaster(
        model, seq_len, len(names), pred_len, lr=lr, backend=backend, seed=seed, **(sizes or {})
    )
    t0 = time.perf_counter()
    history = train_forecaster(
        net,
        (x_tr, y_tr),
        (x_va, y_va),
        epochs=epochs,
        batch_size=batch_size,
        patience=patience,
        progress=progress,
    )
    train_s = time.perf_counter() - t0
    scored = slice(-1, None) if features == "MS" else slice(None)  # MS: the target channel only
    truth = y_te[:, :, scored]
    preds = {
        model: net.predict(x_te, batch_size=batch_size)[:, :, scored],
        "naive": naive_forecast(x_te, pred_len)[:, :, scored],
        "linear": LinearBaseline().fit(x_tr, y_tr).predict(x_te)[:, :, scored],
    }
    last = x_te[:, -1:, scored]
    if model_path is not None:
        meta = {
            "channels": names,
            "target": target,
            "features": features,
            "seq_len": seq_len,
            "pred_len": pred_len,
            "scaler_mean": mean.tolist(),
            "scaler_std": std.tolist(),
            "csv": str(csv),
        }
        save(net, model_path, meta)
    per_step = {k: {m: v.tolist() for m, v in horizon_errors(p, truth).items()} for k, p in preds.items()}
    return {
        "csv": str(csv),
        "target": target,
        "features": features,
        "channels": names,
        "seq_len": seq_len,
        "pred_len": pred_len,
        "model": model,
        "backend": net.backend.name,
        "parameters": net.parameter_count,
        "layer": net.layers[0].config(),
        "windows": {"train": len(x_tr), "val": len(x_va), "test": len(x_te)},
        "epochs": [
            {"epoch": r.epoch, "loss": r.loss, "val_loss": r.val_loss, "lr": r.lr, "wall_s": r.wall_s}
            for r in history.epochs
        ],
        "train_s": train_s,
        "mse": {k: float(np.mean(v["mse"])) for k, v in per_step.items()},
        "mae": {k: float(np.mean(v["mae"])) for k, v in per_step.items()},
        "direction_accuracy": {
            k: direction_accuracy(p, truth, last) for k, p in preds.items() if k != "naive"
        },
        "per_step": per_step,
    }


def format_table(doc: dict[str, Any]) -> str:
    """The console summary: MSE/MAE overall and at a few horizon steps, per forecaster."""
    keys = list(doc["mse"])
    steps = _summary_steps(doc["pred_len"])
    head = f"{'':<12}" + "".join(f"{k + ' MSE':>14}{k + ' MAE':>14}" for k in keys)
    lines = [head, "-" * len(head)]
    lines.append(
        f"{'all steps':<12}" + "".join(f"{doc['mse'][k]:>14.4f}{doc['mae'][k]:>14.4f}" for k in keys)
    )
    for s in steps:
        cells = "".join(
            f"{doc['per_step'][k]['mse'][s - 1]:>14.4f}{doc['per_step'][k]['mae'][s - 1]:>14.4f}"
            for k in keys
        )
        lines.append(f"{'step ' + str(s):<12}{cells}")
    acc = ", ".join(f"{k} {v:.3f}" for k, v in doc["direction_accuracy"].items())
    lines.append(f"direction accuracy of the forecast move: {acc}")
    return "\n".join(lines)


def write_results(doc: dict[str, Any], out: Path) -> list[Path]:
    """``metrics.json`` (everything) and ``per_horizon.csv`` (one row per step) under ``out``, atomically."""
    out.mkdir(parents=True, exist_ok=True)
    keys = list(doc["per_step"])
    rows = ["step," + ",".join(f"{k}_mse,{k}_mae" for k in keys)]
    for s in range(doc["pred_len"]):
        vals = ",".join(
            f"{doc['per_step'][k]['mse'][s]:.6g},{doc['per_step'][k]['mae'][s]:.6g}" for k in keys
        )
        rows.append(f"{s + 1},{vals}")
    paths = [out / "metrics.json", out / "per_horizon.csv"]
    _atomic_write(paths[0], json.dumps(doc, indent=1, allow_nan=True))
    _atomic_write(paths[1], "\n".join(rows) + "\n")
    return paths


def forecast(
    csv: Annotated[Path, typer.Option("--csv", help="CSV with a 'date' column, then numeric channels.")],
    target: Annotated[str, typer.Option("--target", help="Channel to forecast (scored alone with S/MS).")],
    features: Annotated[str, typer.Option(help="all (= M: every channel), S (target only), MS.")] = "all",
    seq_len: Annotated[int, typer.Option(help="Input window L (points).")] = 96,
    pred_len: Annotated[int, typer.Option(help="Forecast horizon T (points).")] = 96,
    model: Annotated[str, typer.Option(help=f"{' or '.join(MODELS)} (the T block alone).")] = "atfnet",
    epochs: Annotated[int, typer.Option(help="Maximum epochs (early stopping on validation).")] = 10,
    batch_size: Annotated[int, typer.Option(help="Windows per step.")] = 256,
    lr: Annotated[float, typer.Option(help="Adam learning rate, halved every epoch.")] = 1e-4,
    patience: Annotated[int, typer.Option(help="Early-stopping patience (epochs).")] = 3,
    d_model: Annotated[int, typer.Option(help="Width of both encoders.")] = 512,
    n_heads: Annotated[int, typer.Option(help="Attention heads.")] = 8,
    layers: Annotated[int, typer.Option(help="Encoder layers of each block.")] = 2,
    d_ff: Annotated[int, typer.Option(help="Feed-forward width.")] = 2048,
    dropout: Annotated[float, typer.Option(help="Dropout of both blocks.")] = 0.1,
    backend: Annotated[str, typer.Option(help="opencl or numpy.")] = "opencl",
    seed: Annotated[int, typer.Option(help="Initial weights and dropout masks.")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="Folder for metrics.json, per_horizon.csv, the model.")
    ] = None,
) -> None:
    """Train and evaluate a forecaster on a CSV with the ATFNet paper's protocol."""
    if model not in MODELS:
        raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"--dropout must be in [0, 1), got {dropout}")
    for name, value in (
        ("--d-model", d_model),
        ("--n-heads", n_heads),
        ("--layers", layers),
        ("--d-ff", d_ff),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if d_model % n_heads:
        raise ValueError(f"--d-model {d_model} must be a multiple of --n-heads {n_heads}")
    sizes: dict[str, Any] = dict(
        d_model=d_model, n_heads=n_heads, e_layers=layers, d_ff=d_ff, dropout=dropout
    )
    if model == "atfnet":
        sizes |= dict(fnet_d_model=d_model, fnet_d_ff=d_ff, fnet_layers=layers, complex_dropout=dropout)
    doc = run_forecast(
        csv,
        target,
        features=features,
        seq_len=seq_len,
        pred_len=pred_len,
        model=model,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        patience=patience,
        backend=backend,
        seed=seed,
        sizes=sizes,
        progress=True,
        model_path=None if out is None else out / "model",
    )
    w = doc["windows"]
    typer.echo(
        f"{doc['model']} on {csv.name} ({', '.join(doc['channels'])}; {doc['parameters']:,} parameters, "
        f"{doc['backend']}): {w['train']} train / {w['val']} val / {w['test']} test windows, "
        f"{len(doc['epochs'])} epochs in {doc['train_s']:.1f} s; standardised test metrics:"
    )
    typer.echo(format_table(doc))
    if out is not None:
        for path in [*write_results(doc, out), out / "model"]:
            typer.echo(f"wrote {path}")
