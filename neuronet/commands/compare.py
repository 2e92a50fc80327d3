"""``neuronet compare REPORT REPORT...``: report folders side by side on one page, statistics and equity."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from backtests.compare import compare_page, read_report
from datafeeds.files import atomic_write_text
from neuronet.commands import values
from neuronet.commands.errors import CommandError
from neuronet.commands.options import Force, check_out

Reports = Annotated[
    list[Path],
    typer.Argument(
        help="Report folders (of backtest, run or live report) or their report.json files, two or more.",
        parser=values.path,
        show_default=False,
    ),
]
OutFile = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="The page to write (default: reports/compare-<time>.html); an existing file needs --force.",
        parser=values.path,
    ),
]


def compare_command(reports: Reports, out: OutFile = None, force: Force = False) -> None:
    """Compare reports side by side: every statistic in one table and the equity curves overlaid."""
    if len(reports) < 2:
        raise CommandError("compare needs two or more report folders (REPORT REPORT ...)")
    target = out or Path("reports") / f"compare-{datetime.now(UTC):%Y%m%d-%H%M%S}.html"
    if target.is_dir():
        raise IsADirectoryError(f"--out {target}: is a folder; give the path of the HTML page to write")
    if target.exists() and not force:
        raise FileExistsError(f"--out {target}: the file exists; choose another name, or pass --force")
    check_out(target.parent)
    docs = [read_report(r) for r in reports]  # every report read and checked before anything is written
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, compare_page(docs))
    typer.echo(f"compared {len(docs)} reports: {target}")
