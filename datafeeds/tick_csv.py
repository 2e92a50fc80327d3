"""Ticks from a file of MetaTrader 5's "Export ticks" (Symbols window, Ticks tab).

The terminal writes one tab-separated line per tick under a header line:

    <DATE>	<TIME>	<BID>	<ASK>	<LAST>	<VOLUME>	<FLAGS>
    2024.01.02	00:00:00.123	1.10412	1.10415			6
    2024.01.02	00:00:00.301		1.10416			4

A field is empty where that price did not change with the tick (the ``FLAGS`` say which did), so bid
and ask are carried forward from the line before; a file whose first tick lacks a bid or an ask has
nothing to carry and is refused. ``<LAST>``, ``<VOLUME>`` and ``<FLAGS>`` may be missing (FX quotes).
Times are the broker's (``clock=``, as for candle files) and come back in UTC. UTF-8 and UTF-16 (the
terminal's own encoding, with a byte-order mark) are both read. Every problem raises ``TickDataError``
naming the file and its line.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from datafeeds.clock import UTC, BrokerClock, utc_bound
from datafeeds.files import atomic_write_text
from datafeeds.mt5_csv import _decode
from datafeeds.synthetic import symbol_defaults
from datafeeds.ticks import TickDataError, TickMeta, make_ticks, tick_meta
from neuronet.userfiles import NotAFileError, open_regular

NEEDED = ("<DATE>", "<TIME>", "<BID>", "<ASK>")
OPTIONAL = ("<LAST>", "<VOLUME>", "<FLAGS>")
HEADER = "\t".join(NEEDED + OPTIONAL) + "\n"


def read_tick_csv(
    path: str | os.PathLike, *, symbol: str | None = None, digits: int | None = None, clock: BrokerClock = UTC
) -> pd.DataFrame:
    """A tick frame (``datafeeds.ticks``) from an exported tick file; ``symbol`` defaults to the name's
    leading letters (``EURUSD_202401020000_202401030000.csv``), ``digits`` to the most decimals seen."""
    path = Path(path)
    origin = str(path)
    try:
        with open_regular(path, "tick file") as f:  # not a folder, a device or a pipe
            raw = f.read()
    except (NotAFileError, IsADirectoryError, FileNotFoundError):
        raise  # one line naming the path already
    except OSError as exc:
        raise TickDataError(origin, f"cannot read the tick file: {exc.strerror or exc}") from None
    text = _decode(raw, origin)
    first, _, body = text.partition("\n")
    names = first.strip().split("\t")
    if any(n not in names for n in NEEDED) or any(n not in (*NEEDED, *OPTIONAL) for n in names):
        raise TickDataError(
            origin,
            f"not a MetaTrader tick export: the header must be tab-separated {' '.join(NEEDED + OPTIONAL)} "
            f"(the last three optional), got {first.strip()[:80]!r}",
            line=1,
        )
    try:
        table = pd.read_csv(
            io.StringIO(body), sep="\t", header=None, names=names, dtype=str, keep_default_na=False,
            skip_blank_lines=False, index_col=False, on_bad_lines="error", engine="c",
        )  # fmt: skip
    except pd.errors.ParserError as exc:
        raise _unparsable(origin, body, len(names), exc) from None
    table = table.iloc[: _used_rows(table)]
    lines = np.arange(len(table)) + 2  # file lines: the header is line 1
    if not len(table):
        raise TickDataError(origin, "no ticks in the file", line=1)
    stamps = pd.to_datetime(
        table["<DATE>"] + " " + table["<TIME>"], format="%Y.%m.%d %H:%M:%S.%f", errors="coerce"
    )
    _refuse(origin, lines, stamps.isna().to_numpy(), "a date and time like 2024.01.02 00:00:00.123")
    prices = {}
    for name in ("<BID>", "<ASK>", "<LAST>", "<VOLUME>"):
        if name not in table:
            continue
        text_col = table[name].str.strip()
        values = pd.to_numeric(text_col, errors="coerce")
        _refuse(origin, lines, (values.isna() & (text_col != "")).to_numpy(), f"a number in {name}")
        # Prices hold until they change; a volume belongs to its own tick (none: no trade).
        values = values.fillna(0.0) if name == "<VOLUME>" else values.ffill()
        prices[name] = values.to_numpy(dtype=np.float64)
    for name in ("<BID>", "<ASK>"):
        _refuse(origin, lines, np.isnan(prices[name]), f"{name}: the first tick has none to carry forward")
    broker_ns = stamps.to_numpy().astype("datetime64[ns]").astype(np.int64)
    seconds = broker_ns // 1_000_000_000
    utc_ns = clock.to_utc_seconds(seconds) * 1_000_000_000 + (broker_ns - seconds * 1_000_000_000)
    name = symbol or (re.match(r"[A-Za-z0-9.#]+?(?=_|$)", path.stem) or re.match(r".*", path.stem)).group(0)
    if digits is None:
        digits = _decimals(table["<BID>"]) or symbol_defaults(name)[0]
    meta = TickMeta(name.upper(), int(digits), f"csv:{path.name}")
    return make_ticks(
        utc_ns, prices["<BID>"], prices["<ASK>"], meta, last=prices.get("<LAST>"),
        volume=prices.get("<VOLUME>"), lines=lines, origin=origin,
    )  # fmt: skip


def _unparsable(origin: str, body: str, fields: int, exc: Exception) -> TickDataError:
    """The error of a body pandas cannot split into the header's fields, naming the first line at fault
    (pandas counts lines of the body it was given, not of the file, and names no file)."""
    for number, line in enumerate(body.split("\n"), start=2):  # file lines: the header is line 1
        count = line.count("\t") + 1
        if count > fields:
            return TickDataError(
                origin, f"{count} tab-separated fields where the header names {fields}", line=number
            )
    return TickDataError(origin, f"not readable as a tick export ({' '.join(str(exc).split())})")


def _used_rows(table: pd.DataFrame) -> int:
    """Rows up to the last non-blank one (a file may end with empty lines)."""
    filled = (table != "").any(axis=1).to_numpy()
    return int(np.flatnonzero(filled)[-1]) + 1 if filled.any() else 0


def _refuse(origin: str, lines: np.ndarray, bad: np.ndarray, wanted: str) -> None:
    if bad.any():
        where = np.flatnonzero(bad)
        more = f" ({len(where)} lines)" if len(where) > 1 else ""
        raise TickDataError(origin, f"expected {wanted}{more}", line=int(lines[where[0]]))


def _decimals(column: pd.Series) -> int:
    sample = column[:10_000]
    decimals = sample.str.partition(".")[2].str.strip().str.len()
    return int(decimals.max()) if len(decimals) else 0


class TickCsvSource:
    """An exported tick file as a tick source (``load_ticks``); times in the file are broker time."""

    def __init__(self, path: str, *, clock: BrokerClock | str = UTC, digits: int | None = None) -> None:
        self.path = path
        self.clock = BrokerClock.parse(clock) if isinstance(clock, str) else clock
        self.digits = digits

    def load_ticks(self, symbol: str | None = None, start=None, end=None) -> pd.DataFrame:
        """The file's ticks in ``[start, end)`` (UTC)."""
        ticks = read_tick_csv(self.path, symbol=symbol, digits=self.digits, clock=self.clock)
        lo, hi = utc_bound(start, "start"), utc_bound(end, "end")
        keep = np.ones(len(ticks), dtype=bool)
        if lo is not None:
            keep &= ticks.index >= lo
        if hi is not None:
            keep &= ticks.index < hi
        if keep.all():
            return ticks
        out = ticks[keep]
        out.attrs["ticks"] = ticks.attrs["ticks"]
        return out


def write_tick_csv(ticks: pd.DataFrame, path: str | os.PathLike, *, clock: BrokerClock = UTC) -> Path:
    """Write ticks as the terminal exports them (every field given, ``FLAGS`` 6: bid and ask), in the
    broker time of ``clock``; atomically. ``read_tick_csv`` reads the file back exactly."""
    meta = tick_meta(ticks)
    ns = ticks.index.as_unit("ns").asi8
    seconds = ns // 1_000_000_000
    broker = pd.to_datetime(clock.to_broker_seconds(seconds) * 1_000_000_000 + (ns - seconds * 1_000_000_000))
    stamps = broker.strftime("%Y.%m.%d\t%H:%M:%S.") + pd.Index(
        (ns // 1_000_000 % 1000).astype(str)
    ).str.zfill(3)
    fmt = f"%.{meta.digits}f"
    bid = np.char.mod(fmt, ticks["bid"].to_numpy())
    ask = np.char.mod(fmt, ticks["ask"].to_numpy())
    rows = pd.Series(stamps) + "\t" + bid + "\t" + ask + "\t\t\t6"
    return atomic_write_text(path, HEADER + "\n".join(rows) + "\n")
