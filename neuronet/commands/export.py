"""``neuronet export``: a trained model as ``NAME.onnx`` (+ ``NAME.mq5`` for an EA) for MetaTrader 5."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronet.commands import values
from neuronet.commands.options import check_out, flag


def export_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="A report folder of neuronet run/backtest or forecast --out, or its model file.",
            parser=values.path,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Folder to write to (default: the model file's folder).", parser=values.path
        ),
    ] = None,
    name: Annotated[
        str,
        typer.Option("--name", help="File name of the pair: NAME.onnx and NAME.mq5.", parser=values.text),
    ] = "model",
    last_model: Annotated[
        bool,
        flag(
            "--last-model",
            help="Export the last model of an EA retrained walk-forward (retrain_every); a backtest of it "
            "gives the EA's trades only after its last retraining.",
        ),
    ] = False,
) -> None:
    """Export a trained EA or forecaster: an ONNX model of its inputs, scaler and network, and for an EA an
    MQL5 Expert Advisor that embeds it and trades with the EA's rules."""
    if out is not None:
        check_out(out)  # before the model is read and its graph built and checked
    try:
        from strategies.export import export
    except ImportError as exc:
        from neuronet.commands.errors import CommandError

        raise CommandError(
            f"neuronet export needs the onnx extra ({exc.name}): pip install 'neuronet[onnx]'"
        ) from None
    done = export(source, out, name=name, last_model=last_model)
    typer.echo(f"parity: {done.windows_checked} windows of {done.bars} rows, largest {done.measure} "
               f"{done.max_difference:.1e} against the Python model")  # fmt: skip
    written = [done.onnx_path] if done.mq5_path is None else [done.onnx_path, done.mq5_path]
    typer.echo(f"wrote {' and '.join(map(str, written))}")
