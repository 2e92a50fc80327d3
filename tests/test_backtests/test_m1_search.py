"""The 1 minute OHLC model's search for the next minute that can reach a working level: skipping a bar whose
whole span holds no level must never skip a minute the minute-by-minute rule finds."""

from types import SimpleNamespace

import numpy as np

from backtests.paths import M1Path
from datafeeds import resample, synthetic_candles


def _broker(levels):
    book = SimpleNamespace(levels=lambda: list(levels), orders=[], first_expiry=lambda: None)
    # nothing open: no stop-out to look for; no midnight inside a bar to stop at
    return SimpleNamespace(book=book, stop_out_on=False, midnight_rows=[])


def test_the_next_minute_reaching_a_level_is_the_one_minute_by_minute_search_finds():
    m1 = synthetic_candles("EURUSD", "M1", 60 * 24 * 3, seed=11, start="2021-03-01")
    m1 = m1[np.random.default_rng(1).random(len(m1)) > 0.2]  # minutes missing here and there
    h1 = resample(m1, "H1")
    path = M1Path(h1.index, m1, 1e-5, None)
    rng = np.random.default_rng(2)
    checked = skipped = 0
    for t in np.flatnonzero(path.starts[1:] > path.starts[:-1]):
        s, e = int(path.starts[t]), int(path.starts[t + 1])
        for m in (s, (s + e) // 2):
            wide = path.spread[max(m - 1, 0) : e].max()  # the ask the minute before ``m`` closed at too
            centre = (path.lows[m:e].min() + path.highs[m:e].max()) / 2
            levels = np.round(centre + rng.normal(0, 200, size=rng.integers(1, 4)))  # inside and outside
            touched = [
                r
                for r in range(m, e)
                if any(path.lows[r] - wide <= v <= path.highs[r] + wide for v in levels)
            ]
            found = path._next_touch(_broker(levels), int(t), m, e)
            assert found == (touched[0] if touched else e), (t, m, levels)
            checked += 1
            skipped += not touched
    assert checked > 100 and 0 < skipped < checked  # both kinds of bars were tried
