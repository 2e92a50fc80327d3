"""Study (training) and forward (evaluation) periods, as MetaTrader's tester splits a date range.

The forward period is the last 1/2, 1/3 or 1/4 of the bars (or any fraction), or everything from a date.
Walk-forward instead trains on the ``train`` bars before each block of ``test`` bars and rolls forward.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from fractions import Fraction

import pandas as pd

from neuronet.errors import NeuronetError

_DATE = re.compile(r"\d{4}[-.]\d{1,2}")


class PeriodError(NeuronetError, ValueError):
    """The requested periods do not fit the data (too few bars, a date outside the range)."""


@dataclass(frozen=True)
class Periods:
    """Bar indices: the forward period is ``[forward_start, n)``; the first study window ends there.

    ``study_window`` bars (0 = all earlier bars) feed each training; ``retrain_every`` > 0 retrains on the
    latest window every that many forward bars (walk-forward).
    """

    n: int
    forward_start: int
    study_window: int = 0
    retrain_every: int = 0

    def study_range(self, t: int) -> tuple[int, int]:
        """The study bars ``[a, t)`` used by a training at decision time ``t``."""
        a = 0 if self.study_window <= 0 else max(0, t - self.study_window)
        return a, t

    def for_ea(self, retrain_every: int) -> Periods:
        """These periods with the EA's own ``retrain_every`` where none was asked for (walk-forward wins)."""
        if self.retrain_every == 0 and retrain_every > 0:
            return replace(self, retrain_every=int(retrain_every))
        return self

    def retrains_at(self, t: int) -> bool:
        """Whether the EA is trained again before deciding on forward bar ``t``: every ``retrain_every``
        bars after the first forward bar (the backtest and live trading share this rule)."""
        every, fs = self.retrain_every, self.forward_start
        return bool(every) and t > fs and (t - fs) % every == 0

    def last_training(self, t: int) -> int:
        """The bar before which the latest training up to bar ``t`` was made: the first forward bar, or the
        latest retraining at or before ``t`` (a resumed live run trains there again)."""
        every, fs = self.retrain_every, self.forward_start
        return fs if not every or t <= fs else fs + (t - fs) // every * every

    def to_dict(self) -> dict:
        return asdict(self)


def parse_fraction(text: str | float) -> float:
    """``"1/3"`` -> 0.333..; ``0.25`` stays; anything outside (0, 1) is refused."""
    try:
        value = float(Fraction(text)) if isinstance(text, str) else float(text)
    except (ValueError, ZeroDivisionError):
        raise PeriodError(
            f"forward period {text!r}: expected a fraction like 1/3 or 0.25, or a date"
        ) from None
    if not 0.0 < value < 1.0:
        raise PeriodError(f"forward period {text!r}: the fraction must lie strictly between 0 and 1")
    return value


def resolve(
    index: pd.DatetimeIndex,
    forward: str | float | pd.Timestamp | None = "1/3",
    walk_forward: tuple[int, int] | None = None,
    *,
    min_study: int = 1,
    min_forward: int = 2,
) -> Periods:
    """Turn a forward specification into bar indices and check both periods hold enough bars."""
    n = len(index)
    if walk_forward is not None:
        train, test = (int(v) for v in walk_forward)
        if train < 1 or test < 1:
            raise PeriodError(f"walk-forward needs positive train and test sizes, got {train} and {test}")
        periods = Periods(n, train, study_window=train, retrain_every=test)
    elif forward is None or (isinstance(forward, str) and forward.strip().lower() in ("none", "off", "0")):
        periods = Periods(n, min(max(min_study, 1), n))
    elif isinstance(forward, pd.Timestamp) or (isinstance(forward, str) and _DATE.match(forward.strip())):
        when = _timestamp(forward)
        if not index[0] < when <= index[-1]:
            raise PeriodError(
                f"forward period {str(forward)!r}: the date {when:%Y-%m-%d %H:%M} lies outside the data "
                f"({index[0]:%Y-%m-%d %H:%M} .. {index[-1]:%Y-%m-%d %H:%M})"
            )
        periods = Periods(n, int(index.searchsorted(when, side="left")))
    else:
        fraction = parse_fraction(forward)
        periods = Periods(n, n - round(n * fraction))
    study = periods.forward_start if periods.study_window == 0 else periods.study_window
    fwd = n - periods.forward_start
    if n == 0 or study < min_study or fwd < min_forward:
        span = f"{index[0]:%Y-%m-%d %H:%M} .. {index[-1]:%Y-%m-%d %H:%M}" if n else "an empty range"
        raise PeriodError(
            f"too few bars in {span} ({n} bars): the study period has {study} (needs >= {min_study}) and "
            f"the forward period {fwd} (needs >= {min_forward}); widen --from/--to or change --forward"
        )
    return periods


def _timestamp(value: str | pd.Timestamp) -> pd.Timestamp:
    try:
        ts = pd.Timestamp(str(value).replace(".", "-") if isinstance(value, str) else value)
    except ValueError:
        raise PeriodError(f"cannot read {value!r} as a date (use YYYY-MM-DD or YYYY-MM-DD HH:MM)") from None
    return ts.tz_localize("UTC") if ts.tz is None else ts.tz_convert("UTC")
