"""``neuronet export``: a trained EA as ``NAME.onnx`` + ``NAME.mq5`` for MetaTrader 5."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def export_command(
    source: Annotated[
        Path, typer.Argument(help="A report folder of neuronet run/backtest, or its model file.")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder to write to (default: the model file's folder).")
    ] = None,
    name: Annotated[
        str, typer.Option("--name", help="File name of the pair: NAME.onnx and NAME.mq5.")
    ] = "model",
) -> None:
    """Export a trained EA: an ONNX model of its features, scaler and network, and an MQL5 Expert Advisor
    that embeds it and trades with the EA's rules."""
    try:
        from strategies.export import export
    except ImportError as exc:
        from neuronet.commands.errors import CommandError

        raise CommandError(
            f"neuronet export needs the onnx extra ({exc.name}): pip install 'neuronet[onnx]'"
        ) from None
    done = export(source, out, name=name)
    typer.echo(f"parity: {done.windows_checked} windows of {done.bars} bars, largest probability difference "
               f"{done.max_difference:.1e} against the Python EA")  # fmt: skip
    typer.echo(f"wrote {done.onnx_path} and {done.mq5_path}")
