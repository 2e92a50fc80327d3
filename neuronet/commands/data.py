"""``neuronet data ...``: inspect, export and validate candles, and list or clear the local cache.

``neuronet data show`` with no arguments shows the embedded EURUSD H1 sample and needs no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from datafeeds import (
    SOURCES,
    BrokerClock,
    Repair,
    ValidationReport,
    guess_clock,
    load_validated,
    meta_of,
    validate,
    write_mt5_csv,
)
from datafeeds.files import UnsafePathError, inside, is_inside, is_stale, output_path
from datafeeds.mt5_csv import read_mt5_csv_report
from datafeeds.store import CandleStore, StoreEntry, cache_root, read_npz
from neuronet.commands import values
from neuronet.commands.errors import CommandError
from neuronet.commands.options import (
    BrokerTz,
    CsvPath,
    End,
    Opts,
    Source,
    Start,
    data_request,
    flag,
)

app = typer.Typer(help="Inspect, export and validate candle data.", no_args_is_help=True)
cache_app = typer.Typer(
    help="The local cache of pulled and downloaded history (folder: $NEURONET_CACHE or the platform's).",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


def _load(
    symbol: str | None,
    timeframe: str | None,
    source: str,
    path: Path | None,
    start: str | None,
    end: str | None,
    broker_tz: str | None,
    seed: int | None,
    opts: list[str],
    repair: bool,
    no_cache: bool = False,
    refresh: bool = False,
) -> ValidationReport:
    if no_cache and refresh:
        raise CommandError("--no-cache and --refresh exclude each other")
    source, options = data_request(source, path, opts, broker_tz, seed, start=start, end=end)
    cache = False if no_cache else ("refresh" if refresh else None)
    policy = Repair.all() if repair else None
    return load_validated(source, symbol, timeframe, start, end, repair=policy, cache=cache, **options)


Symbol = Annotated[
    str | None,
    typer.Argument(help="Symbol, e.g. EURUSD (default: the source's own).", parser=values.text),
]
Frame = Annotated[
    str | None,
    typer.Argument(help="Timeframe M1 .. MN1 (default: the source's own, H1).", parser=values.timeframe),
]
Seed = Annotated[
    int | None, typer.Option("--seed", help="Seed for --source synthetic.", min=0, max=values.MAX_SEED)
]
RepairFlag = Annotated[bool, flag("--repair", help="Drop duplicate/invalid bars and report them.")]
NoCache = Annotated[
    bool,
    flag("--no-cache", help="Bypass the local cache of a remote source (mt5): fetch everything."),
]
Refresh = Annotated[
    bool, flag("--refresh", help="Fetch the window again and replace it in the local cache (mt5).")
]


@app.command()
def show(
    symbol: Symbol = None,
    timeframe: Frame = None,
    source: Source = "sample",
    path: CsvPath = None,
    start: Start = None,
    end: End = None,
    bars: Annotated[int, typer.Option("--bars", "-n", min=0, help="How many of the last bars to list.")] = 10,
    broker_tz: BrokerTz = None,
    seed: Seed = None,
    opt: Opts = None,
    repair: RepairFlag = False,
    no_cache: NoCache = False,
    refresh: Refresh = False,
) -> None:
    """Summary of a candle series (bars, gaps, spread, prices) and its last bars."""
    report = _load(
        symbol, timeframe, source, path, start, end, broker_tz, seed, opt or [], repair, no_cache, refresh
    )
    typer.echo(summary(report))
    _clock_hint(report)
    if bars and len(report.frame):
        typer.echo("")
        typer.echo(f"last {min(bars, len(report.frame))} bars (UTC):")
        typer.echo(bar_table(report.frame.iloc[-bars:]))


@app.command()
def export(
    out: Annotated[
        Path, typer.Option("--out", help="CSV file to write (replaced atomically).", parser=values.path)
    ],
    symbol: Symbol = None,
    timeframe: Frame = None,
    fmt: Annotated[
        str, typer.Option("--format", help="mt5 (the terminal's Export bars) or csv.", parser=values.text)
    ] = "mt5",
    source: Source = "sample",
    path: CsvPath = None,
    start: Start = None,
    end: End = None,
    broker_tz: BrokerTz = None,
    seed: Seed = None,
    opt: Opts = None,
    repair: RepairFlag = False,
    no_cache: NoCache = False,
    refresh: Refresh = False,
) -> None:
    """Write candles as a MetaTrader CSV file, times in the data's broker clock (--broker-tz)."""
    if fmt not in ("mt5", "csv"):
        raise CommandError(f"--format must be mt5 or csv, not {fmt!r}")
    out = output_path(out)
    report = _load(
        symbol, timeframe, source, path, start, end, broker_tz, seed, opt or [], repair, no_cache, refresh
    )
    frame = report.frame
    if not len(frame):
        window = f" from {start or 'the start'} to {end or 'the end'} (--from/--to)" if start or end else ""
        raise CommandError(f"no bars to export{window}; {out} was not written")
    written = write_mt5_csv(frame, out, dialect=fmt)
    meta = meta_of(frame)
    typer.echo(f"wrote {len(frame)} {meta.symbol} {meta.timeframe.name} bars to {written}")
    for change in report.changes:
        typer.echo(f"repaired    {change}")


@app.command("validate")
def validate_file(
    file: Annotated[
        Path, typer.Argument(help="A MetaTrader CSV file or a candle store .npz file.", parser=values.path)
    ],
    symbol: Annotated[
        str | None, typer.Option("--symbol", help="Symbol (default: from the file name).", parser=values.text)
    ] = None,
    timeframe: Annotated[
        str | None,
        typer.Option("--timeframe", help="Timeframe (default: inferred).", parser=values.timeframe),
    ] = None,
    broker_tz: BrokerTz = None,
    repair: RepairFlag = False,
) -> None:
    """Check a candle file; exit 0 and print the report when valid, else one line naming the problem."""
    policy = Repair.all() if repair else None
    if file.suffix.lower() == ".npz":
        report = validate(read_npz(file), str(file), policy)
    else:
        clock = BrokerClock.parse(broker_tz) if broker_tz else BrokerClock()
        report = read_mt5_csv_report(file, symbol=symbol, timeframe=timeframe, clock=clock, repair=policy)
    typer.echo(report.format())
    _clock_hint(report)


def _clock_hint(report: ValidationReport) -> None:
    """Say so when gaps read as UTC look like a broker's weekends (a file exported in server time)."""
    clock = guess_clock(report)
    if clock is not None:
        typer.echo(
            f"hint: with --broker-tz {clock.text()} every gap is a market closure; "
            "if these times are the broker's server time, pass it"
        )


CacheSource = Annotated[
    str | None,
    typer.Option("--source", "-s", help="Only this source (mt5, dukascopy).", parser=values.source),
]


@cache_app.command("list")
def cache_list(source: CacheSource = None) -> None:
    """What the cache holds: per series its first and last bar, bar count and file size; and the
    temporary files left by interrupted writers."""
    store = CandleStore()
    entries = store.entries(_cache_source(source))
    typer.echo(f"cache folder {cache_root()}")
    if entries:
        typer.echo(cache_table(entries))
    archive = _archive_files(source, None)
    if archive:
        size = sum(p.stat().st_size for p in archive)
        typer.echo(f"dukascopy archive files: {len(archive)}, {_size(size)} in {cache_root() / 'dukascopy'}")
    temps = _temp_files(store, source, None)
    if temps:
        stale, size = sum(is_stale(p) for p in temps), sum(p.stat().st_size for p in temps)
        typer.echo(
            f"temporary files of interrupted writes: {len(temps)}, {_size(size)} ({stale} older than "
            "10 minutes, removed by `neuronet data cache clear`)"
        )
    if not entries and not archive and not temps:
        typer.echo("the cache is empty" + (f" for source {source}" if source else ""))


@cache_app.command("clear")
def cache_clear(
    source: CacheSource = None,
    symbol: Annotated[
        str | None, typer.Option("--symbol", help="Only this symbol.", parser=values.text)
    ] = None,
) -> None:
    """Delete cached history (all of it, or of one source and/or symbol); it is fetched again when needed.
    Temporary files of interrupted writes older than 10 minutes go too."""
    store = CandleStore()
    try:  # a symbol is a folder name of the cache: one that leads out of it is refused before any delete
        stale = [p for p in _temp_files(store, source, symbol) if is_stale(p)]
        archive = _archive_files(source, symbol)  # checked before anything is deleted
    except UnsafePathError as exc:
        raise CommandError(f"--symbol {symbol!r}: {exc}") from None
    gone = store.clear(_cache_source(source), symbol)
    for path in archive + stale:
        path.unlink(missing_ok=True)
    size = sum(e.size for e in gone)
    typer.echo(f"removed {len(gone)} cached series ({_size(size)})")
    if archive:
        typer.echo(f"removed {len(archive)} dukascopy archive files")
    if stale:
        typer.echo(f"removed {len(stale)} temporary files of interrupted writes")


def cache_table(entries: list[StoreEntry]) -> str:
    """Stored series as a fixed-width table; unreadable files are listed with their problem."""
    header = (
        f"{'source':<10} {'feed':<22} {'symbol':<10} {'tf':<4} {'clock':<10} "
        f"{'first bar':<16}  {'last bar':<16}  {'bars':>9}  {'size':>9}"
    )
    rows = [header]
    for e in entries:
        if e.problem:
            rows.append(f"{e.source:<10} unreadable: {e.problem}")
            continue
        first = _stamp(e.first) if e.first is not None else "-"
        last = _stamp(e.last) if e.last is not None else "-"
        rows.append(
            f"{e.source:<10} {e.feed or '-':<22} {e.symbol:<10} {e.timeframe:<4} {e.clock:<10} "
            f"{first:<16}  {last:<16}  {e.bars:>9}  {_size(e.size):>9}"
        )
    return "\n".join(rows)


def _cache_source(source: str | None) -> str | None:
    """The candle store's folder for ``--source``; None for all, or for dukascopy's archive files alone."""
    if source is None:
        return None
    key = source.strip().lower()
    if key not in SOURCES:
        raise CommandError(f"unknown candle source {source!r}; choose one of {', '.join(SOURCES)}")
    return key


def _archive_files(source: str | None, symbol: str | None) -> list[Path]:
    """Dukascopy's downloaded archive files in their default folder (what ``--source dukascopy`` adds)."""
    return _dukascopy_files("*.bi5", source, symbol)


def _dukascopy_files(pattern: str, source: str | None, symbol: str | None) -> list[Path]:
    if source is not None and source.strip().lower() != "dukascopy":
        return []
    root = cache_root() / "dukascopy"
    folder = inside(root, symbol.strip().upper()) if symbol else root
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.rglob(pattern)) if p.is_file() and is_inside(root, p)]


def _temp_files(store: CandleStore, source: str | None, symbol: str | None) -> list[Path]:
    """Temporary files of interrupted writes in the candle store and Dukascopy's archive folder."""
    store_temps = store.temp_files(_cache_source(source))
    if symbol:
        store_temps = [p for p in store_temps if p.parent.name == symbol.strip().upper()]
    return store_temps + _dukascopy_files(".*.tmp", source, symbol)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def summary(report: ValidationReport) -> str:
    """The text block of ``data show``: what the series is, its gaps, spreads and price range."""
    df = report.frame
    meta = meta_of(df)
    lines = [f"{meta.symbol} {meta.timeframe.name}   source {report.origin}"]
    clock = meta.clock
    clock_text = "UTC" if clock == BrokerClock() else f"UTC{clock.utc_offset_hours:+g}"
    clock_text += f" ({clock.dst} DST)" if clock.dst != "none" else ""
    lines.append(f"clock        {clock_text}, times shown in UTC; {meta.digits} digits")
    if not len(df):
        lines.append("bars         0 in the requested window")
        return "\n".join(lines)
    lines.append(f"bars         {len(df)}")
    lines.append(f"first bar    {_stamp(df.index[0])}")
    lines.append(f"last bar     {_stamp(df.index[-1])}")
    exp, unexp = report.expected_gaps, report.unexpected_gaps
    lines.append(
        f"gaps         {len(exp)} expected ({sum(g.missing for g in exp)} bars, market closed), "
        f"{len(unexp)} unexpected ({sum(g.missing for g in unexp)} bars)"
    )
    for g in unexp[:5]:
        lines.append(f"  missing {g.missing} bars between {_stamp(g.before)} and {_stamp(g.after)}")
    if len(unexp) > 5:
        lines.append(f"  ... and {len(unexp) - 5} more unexpected gaps")
    spread = df["spread"].to_numpy()
    lines.append(
        f"spread       min {spread.min()}  median {np.median(spread):g}  mean {spread.mean():.1f}  "
        f"max {spread.max()} points"
    )
    d = meta.digits
    low, high, last = df["low"].min(), df["high"].max(), df["close"].iloc[-1]
    lines.append(f"price        low {low:.{d}f}  high {high:.{d}f}  last {last:.{d}f}")
    lines.append(f"tick volume  {int(df['tick_volume'].sum())} total, {df['tick_volume'].mean():.0f} per bar")
    lines.extend(f"repaired     {c}" for c in report.changes)
    return "\n".join(lines)


def bar_table(df: pd.DataFrame) -> str:
    """Bars as a fixed-width table, prices with the symbol's digits."""
    d = meta_of(df).digits
    names = ("open", "high", "low", "close")
    header = f"{'time':<16}  " + "  ".join(f"{n:>10}" for n in names) + f"  {'tick_vol':>9}  {'spread':>6}"
    rows = [header]
    for t, o, h, lo, c, v, s in zip(
        df.index, df["open"], df["high"], df["low"], df["close"], df["tick_volume"], df["spread"], strict=True
    ):
        rows.append(
            f"{_stamp(t):<16}  {o:>10.{d}f}  {h:>10.{d}f}  {lo:>10.{d}f}  {c:>10.{d}f}  {v:>9}  {s:>6}"
        )
    return "\n".join(rows)


def _stamp(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%d %H:%M")
