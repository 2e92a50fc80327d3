"""MetaTrader's CSV bar files: read and write the terminal's "Export bars" format and its common variants.

Read:
- the terminal's export: tab-separated, header ``<DATE> <TIME> <OPEN> <HIGH> <LOW> <CLOSE> <TICKVOL> <VOL>
  <SPREAD>``, dates ``2017.04.19``, times ``09:00:00`` (D1 and longer files may omit ``<TIME>``);
- comma- or semicolon-separated files with ``Date,Time,Open,High,Low,Close,Volume`` (no brackets), or one
  date-time column, dates with ``.``, ``-`` or ``/``, times with or without seconds;
- MetaTrader 4's header-less history export (``2017.04.19,09:00,o,h,l,c,volume``).
A lone ``Volume`` column is the tick volume (MetaTrader's export counts ticks).

Times in these files are broker server time: pass the broker's ``clock`` to get true UTC (the default clock
is UTC). Write uses the frame's own clock, so a read-write round trip gives the same text back.

Every malformed file raises ``CandleDataError`` with one line naming the file and the 1-based line number.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import TypedDict, Unpack

import numpy as np
import pandas as pd

from datafeeds.candles import CandleMeta, make_frame, meta_of
from datafeeds.clock import UTC, BrokerClock
from datafeeds.errors import CandleDataError, DataError
from datafeeds.files import atomic_write, regular_file
from datafeeds.timeframes import Timeframe
from datafeeds.validate import Repair, ValidationReport, validate

_ALIASES = {
    "date": "date",
    "day": "date",
    "time": "time",
    "datetime": "datetime",
    "date_time": "datetime",
    "timestamp": "datetime",
    "gmt time": "datetime",
    "local time": "datetime",
    "": "datetime",  # pandas writes the index column without a name
    "open": "open",
    "high": "high",
    "low": "low",
    "close": "close",
    "tickvol": "tick_volume",
    "tick_volume": "tick_volume",
    "tickvolume": "tick_volume",
    "volume": "volume",
    "vol": "real_volume",
    "real_volume": "real_volume",
    "realvolume": "real_volume",
    "spread": "spread",
}
_INT_COLUMNS = {"tick_volume": np.uint64, "real_volume": np.uint64, "spread": np.int32}
_TEXT_COLUMNS = ("date", "time", "datetime")
# Prices must parse to the same float as Python's float(text) for exact round trips: pandas 3 does so by
# default (and deprecates the option); pandas 2 needs the round-trip parser asked for.
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
_MT4_HEADERLESS = ("date", "time", "open", "high", "low", "close", "tick_volume")
_MT5_HEADER = "\t".join(
    f"<{c}>" for c in ("DATE", "TIME", "OPEN", "HIGH", "LOW", "CLOSE", "TICKVOL", "VOL", "SPREAD")
)
_CSV_HEADER = "Date,Time,Open,High,Low,Close,Volume"
_DATE_RE = re.compile(r"^\d{4}([.\-/])\d{1,2}\1\d{1,2}")


class CsvOptions(TypedDict, total=False):
    """The reading options of ``read_mt5_csv`` and ``read_mt5_csv_report`` (all keyword-only)."""

    symbol: str | None
    timeframe: Timeframe | str | int | None
    digits: int | None
    clock: BrokerClock
    repair: Repair | None


def read_mt5_csv(path: str | os.PathLike, **options: Unpack[CsvOptions]) -> pd.DataFrame:
    """Read a MetaTrader-style CSV file into a validated canonical frame.

    ``symbol`` defaults to the file name up to the first ``_`` (``EURUSD_H1.csv`` -> EURUSD); ``timeframe``
    is inferred from the most common spacing of bars when not given; ``digits`` from the longest decimal
    part of the prices; ``clock`` (default UTC) is the broker clock the file's times are in; ``repair``
    opts in to dropping bad rows.
    """
    return read_mt5_csv_report(path, **options).frame


def read_mt5_csv_report(
    path: str | os.PathLike,
    *,
    symbol: str | None = None,
    timeframe: Timeframe | str | int | None = None,
    digits: int | None = None,
    clock: BrokerClock = UTC,
    repair: Repair | None = None,
) -> ValidationReport:
    """``read_mt5_csv`` returning the whole validation report (gaps, repairs) with the frame."""
    path = Path(path)
    origin = str(path)
    names, table, line_numbers, sample_rows = _parse(path, origin)
    n = len(line_numbers)
    broker = _times(table, names, line_numbers, origin)
    data = {name: table[name] for name in ("open", "high", "low", "close")}
    for name, dtype in _INT_COLUMNS.items():
        data[name] = table[name] if name in table else np.zeros(n, dtype=dtype)
    if digits is None:
        digits = _digits(data, names, sample_rows)
    tf = Timeframe.parse(timeframe) if timeframe is not None else _infer_timeframe(broker, origin)
    meta = CandleMeta(
        (symbol or re.split(r"[_\-. ]", path.stem)[0] or path.stem).upper(), tf, int(digits), clock, origin
    )
    index = pd.to_datetime(clock.to_utc_seconds(broker), unit="s", utc=True)
    df = make_frame(data, index, meta)
    return validate(df, origin, repair, lines=line_numbers)


def write_mt5_csv(
    df: pd.DataFrame, path: str | os.PathLike, *, dialect: str = "mt5", digits: int | None = None
) -> Path:
    """Write a frame as a MetaTrader CSV file, atomically; times in the frame's broker clock.

    ``dialect="mt5"`` is the terminal's export (all columns, exact round trip); ``"csv"`` is the
    comma-separated ``Date,Time,Open,High,Low,Close,Volume`` variant, which has no spread or real volume.
    Prices are written with ``digits`` decimals (default: the frame's); a price that needs more decimals is
    an error rather than a silent rounding.
    """
    if dialect not in ("mt5", "csv"):
        raise DataError(f"CSV dialect must be 'mt5' or 'csv', not {dialect!r}")
    meta = meta_of(df)
    digits = meta.digits if digits is None else int(digits)
    broker = meta.clock.to_broker_seconds(df.index.as_unit("s").asi8)
    sep, date_fmt = ("\t", "%Y.%m.%d") if dialect == "mt5" else (",", "%Y-%m-%d")
    fields = list(_stamps(broker, date_fmt))
    for name in ("open", "high", "low", "close"):
        fields.append(_fixed(df[name].to_numpy(), digits, name, df))
    names = ("tick_volume", "real_volume", "spread") if dialect == "mt5" else ("tick_volume",)
    fields.extend(_integers(df[name].to_numpy()) for name in names)
    header = (_MT5_HEADER if dialect == "mt5" else _CSV_HEADER).encode() + b"\n"
    payload = header + _join_rows(fields, sep.encode())
    return atomic_write(path, lambda f: f.write(payload))


# Text is assembled as bytes in (N, W) matrices, one per field, right-aligned with per-row lengths, then
# scattered into one buffer: no Python object per value, so a million bars take about a second.
Field = tuple[np.ndarray, np.ndarray]  # ((N, W) uint8 ASCII, (N,) used length counted from the right)


def _stamps(broker: np.ndarray, date_fmt: str) -> tuple[Field, Field]:
    """Date and time fields, formatted once per distinct day and time of day."""
    days, day_of = np.unique(broker // 86400, return_inverse=True)
    clock_times, time_of = np.unique(broker % 86400, return_inverse=True)
    dates = pd.to_datetime(days, unit="D").strftime(date_fmt).tolist()
    times = [f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}" for t in clock_times.tolist()]
    out = []
    for table, which in ((dates, day_of), (times, time_of)):
        width = len(table[0]) if table else 0
        mat = np.frombuffer("".join(table).encode(), dtype=np.uint8).reshape(len(table), width)[which]
        out.append((mat, np.full(len(which), width, dtype=np.int64)))
    return out[0], out[1]


def _integers(values: np.ndarray, min_digits: int = 1) -> Field:
    """Decimal text of integers, at least ``min_digits`` digits (zero-padded), with a sign when negative."""
    negative = values < 0
    magnitude = np.abs(values.astype(np.int64)).astype(np.uint64) if values.dtype.kind == "i" else values
    magnitude = magnitude.astype(np.uint64)
    limits = 10 ** np.arange(1, 20, dtype=np.uint64)  # 10 .. 10**19
    ndigits = np.maximum(np.searchsorted(limits, magnitude, side="right") + 1, min_digits)
    width = int(ndigits.max()) + 1 if len(values) else 1  # one spare column for a sign
    powers = 10 ** np.arange(width - 2, -1, -1, dtype=np.uint64)  # (W-1,)
    mat = np.empty((len(values), width), dtype=np.uint8)
    mat[:, 0] = 32
    mat[:, 1:] = (magnitude[:, None] // powers[None, :] % 10).astype(np.uint8) + 48  # (N, W-1) digits
    rows = np.flatnonzero(negative)
    mat[rows, width - 1 - ndigits[rows]] = 45  # "-" just left of the digits
    return mat, ndigits + negative


def _fixed(values: np.ndarray, digits: int, name: str, df: pd.DataFrame) -> Field:
    """Prices as fixed-point text with ``digits`` decimals; refuses any price that would be rounded."""
    scale = 10**digits
    points = np.rint(values * scale)
    # k / 10**d is correctly rounded, so equality means the text re-reads as exactly this float.
    wrong = ~(points / scale == values)
    if wrong.any():
        first = int(np.flatnonzero(wrong)[0])
        raise DataError(
            f"{meta_of(df).symbol} {name} {values[first]!r} at {df.index[first]} needs more than {digits} "
            "digits; pass digits= to write it"
        )
    mat, length = _integers(points.astype(np.int64), min_digits=digits + 1)
    if not digits:
        return mat, length
    cut = mat.shape[1] - digits
    dotted = np.concatenate([mat[:, :cut], np.full((len(mat), 1), 46, np.uint8), mat[:, cut:]], axis=1)
    return dotted, length + 1


def _join_rows(fields: list[Field], sep: bytes) -> bytes:
    """Rows of ``fields`` joined by ``sep``, each ending in a newline, as one bytes object."""
    n = len(fields[0][1])
    if not n:
        return b""
    parts, keep = [], []
    for k, (mat, length) in enumerate(fields):
        width = mat.shape[1]
        parts.append(mat)
        keep.append(np.arange(width)[None, :] >= (width - length)[:, None])  # (N, W) the used columns
        parts.append(np.full((n, 1), ord(sep) if k < len(fields) - 1 else 10, dtype=np.uint8))
        keep.append(np.ones((n, 1), dtype=bool))
    # Row-major boolean selection keeps each row's bytes in order and drops the padding.
    return np.concatenate(parts, axis=1)[np.concatenate(keep, axis=1)].tobytes()


def _parse(path: Path, origin: str) -> tuple[list[str], dict[str, np.ndarray], np.ndarray, list[list[str]]]:
    """Canonical column names, typed columns, the rows' 1-based line numbers and a few raw rows.

    Well-formed files go through pandas' C parser; anything it cannot take cleanly is parsed again line by
    line, which finds the first bad line and says what is wrong with it.
    """
    text = _decode(regular_file(path, "CSV file").read_bytes(), origin)
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not any(line.strip() for line in lines):
        raise CandleDataError(origin, "empty file, expected a header and bars")
    first = lines[0].strip()
    sep = next((s for s in ("\t", ",", ";") if s in first), None)
    if sep is None:
        raise CandleDataError(
            origin, f"cannot find the delimiter in {first[:60]!r}: expected tab, comma or semicolon", line=1
        )
    tokens = [t.strip().strip("<>").strip().lower() for t in first.split(sep)]
    if _DATE_RE.match(tokens[0]) and len(tokens) == len(_MT4_HEADERLESS):
        names, start = list(_MT4_HEADERLESS), 0
    else:
        names, start = _header(tokens, first, origin), 1
    if len(lines) == start:
        raise CandleDataError(origin, "the file has a header but no bars", line=1)
    sample = [line.split(sep) for line in lines[start : start + 1000]]
    table = _fast_table("\n".join(lines[start:]), sep, names)
    if table is not None:
        return names, table, np.arange(start + 1, len(lines) + 1, dtype=np.int64), sample
    table, numbers = _slow_table(lines, start, sep, names, origin)
    return names, table, numbers, sample


def _fast_table(body: str, sep: str, names: list[str]) -> dict[str, np.ndarray] | None:
    """Typed columns through pandas' C parser, or None when the file needs the line-by-line parser."""
    dtypes = {n: object if n in _TEXT_COLUMNS else _INT_COLUMNS.get(n, np.float64) for n in names}
    dtypes = {n: np.int64 if t is np.int32 else t for n, t in dtypes.items()}
    try:
        df = pd.read_csv(
            io.StringIO(body),
            sep=sep,
            header=None,
            names=names,
            dtype=dtypes,
            engine="c",
            **_EXACT_FLOATS,
            skip_blank_lines=False,
            keep_default_na=False,
            na_values=[],
            quoting=csv.QUOTE_NONE,
        )
    except (ValueError, OverflowError, pd.errors.ParserError):
        return None
    if df.isna().to_numpy().any():  # short rows, blank lines, "nan": let the slow parser name the line
        return None
    table = {n: df[n].to_numpy() for n in names}
    if "spread" in table:
        spread = table["spread"]
        if ((spread < np.iinfo(np.int32).min) | (spread > np.iinfo(np.int32).max)).any():
            return None
        table["spread"] = spread.astype(np.int32)
    return table


def _slow_table(lines: list[str], start: int, sep: str, names: list[str], origin: str):
    rows: list[list[str]] = []
    numbers: list[int] = []
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip():
            raise CandleDataError(origin, "empty line among the bars", line=i + 1)
        fields = line.split(sep)
        if len(fields) != len(names):
            raise CandleDataError(origin, _field_count_problem(line, fields, sep, len(names)), line=i + 1)
        rows.append(fields)
        numbers.append(i + 1)
    line_numbers = np.asarray(numbers, dtype=np.int64)
    table: dict[str, np.ndarray] = {}
    for name, col in zip(names, zip(*rows, strict=True), strict=True):
        col = tuple(c.strip() for c in col)
        if name in _TEXT_COLUMNS:
            table[name] = np.array(col, dtype=object)
        elif name in _INT_COLUMNS:
            table[name] = _ints(col, name, _INT_COLUMNS[name], line_numbers, origin)
        else:
            table[name] = _floats(col, name, line_numbers, origin)
    return table, line_numbers


def _decode(raw: bytes, origin: str) -> str:
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"), (b"\xef\xbb\xbf", "utf-8")):
        if raw.startswith(bom):
            raw, encoding = raw[len(bom) :], codec
            break
    else:
        encoding = "utf-8"
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise CandleDataError(origin, f"not a text file ({encoding} decoding failed)", line=line) from None


def _header(tokens: list[str], first: str, origin: str) -> list[str]:
    names = [_ALIASES.get(t) for t in tokens]
    if None in names:
        bad = tokens[names.index(None)]
        raise CandleDataError(
            origin,
            f"unknown column {bad!r} in header {first[:80]!r}; expected {_MT5_HEADER!r} or {_CSV_HEADER!r}",
            line=1,
        )
    if "volume" in names:
        names[names.index("volume")] = "real_volume" if "tick_volume" in names else "tick_volume"
    if "date" not in names and "datetime" not in names and "time" in names:
        names[names.index("time")] = "datetime"
    missing = [c for c in ("open", "high", "low", "close") if c not in names]
    if ("date" not in names and "datetime" not in names) or missing:
        need = missing or ["date"]
        raise CandleDataError(origin, f"header {first[:80]!r} lacks {', '.join(need)}", line=1)
    if len(set(names)) != len(names):
        raise CandleDataError(origin, f"header {first[:80]!r} repeats a column", line=1)
    return names


def _field_count_problem(line: str, fields: list[str], sep: str, expected: int) -> str:
    names = {"\t": "tab", ",": "comma", ";": "semicolon"}
    if len(fields) == 1:
        other = next((s for s in names if s != sep and s in line), None)
        if other:
            return f"fields separated by {names[other]}, but the header uses {names[sep]} (wrong delimiter)"
    kind = "truncated line" if len(fields) < expected else "too many fields"
    return f"{kind}: expected {expected} {names[sep]}-separated fields, found {len(fields)}"


def _times(table, names, line_numbers, origin) -> np.ndarray:
    """Broker seconds of each row from date (+ time) or a single date-time column."""
    if "datetime" in names:
        stamps = pd.Series(table["datetime"], dtype=object)
    else:
        dates = pd.Series(table["date"], dtype=object)
        times = pd.Series(table["time"], dtype=object) if "time" in names else "00:00:00"
        stamps = dates + " " + times
    sample = stamps.iloc[0]
    match = _DATE_RE.match(sample)
    if not match:
        raise CandleDataError(
            origin, f"cannot read date {sample!r}: expected YYYY.MM.DD", line=int(line_numbers[0])
        )
    sep = match.group(1)
    between = sample[match.end() : match.end() + 1]  # "" (date only), " " or "T"
    rest = sample[match.end() + 1 :]
    fmt = f"%Y{sep}%m{sep}%d"
    if between:
        fmt += between + ("%H:%M:%S" if rest.count(":") >= 2 else "%H:%M")
    parsed = pd.to_datetime(stamps, format=fmt, errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if len(bad):
        i = int(bad[0])
        raise CandleDataError(
            origin, f"cannot read date/time {stamps.iloc[i]!r} (format {fmt})", line=int(line_numbers[i])
        )
    return pd.DatetimeIndex(parsed).as_unit("s").asi8


def _floats(col: tuple[str, ...], name: str, line_numbers: np.ndarray, origin: str) -> np.ndarray:
    try:
        return np.array(col, dtype=np.float64)
    except ValueError:
        i = _first_bad(col, float)
        raise CandleDataError(
            origin, f"{name} {col[i]!r} is not a number", line=int(line_numbers[i])
        ) from None


def _ints(col, name, dtype, line_numbers, origin) -> np.ndarray:
    try:
        values = np.array(col, dtype=np.int64 if dtype == np.int32 else dtype)
    except (ValueError, OverflowError):
        i = _first_bad(col, lambda s: _whole(s, dtype))
        raise CandleDataError(
            origin, f"{name} {col[i]!r} is not a whole number in range", line=int(line_numbers[i])
        ) from None
    if dtype == np.int32:
        out = (values < np.iinfo(np.int32).min) | (values > np.iinfo(np.int32).max)
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise CandleDataError(origin, f"{name} {col[i]!r} is out of range", line=int(line_numbers[i]))
    return values.astype(dtype)


def _whole(s: str, dtype) -> int:
    v = int(s)
    if np.dtype(dtype).kind == "u" and v < 0:
        raise DataError(s)
    return v


def _first_bad(col, convert) -> int:
    for i, s in enumerate(col):
        try:
            convert(s)
        except (ValueError, OverflowError):
            return i
    return 0


def _digits(prices: dict[str, np.ndarray], names: list[str], sample: list[list[str]]) -> int:
    """Price digits: at least the decimals written in the first rows (MetaTrader pads with zeros), and
    enough for every price in the file to be written back exactly."""
    written = 0
    for name in ("open", "high", "low", "close"):
        k = names.index(name)
        for row in sample:
            text = row[k].strip() if k < len(row) else ""
            if "." in text:
                written = max(written, len(text) - text.index(".") - 1)
    for d in range(min(written, 10), 11):
        if all(np.array_equal(np.rint(v * 10.0**d) / 10.0**d, v) for v in prices.values()):
            return d
    return 10


def _infer_timeframe(broker: np.ndarray, origin: str) -> Timeframe:
    steps = np.diff(broker)
    steps = steps[steps > 0]
    if not len(steps):
        raise CandleDataError(
            origin, "cannot infer the timeframe from fewer than two bars; pass timeframe= (--timeframe)"
        )
    values, counts = np.unique(steps, return_counts=True)
    step = int(values[np.argmax(counts)])
    if 28 * 86400 <= step <= 31 * 86400:
        return Timeframe.MN1
    for tf in Timeframe:
        if tf is not Timeframe.MN1 and tf.seconds == step:
            return tf
    raise CandleDataError(
        origin, f"bars are {step} s apart, which is no MetaTrader timeframe; pass timeframe= (--timeframe)"
    )
