"""Interrupted and resumed equals uninterrupted: for every sampler and for walk-forward, a study stopped
by Ctrl-C at any point (once or several times) and then resumed gives the table of a run never stopped
with the same seed: the same passes, pass numbers, figures and best pass, and no pass run twice."""

from __future__ import annotations

import pandas as pd
import pytest

from backtests.optimize import optimize, walk_forward
from datafeeds import load_candles
from strategies import ExpertAdvisor

COLUMNS = ["pass", "x", "y", "criterion"]
SPACE = {"x": "0:30", "y": "0:30"}  # 961 grid points


class Hill(ExpertAdvisor):
    """No trades; its custom criterion has one peak at (21, 9) and a ridge, so samplers have work to do.
    ``stop_after`` raises Ctrl-C's KeyboardInterrupt in the pass after that many passes ran."""

    x: int = 0
    y: int = 0
    runs: list = []  # noqa: RUF012 - a class-level record of every pass run (inline engine)
    stop_after: int | None = None

    def on_init(self) -> None:
        if type(self).stop_after is not None and len(type(self).runs) >= type(self).stop_after:
            raise KeyboardInterrupt
        type(self).runs.append((self.x, self.y))

    def on_tester(self, stats: dict) -> float:
        return -float((self.x - 21) ** 2 + 3 * (self.y - 9) ** 2 + 5 * ((self.x + self.y) % 7))


@pytest.fixture(scope="module")
def candles() -> pd.DataFrame:
    return load_candles("synthetic", bars=120, seed=11)


@pytest.fixture(autouse=True)
def _fresh():
    Hill.runs, Hill.stop_after = [], None


def _interrupted_then_resumed(run, stops: list[int]) -> tuple[pd.DataFrame | object, list]:
    """Run, stopping after each count of passes in ``stops`` (counted over the whole study), then
    resume to the end; returns the final result and every pass run on the way."""
    ran: list = []
    for stop in stops:
        Hill.runs, Hill.stop_after = [], stop - len(ran)
        with pytest.raises(KeyboardInterrupt):
            run()
        ran += Hill.runs
    Hill.runs, Hill.stop_after = [], None
    result = run()
    return result, ran + Hill.runs


CASES = [
    ("grid", None, {"x": "0:30:3", "y": "0:20:4"}, [1, 17, 40]),  # 66 points
    ("random", 40, SPACE, [3, 21]),
    ("tpe", 48, SPACE, [5]),
    ("tpe", 48, SPACE, [16, 17, 33]),  # at a round's edge, and just after it
    ("genetic", 70, SPACE, [25, 44, 61]),  # across NSGA-II's generations of 20
]


@pytest.mark.parametrize("method, passes, space, stops", CASES, ids=lambda v: str(v))
def test_interrupted_and_resumed_study_equals_the_uninterrupted_one(
    candles, tmp_path, method, passes, space, stops
):
    common = {"method": method, "passes": passes, "criterion": "custom", "seed": 4, "workers": 0}
    whole = optimize(candles, Hill, space, **common)
    Hill.runs = []
    db = str(tmp_path / "study.db")
    resumed, ran = _interrupted_then_resumed(
        lambda: optimize(candles, Hill, space, store_path=db, batch=3, **common), stops
    )
    pd.testing.assert_frame_equal(resumed[COLUMNS], whole[COLUMNS])
    assert set(ran) == set(zip(whole["x"], whole["y"], strict=True))
    # Only the passes of the batch (of 3) that Ctrl-C cut short ran again: a batch is recorded whole.
    assert len(ran) - len(whole) <= 2 * len(stops)


def test_pass_numbers_do_not_depend_on_the_order_passes_finish_in(candles):
    """A grid's pass k is grid point k (the last parameter varying fastest), whatever order ran it."""
    table = optimize(candles, Hill, {"x": [1, 2, 3], "y": [5, 6]}, criterion="custom", workers=0, seed=9)
    by_pass = table.sort_values("pass")
    assert list(by_pass["pass"]) == list(range(6))
    points = list(zip(by_pass["x"], by_pass["y"], strict=True))
    assert points == [(1, 5), (1, 6), (2, 5), (2, 6), (3, 5), (3, 6)]
    other_seed = optimize(candles, Hill, {"x": [1, 2, 3], "y": [5, 6]}, criterion="custom", workers=0, seed=1)
    pd.testing.assert_frame_equal(other_seed[COLUMNS], table[COLUMNS])


def test_a_resumed_study_with_more_passes_continues_the_shorter_one(candles, tmp_path):
    """Asking for more passes later gives the longer uninterrupted run, re-running none of the first."""
    common = {"method": "tpe", "criterion": "custom", "seed": 2, "workers": 0}
    long = optimize(candles, Hill, SPACE, passes=40, **common)
    Hill.runs = []
    db = str(tmp_path / "study.db")
    optimize(candles, Hill, SPACE, passes=25, store_path=db, **common)
    again = optimize(candles, Hill, SPACE, passes=40, store_path=db, **common)
    pd.testing.assert_frame_equal(again[COLUMNS], long[COLUMNS])
    assert len(Hill.runs) == len(set(Hill.runs)) == 40


@pytest.mark.parametrize("method, passes, stops", [("grid", None, [7, 30]), ("tpe", 20, [12, 29])])
def test_interrupted_walk_forward_resumes_to_the_uninterrupted_analysis(tmp_path, method, passes, stops):
    df = load_candles("synthetic", bars=400, seed=12)
    space = {"x": "0:30:6", "y": "0:20:5"} if method == "grid" else SPACE  # 30 points
    common = {"method": method, "passes": passes, "criterion": "custom", "seed": 3, "workers": 0}
    whole = walk_forward(df, Hill, space, 150, 100, **common)
    Hill.runs = []
    db = str(tmp_path / "wf.db")
    resumed, ran = _interrupted_then_resumed(
        lambda: walk_forward(df, Hill, space, 150, 100, store_path=db, batch=2, **common), stops
    )
    pd.testing.assert_frame_equal(resumed.passes[["window", *COLUMNS]], whole.passes[["window", *COLUMNS]])
    pd.testing.assert_frame_equal(resumed.windows, whole.windows)
    # Every window's passes and each winner's test window ran; only a batch (of 2) cut short ran again.
    assert len(ran) - len(whole.passes) - len(whole.windows) <= len(stops)


def test_workers_finishing_in_any_order_give_the_inline_table():
    """Two worker processes return batches in whatever order they finish; the sampler is still told the
    round in proposal order, so passes, numbers and figures equal the inline run's."""
    from strategies import SmaCrossEA

    df = load_candles("synthetic", bars=500, seed=13)
    space = {"fast": "2:40", "slow": "20:120:5"}
    common = {"method": "tpe", "passes": 40, "seed": 8, "batch": 1}
    inline = optimize(df, SmaCrossEA, space, workers=0, **common)
    spread = optimize(df, SmaCrossEA, space, workers=2, **common)
    columns = ["pass", "fast", "slow", "criterion", "total_trades"]
    pd.testing.assert_frame_equal(spread[columns], inline[columns])


def test_ctrl_c_inside_a_batch_keeps_the_passes_of_it_that_finished(candles, tmp_path):
    """Inline, Ctrl-C in the fourth pass of a batch of five: the three passes before it are in the store,
    and the resumed run runs only the other five of the eight."""
    space = {"x": "0:3", "y": "0:1"}
    db = str(tmp_path / "s.db")
    common = {"criterion": "custom", "seed": 4, "workers": 0, "store_path": db, "batch": 5}
    Hill.stop_after = 3
    with pytest.raises(KeyboardInterrupt):
        optimize(candles, Hill, space, **common)
    first, Hill.runs, Hill.stop_after = list(Hill.runs), [], None
    table = optimize(candles, Hill, space, **common)
    assert len(first) == 3 and table.attrs["ran"] == 5 and len(Hill.runs) == 5
    assert sorted(first + Hill.runs) == sorted(zip(table["x"], table["y"], strict=True))
