"""MetaTrader ``.set`` files: an EA's inputs, and the optimisation ranges and flags the Strategy Tester
keeps with them.

The terminal saves the Inputs tab (Strategy Tester → Inputs → Save) as UTF-16 little-endian text with a
byte order mark, one input a line: ``name=value`` for a value, and ``name=value||start||step||stop||Y``
for an input with its optimisation range (``Y``: optimised, ``N``: fixed at ``value``); lines starting
with ``;`` are comments. Files written by hand are often UTF-8: both are read. Every line is checked
against the EA before anything runs: an unknown input (with a "did you mean"), a value that is not of the
input's type, a range whose start lies beyond its stop or whose step is 0 or negative is one line naming
the file, the line and the input.
"""

from __future__ import annotations

import codecs
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from datafeeds.files import atomic_write
from neuronet.errors import NeuronetError
from neuronet.userfiles import open_regular
from strategies.base import ExpertAdvisor
from strategies.errors import EAError

MAX_BYTES = 1 << 20  # a .set file of a thousand inputs is a few tens of kilobytes


class SetFileError(NeuronetError, ValueError):
    """A ``.set`` file that cannot be read, or a line of it that the EA cannot take."""


@dataclass(frozen=True)
class SetRange:
    """An input's optimisation range as MetaTrader keeps it: start, step, stop, and whether it is searched."""

    start: object
    step: object
    stop: object
    optimise: bool


@dataclass
class SetFile:
    """The inputs of a ``.set`` file (text as written, converted by the EA) and the ranges of those that
    carry one; ``lines`` gives each input's line number for messages."""

    path: str
    values: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, SetRange] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def searched(self) -> dict[str, str]:
        """The optimised inputs (flag ``Y``) as optimisation specs: ``{"fast": "5:50:5"}``."""
        return {n: f"{r.start}:{r.stop}:{r.step}" for n, r in self.ranges.items() if r.optimise}

    def fixed(self) -> dict[str, str]:
        """The inputs not optimised: their values."""
        return {n: v for n, v in self.values.items() if not (n in self.ranges and self.ranges[n].optimise)}


def _decode(raw: bytes, path: str) -> str:
    """UTF-16 (with its BOM, as MetaTrader writes, or without one when every other byte is 0) or UTF-8."""
    try:
        if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return raw.decode("utf-16")
        if len(raw) >= 2 and raw[1:2] == b"\0" and raw[0:1] != b"\0":
            return raw.decode("utf-16-le")
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SetFileError(
            f"{path}: not a MetaTrader .set file (not UTF-16 or UTF-8 text: {exc.reason})"
        ) from None


def read_set(path: str | Path, ea: type[ExpertAdvisor]) -> SetFile:
    """Read and check a ``.set`` file for ``ea``: every input known, every value of its type, every range
    in order with a positive step."""
    name = str(path)
    with open_regular(path, ".set file") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise SetFileError(f"{name}: larger than {MAX_BYTES // 1024} KiB; not a .set file of EA inputs")
    out = SetFile(name)
    defaults = ea.param_defaults()
    for number, line in enumerate(_decode(raw, name).splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith(";"):
            continue
        key, sep, rest = text.partition("=")
        key = key.strip()
        where = f"{name} line {number}"
        if not sep or not key:
            raise SetFileError(
                f"{where}: expected name=value or name=value||start||step||stop||Y, got {text!r}"
            )
        if key in out.lines:
            raise SetFileError(f"{where} ({key}): given twice (first on line {out.lines[key]})")
        fields = rest.split("||")
        if len(fields) not in (1, 5):
            raise SetFileError(
                f"{where} ({key}): expected value or value||start||step||stop||Y/N, got {len(fields)} fields"
            )
        try:
            ea.resolve_params({key: fields[0].strip()})
        except EAError as exc:
            raise SetFileError(f"{where} ({key}): {exc}") from None
        out.values[key], out.lines[key] = fields[0].strip(), number
        if len(fields) == 5:
            out.ranges[key] = _range(where, key, fields[1:], ea, defaults[key])
    return out


def _range(where: str, key: str, fields: list[str], ea: type[ExpertAdvisor], default: object) -> SetRange:
    """``start||step||stop||Y`` checked: each of the input's type; for a searched number, start <= stop and
    a step > 0 (MetaTrader's own tester refuses the others too)."""
    start, step, stop, flag = (f.strip() for f in fields)
    if flag.upper() not in ("Y", "N"):
        raise SetFileError(f"{where} ({key}): the optimisation flag must be Y or N, got {flag!r}")
    optimise = flag.upper() == "Y"
    if not isinstance(default, (int, float)) or isinstance(default, bool):
        return SetRange(start, step, stop, optimise)  # text and bool inputs: MetaTrader's own fields, kept
    typed = []
    for label, value in (("start", start), ("step", step), ("stop", stop)):
        try:
            number = ea.resolve_params({key: value})[key]
        except EAError:
            raise SetFileError(
                f"{where} ({key}): {label} {value!r} is not a {type(default).__name__} like {default!r}"
            ) from None
        if not math.isfinite(float(number)):
            raise SetFileError(f"{where} ({key}): {label} {value!r} is not a finite number")
        typed.append(number)
    lo, st, hi = typed
    if optimise and st <= 0:
        raise SetFileError(f"{where} ({key}): step {step} must be > 0 for an optimised input")
    if optimise and lo > hi:
        raise SetFileError(f"{where} ({key}): start {start} lies beyond stop {stop}")
    return SetRange(lo, st, hi, optimise)


def format_set(ea: str, values: dict, ranges: dict[str, SetRange] | None = None) -> str:
    """The text of a ``.set`` file as the terminal saves it: a comment header, then one input a line, with
    its range where one is given."""
    stamp = datetime.now(UTC).strftime("%Y.%m.%d %H:%M:%S")
    lines = [
        f"; saved on {stamp}",
        f"; this file contains input parameters for testing/optimizing {ea} expert advisor",
        "; to use it in the strategy tester, click Load in the context menu of the Inputs tab",
        ";",
    ]
    for name, value in values.items():
        text = _text(value)
        r = (ranges or {}).get(name)
        if r is None:
            lines.append(f"{name}={text}")
        else:
            flag = "Y" if r.optimise else "N"
            lines.append(f"{name}={text}||{_text(r.start)}||{_text(r.step)}||{_text(r.stop)}||{flag}")
    return "\r\n".join(lines) + "\r\n"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def write_set(path: str | Path, ea: str, values: dict, ranges: dict[str, SetRange] | None = None) -> Path:
    """Write a ``.set`` file as MetaTrader does (UTF-16 LE with its byte order mark), atomically."""
    data = codecs.BOM_UTF16_LE + format_set(ea, values, ranges).encode("utf-16-le")
    atomic_write(Path(path), lambda fh: fh.write(data))
    return Path(path)
