"""The look-ahead guard: no public route of Bars or Line leads past the newest closed bar.

Each route is tried the way a careless or hostile EA would (``.base``, negative and positive indexes,
``window`` past the end, ``frame()``, times, indicator lines, views kept from an earlier bar, writes), on a
history whose values are all distinct, so any future value that leaks is found.
"""

import numpy as np
import pandas as pd
import pytest

from datafeeds import CandleMeta, Timeframe, make_frame, meta_of
from strategies import BarFeed, Bars, EAError, Line
from strategies.bars import COLUMNS

N, K = 50, 20  # bars in the history, bars closed


def _history(n=N):
    rng = np.random.default_rng(3)
    close = 1.1 + np.cumsum(rng.uniform(1e-4, 2e-4, n))  # strictly increasing: every value distinct
    data = {
        "open": close - 5e-5,
        "high": close + 3e-4,
        "low": close - 3e-4,
        "close": close,
        "tick_volume": np.arange(100, 100 + n),
        "spread": np.arange(1, n + 1),
        "real_volume": np.arange(1000, 1000 + n),
    }
    index = pd.date_range("2022-01-03", periods=n, freq="h", tz="UTC")
    data.update({k: np.round(data[k], 5) for k in ("open", "high", "low", "close")})  # 5-digit prices
    return make_frame(data, index, CandleMeta("EURUSD", Timeframe.H1, 5, source="test"))


@pytest.fixture
def feed():
    df = _history()
    return BarFeed.from_frame(df, meta_of(df)), df


def _chain(arr):
    """``arr`` and every array its ``.base`` attributes lead to."""
    out = []
    while isinstance(arr, np.ndarray):
        out.append(arr)
        arr = arr.base
    return out


def _no_future(arr, closed, future_values):
    """No array reachable from ``arr`` holds a value of a bar at or after ``closed``."""
    for a in _chain(arr):
        flat = np.asarray(a, dtype=np.float64).reshape(len(a), -1) if a.ndim else a.reshape(1, 1)
        leaked = np.isin(flat[np.isfinite(flat)], future_values)
        assert not leaked.any(), f"an array of shape {a.shape} reachable by .base holds future values"


def _future(df, col, closed=K):
    return df[col].to_numpy(dtype=np.float64)[closed:]


@pytest.mark.parametrize("col", COLUMNS)
def test_no_column_leads_past_the_newest_closed_bar(feed, col):
    feed, df = feed
    feed.advance(K)
    arr = getattr(feed.bars, col)
    assert len(arr) == K and arr[-1] == df[col].iloc[K - 1]
    _no_future(arr, K, _future(df, col))
    with pytest.raises(IndexError):
        arr[K]  # the bar being decided is not closed
    with pytest.raises(IndexError):
        arr[-K - 1]  # negative indexes do not wrap into the future


def test_arrays_are_read_only_even_when_kept(feed):
    feed, df = feed
    feed.advance(K)
    close = feed.bars.close
    with pytest.raises(ValueError, match="read-only"):
        close[-1] = 0.0
    feed.advance(K + 10)
    assert len(close) == K  # a view kept from an earlier bar does not grow
    _no_future(close, K + 10, _future(df, "close", K + 10))  # nor reach past today's closed bars
    assert feed.bars.close[-1] == df.close.iloc[K + 9]


def test_window_refuses_bars_that_are_not_closed(feed):
    feed, df = feed
    feed.advance(K)
    bars = feed.bars
    for start, end in [(0, 10**9), (0, K + 1), (-1, 5), (5, 4), (K + 1, K + 2)]:
        with pytest.raises(EAError, match="visible"):
            bars.window(start, end)
    study = bars.window(5, K)
    assert (study.offset, len(study)) == (5, K - 5) and study.close[0] == df.close.iloc[5]
    _no_future(study.close, K, _future(df, "close"))
    with pytest.raises(EAError):
        study.window(0, 10)  # before the study window's start: outside what the study may see
    with pytest.raises(EAError):
        bars.window(0.5, 3)  # absolute indices are integers
    feed.advance(N)
    assert len(study) == K - 5  # a window stays fixed when more bars close


def test_frame_and_time_stop_at_the_newest_closed_bar(feed):
    feed, df = feed
    feed.advance(K)
    frame = feed.bars.frame()
    assert len(frame) == K and frame.index[-1] == df.index[K - 1]
    for col in COLUMNS:
        _no_future(frame[col].to_numpy(), K, _future(df, col))
    _no_future(frame.to_numpy(), K, _future(df, "close"))
    times = feed.bars.time
    assert len(times) == K and times[-1] == df.index[K - 1]
    future_times = df.index.asi8[K:].astype(np.float64)
    _no_future(times.asi8, K, future_times)
    _no_future(np.asarray(times.tz_localize(None)), K, future_times)


def test_an_indicator_line_reveals_only_closed_bars(feed):
    feed, df = feed
    close = df.close.to_numpy()
    line = Line(close * 2, feed.bars, "double")
    wide = Line(np.stack([close, close * 3], axis=1), feed.bars, "two columns")
    feed.advance(K)
    assert line[-1] == 2 * close[K - 1] and len(line) == K
    for bad in (K, -K - 1, 10**9):
        with pytest.raises(IndexError):
            line[bad]
    assert len(line[:]) == K and len(line[-5:]) == 5 and len(line.values) == K
    for arr in (line.values, line[:], line[-3:], wide.values, wide[-1], wide[:]):
        _no_future(arr, K, np.concatenate([2 * close[K:], close[K:], 3 * close[K:]]))
    with pytest.raises(ValueError, match="read-only"):
        line.values[0] = 1.0
    assert not isinstance(line[-1], np.ndarray)  # a number, not a view of the line
    assert type(line[-1]) is float and line[0] == 2 * close[0] and line[-K] == line[0]
    row = wide[-2]
    assert list(row) == [close[K - 2], 3 * close[K - 2]] and not row.flags.writeable
    for bad in (K, -K - 1):
        with pytest.raises(IndexError):
            wide[bad]


def test_a_line_over_a_window_ends_where_the_window_ends(feed):
    """A line made over a fixed window of bars reads no further than the window, however far the feed goes."""
    feed, df = feed
    close = df.close.to_numpy()
    feed.advance(K)
    line = Line(close, feed.bars.window(0, K - 3), "window")
    feed.advance(N)
    assert line[-1] == close[K - 4] and len(line) == K - 3 and len(line[:]) == K - 3
    with pytest.raises(IndexError):
        line[K - 3]
    _no_future(line.values, K - 3, close[K - 3 :])


def test_indicator_bars_are_blanked_after_evaluation(feed):
    """An indicator function sees the whole history once; keeping its bars afterwards gets nothing."""
    feed, _ = feed
    snap = feed.snapshot(N)
    kept = snap.bars
    close, times = kept.close, kept.time
    assert np.isfinite(close).all()
    snap.blank()
    assert np.isnan(kept.close).all() and np.isnan(close).all() and times.isna().all()
    assert np.isnan(kept.frame().to_numpy()).all()


def test_the_feed_never_moves_backwards_or_past_the_history(feed):
    feed, _ = feed
    feed.advance(K)
    with pytest.raises(ValueError):
        feed.advance(K - 1)
    with pytest.raises(ValueError):
        feed.advance(N + 1)


def test_bars_of_a_frame_outside_a_backtest():
    df = _history()
    bars = Bars.from_frame(df, meta_of(df), end=K)
    assert len(bars) == K and bars.close[-1] == df.close.iloc[K - 1] and bars.meta.symbol == "EURUSD"
    _no_future(bars.close, K, _future(df, "close"))
    assert len(Bars.from_frame(df, meta_of(df))) == N
