"""Validation of candle frames: run on every load, so bad data stops at the boundary.

Hard rules (a ``CandleDataError`` naming the source and the first offending rows): a canonical frame
(columns, dtypes, UTC index), strictly increasing unique times, bar times on the timeframe's grid in the
frame's clock, finite positive prices, ``low <= min(open, close)``, ``high >= max(open, close)``,
non-negative spreads.

Gaps are not errors; they are reported. A gap is *expected* when every missing bar lies inside a time the FX
market is closed: the weekend from Friday 17:00 to Sunday 17:00 New York time (the industry's "New York
close", with one hour of tolerance either side because brokers open and close a few minutes apart) and,
when ``holidays`` is on, Christmas Day and New Year's Day (from 16:00 New York the evening before to 18:00
New York on the day). Any other missing bar makes the gap *unexpected*.

Nothing is changed unless the caller opts in with a ``Repair`` policy; the report lists each change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from datafeeds.candles import COLUMN_DTYPES, COLUMNS, PRICE_COLUMNS, meta_of
from datafeeds.clock import BrokerClock
from datafeeds.errors import CandleDataError
from datafeeds.timeframes import Timeframe

_DAY = 86400
_WEEK = 7 * _DAY
_SUNDAY_EPOCH = 3 * _DAY  # 1970-01-04, the first Sunday after the Unix epoch
_WEEKEND = (4 * 1440 + 17 * 60, 6 * 1440 + 17 * 60)  # Friday 17:00 .. Sunday 17:00, minutes from Monday
_HOLIDAY_EVES = ((12, 24), (12, 31))  # closed from 17:00 New York ...
_HOLIDAYS = ((12, 25), (1, 1))  # ... to 17:00 New York on the day
TOLERANCE_MINUTES = 60
REPAIRS_ATTR = "repairs"


@dataclass(frozen=True)
class Repair:
    """An explicit, opt-in repair policy: each flag allows one kind of change, and each change is reported.

    ``sort``: put bars in time order. ``drop_duplicates``: keep the first bar of each repeated time.
    ``drop_invalid``: drop bars that break a price rule (NaN, non-positive, high/low inconsistent, negative
    spread, time off the timeframe grid).
    """

    sort: bool = False
    drop_duplicates: bool = False
    drop_invalid: bool = False

    @classmethod
    def all(cls) -> Repair:
        return cls(sort=True, drop_duplicates=True, drop_invalid=True)


@dataclass(frozen=True)
class Gap:
    """Missing bars between two bars: ``before`` is the last bar present, ``after`` the next one (UTC)."""

    before: pd.Timestamp
    after: pd.Timestamp
    missing: int
    expected: bool


@dataclass
class ValidationReport:
    """What ``validate`` found and, when a repair policy was given, what it changed."""

    origin: str
    frame: pd.DataFrame = field(repr=False)
    gaps: list[Gap]
    changes: list[str]

    @property
    def expected_gaps(self) -> list[Gap]:
        return [g for g in self.gaps if g.expected]

    @property
    def unexpected_gaps(self) -> list[Gap]:
        return [g for g in self.gaps if not g.expected]

    def format(self, max_gaps: int = 10) -> str:
        """A human-readable summary, as printed by ``neuronet data validate``."""
        df = self.frame
        meta = meta_of(df)
        lines = [f"source      {self.origin}", f"symbol      {meta.symbol} {meta.timeframe.name}"]
        if len(df):
            lines.append(f"bars        {len(df)}  ({_stamp(df.index[0])} .. {_stamp(df.index[-1])} UTC)")
        else:
            lines.append("bars        0")
        exp, unexp = self.expected_gaps, self.unexpected_gaps
        lines.append(
            f"gaps        {len(exp)} expected ({sum(g.missing for g in exp)} bars), "
            f"{len(unexp)} unexpected ({sum(g.missing for g in unexp)} bars)"
        )
        for g in unexp[:max_gaps]:
            lines.append(
                f"  unexpected: {g.missing} bars missing after {_stamp(g.before)} (next {_stamp(g.after)})"
            )
        if len(unexp) > max_gaps:
            lines.append(f"  ... and {len(unexp) - max_gaps} more unexpected gaps")
        lines.extend(f"repaired    {c}" for c in self.changes)
        lines.append("status      valid" + (" after repair" if self.changes else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def validate(
    df: pd.DataFrame,
    origin: str | None = None,
    repair: Repair | None = None,
    *,
    lines: np.ndarray | None = None,
    holidays: bool = True,
) -> ValidationReport:
    """Check a candle frame; raise ``CandleDataError`` on the first broken rule, report gaps otherwise.

    ``lines`` (optional, one per row) are the rows' 1-based line numbers in the file they were read from,
    so errors can point at the file's lines. With ``repair`` the returned report's ``frame`` is a repaired
    copy and ``changes`` says what was done; the input frame is never modified. Repairs travel with the
    frame in ``df.attrs["repairs"]``, so a later report (after a source repaired on read) still lists them.
    """
    meta = meta_of(df)
    origin = origin or meta.source or meta.symbol
    repair = repair or Repair()
    _check_schema(df, origin)
    changes: list[str] = []
    if lines is not None:
        lines = np.asarray(lines)

    times = df.index.asi8
    if len(times) > 1 and np.any(np.diff(times) < 0):
        if not repair.sort:
            bad = np.flatnonzero(np.diff(times) < 0) + 1
            raise _error(
                origin,
                "bar times go backwards (to sort them: --repair, or Repair(sort=True))",
                df,
                bad,
                lines,
            )
        order = np.argsort(times, kind="stable")
        df = df.iloc[order]
        lines = lines[order] if lines is not None else None
        changes.append("sorted bars into time order")
        times = df.index.asi8

    dup = np.zeros(len(df), dtype=bool)
    dup[1:] = np.diff(times) == 0
    if dup.any():
        if not repair.drop_duplicates:
            raise _error(
                origin,
                "duplicate bar times (to keep the first of each: --repair, or Repair(drop_duplicates=True))",
                df,
                np.flatnonzero(dup),
                lines,
            )
        changes.append(f"dropped {int(dup.sum())} duplicate bars: {_times(df.index[dup])}")
        df, lines = _keep(df, lines, ~dup)

    broker = meta.clock.to_broker_seconds(df.index.as_unit("s").asi8)
    problems = [(p, bad) for p, bad in _row_problems(df, broker, meta.timeframe) if bad.any()]
    if problems and not repair.drop_invalid:
        problem, bad = problems[0]
        raise _error(
            origin,
            problem + " (to drop them: --repair, or Repair(drop_invalid=True))",
            df,
            np.flatnonzero(bad),
            lines,
        )
    if problems:
        drop = np.zeros(len(df), dtype=bool)
        for problem, bad in problems:
            changes.append(f"dropped {int(bad.sum())} bars with {problem}: {_times(df.index[bad])}")
            drop |= bad
        broker = broker[~drop]
        df, lines = _keep(df, lines, ~drop)

    earlier = list(df.attrs.get(REPAIRS_ATTR, ()))
    if changes:
        df = df.copy()
        df.attrs["candles"] = meta
        df.attrs[REPAIRS_ATTR] = earlier + changes
    gaps = find_gaps(broker, meta.timeframe, meta.clock, holidays=holidays)
    return ValidationReport(origin, df, gaps, earlier + changes)


def find_gaps(
    broker_seconds: np.ndarray,
    timeframe: Timeframe,
    clock,
    *,
    holidays: bool = True,
    tolerance_minutes: int = TOLERANCE_MINUTES,
) -> list[Gap]:
    """Gaps between consecutive bars, each classified as expected (market closed) or not.

    Works on broker seconds so a D1 series in a DST-switching clock is a regular 86,400 s grid.
    """
    t = np.asarray(broker_seconds, dtype=np.int64)
    if len(t) < 2:
        return []
    if timeframe is Timeframe.MN1:
        months = t.astype("datetime64[s]").astype("datetime64[M]").astype(np.int64)
        steps = np.diff(months)
        idx = np.flatnonzero(steps > 1)
        return [_gap(t, i, int(steps[i] - 1), False, clock) for i in idx]
    step = timeframe.seconds
    steps = np.diff(t) // step
    idx = np.flatnonzero(steps > 1)
    if not len(idx):
        return []
    counts = steps[idx] - 1
    # Every missing bar's open time, gap by gap (vectorised: repeat the gap start, add 1..n steps).
    owner = np.repeat(np.arange(len(idx)), counts)
    first = np.cumsum(counts) - counts
    k = np.arange(int(counts.sum())) - np.repeat(first, counts) + 1
    missing = np.repeat(t[idx], counts) + k * step
    if timeframe is Timeframe.W1:
        closed = np.zeros(len(missing), dtype=bool)
    else:
        start_utc = clock.to_utc_seconds(missing)
        end_utc = start_utc + step - 60
        closed = market_closed(start_utc, holidays, tolerance_minutes) & market_closed(
            end_utc, holidays, tolerance_minutes
        )
    open_missing = np.bincount(owner, weights=~closed, minlength=len(idx))
    return [
        _gap(t, i, int(c), bool(o == 0), clock) for i, c, o in zip(idx, counts, open_missing, strict=True)
    ]


# Server clocks brokers commonly run, most common first: a frame read in UTC that is really in one of these
# shows its weekend gaps shifted by hours, as "unexpected".
COMMON_CLOCKS = (
    BrokerClock(2, "us"),
    BrokerClock(2, "eu"),
    BrokerClock(3),
    BrokerClock(2),
    BrokerClock(0, "eu"),
    BrokerClock(1, "eu"),
    BrokerClock(-5, "us"),
)


def guess_clock(report: ValidationReport) -> BrokerClock | None:
    """A common broker clock under which every gap of a UTC-stamped frame is a market closure, or None.

    Bars exported from a terminal are in the broker's server time; read as UTC, each weekend gap looks like
    it starts hours early or late. This only suggests a ``clock``: it changes nothing.
    """
    meta = meta_of(report.frame)
    weekly = meta.timeframe in (Timeframe.W1, Timeframe.MN1)  # their gaps are never market closures
    if meta.clock != BrokerClock() or not report.unexpected_gaps or weekly:
        return None
    stamped = report.frame.index.as_unit("s").asi8  # the file's own times, read as UTC
    # Clocks an hour apart both pass with the usual tolerance: prefer one whose closures fit to the minute.
    for tolerance in (0, TOLERANCE_MINUTES):
        for clock in COMMON_CLOCKS:
            gaps = find_gaps(stamped, meta.timeframe, clock, tolerance_minutes=tolerance)
            if all(g.expected for g in gaps):
                return clock
    return None


def market_closed(
    utc_seconds: np.ndarray, holidays: bool = True, tolerance_minutes: int = TOLERANCE_MINUTES
) -> np.ndarray:
    """True where the FX market is closed: the weekend and (optionally) Christmas and New Year's Day.

    ``tolerance_minutes`` widens each closed window on both sides (brokers open and close minutes apart).
    """
    tol = int(tolerance_minutes)
    local = new_york_seconds(utc_seconds)
    minute = (local % _DAY) // 60
    week_minute = ((local // _DAY + 3) % 7) * 1440 + minute  # 1970-01-01 was a Thursday (Monday = 0)
    closed = (week_minute >= _WEEKEND[0] - tol) & (week_minute < _WEEKEND[1] + tol)
    if holidays:
        days = (local // _DAY).astype("datetime64[D]")
        month_day = (
            (days.astype("datetime64[M]").astype(np.int64) % 12 + 1) * 100
            + (days - days.astype("datetime64[M]")).astype(np.int64)
            + 1
        )
        eve = np.isin(month_day, [m * 100 + d for m, d in _HOLIDAY_EVES]) & (minute >= 17 * 60 - tol)
        day = np.isin(month_day, [m * 100 + d for m, d in _HOLIDAYS]) & (minute < 17 * 60 + tol)
        closed |= eve | day
    return closed


def new_york_seconds(utc_seconds: np.ndarray) -> np.ndarray:
    """New York wall-clock time as seconds since the epoch, the reference clock of the FX week.

    The zone's offset is looked up once per distinct UTC hour (DST switches fall on the hour), which keeps
    this fast for millions of M1 bars.
    """
    utc = np.asarray(utc_seconds, dtype=np.int64)
    hours, inverse = np.unique(utc // 3600, return_inverse=True)
    stamps = pd.to_datetime(hours * 3600, unit="s", utc=True)
    local = stamps.tz_convert("America/New_York").tz_localize(None)
    offset = (local - stamps.tz_localize(None)).as_unit("s").asi8
    return utc + offset[inverse]


def on_grid(broker_seconds: np.ndarray, timeframe: Timeframe) -> np.ndarray:
    """True where a broker time is a valid bar open time of ``timeframe`` (weeks: Sunday; months: the 1st)."""
    t = np.asarray(broker_seconds, dtype=np.int64)
    if timeframe is Timeframe.MN1:
        as_month = t.astype("datetime64[s]").astype("datetime64[M]").astype("datetime64[s]").astype(np.int64)
        return as_month == t
    if timeframe is Timeframe.W1:
        return (t - _SUNDAY_EPOCH) % _WEEK == 0
    return t % timeframe.seconds == 0


def _check_schema(df: pd.DataFrame, origin: str) -> None:
    if tuple(df.columns) != COLUMNS:
        raise CandleDataError(origin, f"columns are {list(df.columns)}, expected {list(COLUMNS)}")
    wrong = [
        f"{c} is {df[c].dtype}, expected {np.dtype(t)}" for c, t in COLUMN_DTYPES.items() if df[c].dtype != t
    ]
    if wrong:
        raise CandleDataError(origin, "wrong column types: " + ", ".join(wrong))
    if not isinstance(df.index, pd.DatetimeIndex) or str(df.index.tz) != "UTC":
        raise CandleDataError(origin, "the index must be a UTC DatetimeIndex of bar open times")


def _row_problems(df: pd.DataFrame, broker: np.ndarray, timeframe: Timeframe) -> list[tuple[str, np.ndarray]]:
    """One boolean mask per rule, all over the same rows, in the order errors are reported."""
    o, h, lo, c = (df[col].to_numpy() for col in PRICE_COLUMNS)
    stacked = np.stack([o, h, lo, c])  # (4, N)
    finite = np.isfinite(stacked).all(axis=0)
    with np.errstate(invalid="ignore"):
        return [
            ("missing or non-finite prices", ~finite),
            ("prices that are not positive", finite & ~(stacked > 0).all(axis=0)),
            ("low above open or close", lo > np.minimum(o, c)),
            ("high below open or close", h < np.maximum(o, c)),
            ("negative spread", df["spread"].to_numpy() < 0),
            ("times with fractions of a second", df.index.as_unit("ns").asi8 % 10**9 != 0),
            (f"times off the {timeframe.name} grid", ~on_grid(broker, timeframe)),
        ]


def _keep(df: pd.DataFrame, lines: np.ndarray | None, mask: np.ndarray):
    return df.loc[mask], (lines[mask] if lines is not None else None)


def _error(origin: str, problem: str, df: pd.DataFrame, positions: np.ndarray, lines: np.ndarray | None):
    shown = [*PRICE_COLUMNS, "spread"] if "spread" in problem else list(PRICE_COLUMNS)
    rows = df.iloc[positions][shown]
    return CandleDataError(origin, problem, rows, lines[positions] if lines is not None else None)


def _gap(t: np.ndarray, i: int, missing: int, expected: bool, clock) -> Gap:
    before, after = clock.to_utc_seconds(t[i : i + 2])
    return Gap(
        pd.Timestamp(int(before), unit="s", tz="UTC"),
        pd.Timestamp(int(after), unit="s", tz="UTC"),
        missing,
        expected,
    )


def _stamp(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%d %H:%M")


def _times(index: pd.DatetimeIndex, limit: int = 5) -> str:
    shown = ", ".join(_stamp(t) for t in index[:limit])
    return shown + (f" and {len(index) - limit} more" if len(index) > limit else "")
