"""Readers of option values, applied by Typer while it reads the command line (``typer.Option(parser=...)``).

A value the user can get wrong is checked here, before the command starts any work, so the error names
the option (Typer words it ``Invalid value for '--timeframe': ...``) and nothing has been read or written
yet. Each reader asks the package that owns the rule (``Timeframe.parse``, ``BrokerClock.parse``,
``utc_bound``, the source registry) and returns the text the command passes on, so the rule lives in one
place. A reader raises a ``ValueError`` (``CommandError`` or the package's own error, both ``ValueError``s),
which the framework turns into its usage error.

Numbers take ``min=``/``max=`` in their ``typer.Option`` instead: a NaN is below any minimum, and
``MAX_COUNT`` bounds every count (OpenCL kernels index with 32-bit integers, and no bar, epoch or pass
count comes near it).
"""

from __future__ import annotations

import math
from pathlib import Path

from datafeeds import SOURCES, BrokerClock
from datafeeds.clock import utc_bound
from datafeeds.timeframes import Timeframe
from neuronet.commands.errors import CommandError
from nn import check_backend_name

MAX_COUNT = 2**31 - 1  # the largest count any option takes
MAX_SEED = 2**32 - 1  # NumPy's legacy seeding takes 32 bits
MAX_WIDTH = 65_536  # the widest layer a model option takes (d_model, d_ff, heads)
MAX_DEPTH = 1_024  # the most layers of a block a model option takes
MAX_POLL_S = 86_400.0  # the longest wait between two looks at a terminal: a day


def text(value: str) -> str:
    """Any text but an empty one: an empty value is a mistake (leaving the option out gives its default)."""
    if not str(value).strip():
        raise CommandError("an empty value")
    return str(value).strip()


def path(value: str | Path) -> Path:
    """A path, not an empty one (which would mean the current folder)."""
    if not str(value).strip():
        raise CommandError("an empty path")
    return Path(value)


def timeframe(value: str) -> str:
    """A MetaTrader timeframe name (``H1``), upper-cased."""
    return Timeframe.parse(text(value)).name


def clock(value: str) -> str:
    """A broker clock (``UTC+2``, ``+2/us``) that ``BrokerClock.parse`` reads."""
    BrokerClock.parse(text(value))
    return value


def start(value: str) -> str:
    """``--from``: a time bound (``2017-06-01``, ``2017-06-01 12:00``) as every source reads it."""
    utc_bound(text(value), "start")
    return value


def end(value: str) -> str:
    """``--to``: as ``start``."""
    utc_bound(text(value), "end")
    return value


def source(value: str) -> str:
    """A candle source of the registry, lower-cased."""
    name = text(value).lower()
    if name not in SOURCES:
        raise CommandError(f"unknown candle source {value!r}; choose one of {', '.join(SOURCES)}")
    return name


def backend(value: str) -> str:
    """A network backend (``auto``, ``numpy``, ``opencl``, ``opencl:<device>``); a device named must be
    there (``nn.check_backend_name``)."""
    return check_backend_name(text(value), device=True)


def seconds(value: str) -> float:
    """A wait in seconds, finite, from 0 to ``MAX_POLL_S``."""
    number = _number(value)
    if not 0 <= number <= MAX_POLL_S:  # NaN fails too
        raise CommandError(f"{value!r}: give a finite number of seconds from 0 to {MAX_POLL_S:g}")
    return number


def positive(value: str) -> float:
    """A finite number > 0 (an amount, a volume)."""
    number = _number(value)
    if not (math.isfinite(number) and number > 0):
        raise CommandError(f"{value!r}: give a finite number > 0")
    return number


def _number(value: str) -> float:
    given = text(value)
    try:
        return float(given)
    except ValueError:
        raise CommandError(f"{value!r} is not a number") from None
