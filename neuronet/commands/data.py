"""``neuronet data ...``: inspect, export and validate candles."""

import typer

app = typer.Typer(help="Inspect, export and validate candle data.", no_args_is_help=True)
