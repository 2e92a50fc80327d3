"""The vectorised steps of backtesting.py's figures give exactly what the step-by-step definitions give, on
awkward inputs: empty, one row, no drawdown at all, NaN, ties, a drawdown open at the last bar."""

import numpy as np
import pandas as pd
import pytest

from backtests import peers


def _runs_by_definition(dd: pd.Series) -> tuple[pd.Series, pd.Series]:
    """backtesting.py's ``compute_drawdown_duration_peaks``, step by step: ``np.unique`` of the new peaks
    and the last bar, each drawdown's NaN-skipping max one slice at a time."""
    iloc = np.unique(np.r_[(dd == 0).to_numpy().nonzero()[0], len(dd) - 1])
    prev = np.r_[np.nan, iloc[:-1]]
    keep = iloc > prev + 1
    ends, starts = iloc[keep], prev[keep].astype(np.int64)
    if not len(ends):
        return pd.Series(dtype=object), pd.Series(dtype=float)
    duration = pd.Series(dd.index[ends] - dd.index[starts], index=dd.index[ends])
    values = dd.to_numpy(np.float64)
    depth = [np.fmax.reduce(values[a : b + 1]) for a, b in zip(starts, ends, strict=True)]
    return duration, pd.Series(depth, index=dd.index[ends])


def _series(values) -> pd.Series:
    values = np.asarray(values, dtype=np.float64)
    return pd.Series(values, index=pd.date_range("2024-01-01", periods=len(values), freq="h", tz="UTC"))


AWKWARD = {
    "empty": [],
    "one flat row": [0.0],
    "one row in a drawdown": [0.25],
    "never a drawdown": [0.0] * 7,
    "open at the last bar": [0.0, 0.1, 0.3, 0.2],
    "closed at the last bar": [0.0, 0.1, 0.3, 0.0],
    "one-bar dips (not counted)": [0.0, 0.1, 0.0, 0.2, 0.0],
    "ties and back to back": [0.0, 0.2, 0.2, 0.0, 0.0, 0.5, 0.5, 0.1, 0.0, 0.3],
    "NaN inside": [0.0, np.nan, 0.4, 0.0, np.nan, np.nan, 0.0],
    "all NaN drawdown": [0.0, np.nan, np.nan, np.nan, 0.0],
    "starts in a drawdown": [0.3, 0.2, 0.0, 0.1, 0.1],
}


@pytest.mark.parametrize("values", list(AWKWARD.values()), ids=list(AWKWARD))
def test_drawdown_runs_equal_the_step_by_step_definition(values):
    dd = _series(values)
    got, want = peers._drawdown_runs(dd), _runs_by_definition(dd)
    for a, b in zip(got, want, strict=True):
        pd.testing.assert_series_equal(a, b, check_index_type=len(b) > 0)


def test_drawdown_runs_of_a_long_random_curve_equal_the_definition():
    rng = np.random.default_rng(7)
    equity = 1000 + np.cumsum(rng.normal(0.05, 1, 20_000))  # a drift: new peaks often
    equity[rng.integers(0, len(equity), 50)] = np.nan
    dd = _series(1 - equity / np.fmax.accumulate(equity))
    got, want = peers._drawdown_runs(dd), _runs_by_definition(dd)
    assert len(want[0]) > 100
    for a, b in zip(got, want, strict=True):
        pd.testing.assert_series_equal(a, b)


def test_bar_times_keys_are_equal_by_every_instant_not_by_their_sample():
    index = pd.date_range("2024-01-01", periods=10_000, freq="h", tz="UTC")
    moved = index.asi8.copy()
    moved[5] += 1  # one instant off the hashed sample
    other = pd.DatetimeIndex(pd.to_datetime(moved, utc=True))
    a, b, c = peers._Stamps(index), peers._Stamps(index.copy()), peers._Stamps(other)
    assert a == b and hash(a) == hash(b)
    assert a != c  # whatever their hashes
    assert peers._Stamps(index.tz_convert("Europe/Berlin")) != a
    assert peers._Stamps(index[:0]) == peers._Stamps(index[:0]) != peers._Stamps(index[:1])


def test_views_of_the_same_instants_are_equal_keys_without_reading_them():
    index = pd.date_range("2024-01-01", periods=1_000, freq="h", tz="UTC")
    assert peers._Stamps(index) == peers._Stamps(index) == peers._Stamps(pd.DatetimeIndex(index))
    assert peers._Stamps(index[1:]) != peers._Stamps(index[:-1])  # same length, other instants
    assert peers._same_memory(index.asi8, index.asi8) and not peers._same_memory(
        index.asi8[1:], index.asi8[:-1]
    )
