"""The candles of a multi-symbol run: ``--symbols`` (or the EA's own ``symbols``), each symbol loaded from
the same source with the same options, plus the symbols its profit and margin are converted through
(``backtests.broker.portfolio``), and for ``--model ohlc1m`` each symbol's M1 bars (``--m1-csv
SYMBOL=FILE``, or the source's own minutes), for ``--model ticks`` its ticks (``--ticks-csv SYMBOL=FILE``, or
the source's own ticks). A synthetic source gives each symbol its own seed from the
run's and a shock they share (correlation 0.5 of their returns), so a README example runs offline and gives
the same numbers every time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from backtests.broker.portfolio import conversion_pairs
from datafeeds import get_source, load_candles
from datafeeds.symbols import SymbolSpec, read_spec_file
from neuronet.commands.errors import CommandError
from neuronet.commands.options import _file_clock, _with_minutes, _with_ticks, market_data
from strategies import ExpertAdvisor

SYNTHETIC_CORRELATION = 0.5  # of the synthetic symbols' bar returns (-o correlation=... to change)


def symbol_list(text: str | None) -> tuple[str, ...]:
    """``--symbols EURUSD,GBPUSD`` as names; empty, repeated or blank names are one clear line."""
    if text is None:
        return ()
    names = tuple(s.strip().upper() for s in text.split(","))
    if not all(n.replace(".", "").replace("_", "").isalnum() for n in names):
        raise CommandError(f"--symbols {text!r}: expected names separated by commas, like EURUSD,GBPUSD")
    if len(set(names)) != len(names):
        raise CommandError(f"--symbols {text!r}: a symbol is named twice")
    return names


def minute_files(values: list[Path] | None, loaded: list[str], option: str = "--m1-csv") -> dict[str, Path]:
    """``--m1-csv SYMBOL=FILE`` (or ``option``'s) values as symbol -> file; a value without a symbol, a
    symbol named twice or one the run does not load is one clear line."""
    out: dict[str, Path] = {}
    example = "eu_ticks.csv" if option == "--ticks-csv" else "eu_m1.csv"
    for value in values or []:
        name, sep, file = str(value).partition("=")
        name = name.strip().upper()
        if not sep or not name or not file.strip():
            raise CommandError(
                f"{option} {value}: with several symbols give SYMBOL=FILE, like EURUSD={example}"
            )
        if name not in loaded:
            raise CommandError(f"{option} {value}: {name} is not a symbol of this run ({', '.join(loaded)})")
        if name in out:
            raise CommandError(f"{option}: {name} is given twice")
        out[name] = Path(file.strip())
    return out


def load_symbols(
    names: tuple[str, ...],
    source: str,
    timeframe,
    start,
    end,
    options: dict,
    currency: str,
    model: str = "open",
    m1_csv: list[Path] | None = None,
    specs: dict | None = None,
    ticks_csv: list[Path] | None = None,
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame] | None]:
    """Every symbol of ``names`` and the conversion pairs they need, from one source, and their M1 bars for
    ``model`` "ohlc1m" or their ticks for "ticks" (None otherwise)."""
    todo = list(names)
    todo += [p for p in conversion_pairs(names, currency, specs) if p not in todo]
    files = minute_files(m1_csv, todo)
    if model != "ohlc1m" and files:
        raise CommandError("--m1-csv is only used with --model ohlc1m")
    tick_files = minute_files(ticks_csv, todo, "--ticks-csv")
    if model != "ticks" and tick_files:
        raise CommandError("--ticks-csv is only used with --model ticks")
    frames: dict[str, pd.DataFrame] = {}
    minutes: dict[str, pd.DataFrame] = {}
    for i, name in enumerate(todo):
        opts = dict(options)
        if source == "synthetic":  # one path per symbol, moving together through a shock of the run's seed
            opts["seed"] = int(opts.get("seed", 0)) + i
            opts.setdefault("common_seed", int(options.get("seed", 0)))
            opts.setdefault("correlation", SYNTHETIC_CORRELATION)
        if model == "ticks":
            frames[name], _, minutes[name] = _with_ticks(
                source, name, timeframe, start, end, opts, tick_files.get(name)
            )
        elif model != "ohlc1m":
            frames[name] = load_candles(source, name, timeframe, start, end, **opts)
        elif name in files:
            frames[name] = load_candles(source, name, timeframe, start, end, **opts)
            minutes[name] = load_candles(
                "csv", name, "M1", start, end, path=str(files[name]), **_file_clock(opts)
            )
        else:
            frames[name], minutes[name], _ = _with_minutes(source, name, timeframe, start, end, opts, None)
    return frames, (minutes if model in ("ohlc1m", "ticks") else None)


def terminal_specs(
    names: tuple[str, ...], options: dict, currency: str, given: dict[str, SymbolSpec]
) -> dict[str, SymbolSpec]:
    """The specifications of ``names`` and of the pairs that convert their money into ``currency``, from
    the terminal's ``symbol_info`` (the ``mt5`` source with ``options``); the symbols ``given`` by a
    symbols file are not asked for. A symbol the terminal does not know is refused by name."""
    source = get_source("mt5", **options)
    try:
        out = {n: source.spec(n) for n in names if n not in given}
        pairs = conversion_pairs(names, currency, {**out, **given})
        out.update({p: source.spec(p) for p in pairs if p not in given})
    finally:
        source.close()
    return out


@dataclass(frozen=True)
class MarketRequest:
    """The data options of ``backtest``, ``run`` and ``optimize`` that choose the symbols and their data."""

    source: str
    options: dict
    symbol: str | None = None  # --symbol
    symbols: str | None = None  # --symbols
    symbols_file: Path | None = None  # --symbols-file
    timeframe: str | None = None
    start: str | None = None
    end: str | None = None
    model: str = "open"
    m1_csv: list[Path] | None = None
    ticks_csv: list[Path] | None = None


@dataclass(frozen=True)
class LoadedMarket:
    """What a run trades: the EA (with the symbols ``--symbols`` asked for), its candles (a frame, or one
    per symbol with the conversion pairs), the finer data of the modelling mode, the specifications of a
    ``--symbols-file`` (None: the built-in table)."""

    ea: type[ExpertAdvisor]
    candles: pd.DataFrame | dict[str, pd.DataFrame]
    m1: pd.DataFrame | dict[str, pd.DataFrame] | None
    ticks: pd.DataFrame | dict[str, pd.DataFrame] | None
    specs: dict[str, SymbolSpec] | None

    @property
    def main(self) -> pd.DataFrame:
        """The main chart's candles (the first symbol's)."""
        return next(iter(self.candles.values())) if isinstance(self.candles, dict) else self.candles


def load_market(ea: type[ExpertAdvisor], request: MarketRequest, currency: str) -> LoadedMarket:
    """The one route from the data options to what a run trades, shared by every command that runs an EA:
    the EA's own symbols or ``--symbols`` (the EA then trades those), each from the same source with the
    conversion pairs into ``currency``, M1 bars per symbol (``--m1-csv SYMBOL=FILE``), the
    specifications of ``--symbols-file``; one symbol on one timeframe loads as a single-symbol run."""
    r = request
    names = symbol_list(r.symbols) or tuple(ea.symbols)
    if r.symbols is not None and r.symbol is not None:
        raise CommandError("give --symbol or --symbols, not both")
    if r.symbols is not None and names != tuple(ea.symbols):  # the EA trades the symbols asked for
        ea = type(ea.__name__, (ea,), {"symbols": names, "__module__": ea.__module__})
    if len(names) > 1 or len(ea.timeframes) > 1:
        main = names or (r.symbol or "EURUSD",)
        specs = read_spec_file(r.symbols_file) if r.symbols_file is not None else None
        if r.source == "mt5":  # the terminal's own conditions; a symbols file still overrides them
            specs = {**terminal_specs(main, r.options, currency, specs or {}), **(specs or {})}
        frames, fine = load_symbols(
            main, r.source, r.timeframe, r.start, r.end, r.options, currency, r.model, r.m1_csv, specs,
            r.ticks_csv,
        )  # fmt: skip
        m1, ticks = (None, fine) if r.model == "ticks" else (fine, None)
        return LoadedMarket(ea, frames, m1, ticks, specs)
    if r.symbols_file is not None:
        raise CommandError("--symbols-file gives the specifications of a multi-symbol run (--symbols)")
    one = r.symbol or (names[0] if names else None)  # --symbols GBPUSD: one symbol, that one
    df, m1, ticks = market_data(r.source, one, r.timeframe, r.start, r.end, r.options, r.model, r.m1_csv,
                                r.ticks_csv)  # fmt: skip
    return LoadedMarket(ea, df, m1, ticks, None)
