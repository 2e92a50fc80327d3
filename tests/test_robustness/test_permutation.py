"""Permutation tests of an EA: permuted bars stay bars and never carry the forward period into the study
window; an EA without an edge gets uniform p-values, a planted edge p < 0.01 with retraining on every
permuted history; interrupted and resumed equals uninterrupted; Dask workers give the same p-values."""

from __future__ import annotations

import numpy as np
import pytest
from robust_helpers import LearnerEA, RandomEA, candles
from scipy import stats

from backtests import AccountConfig
from backtests.robustness.errors import RobustnessError
from backtests.robustness.permutation import Job, permutation_test
from backtests.robustness.permute import permute_candles
from datafeeds import read_sample


def _moves(df, a, b):
    """The multiset of bars ``a..b-1``'s log moves (gap from the previous close, then high, low, close
    from the open), rounded to the price grid's resolution."""
    o, h, lo, c = (np.log(df[k].to_numpy()) for k in ("open", "high", "low", "close"))
    gap = o[a:b] - c[a - 1 : b - 1]
    return sorted(np.round(gap, 4)), sorted(
        map(tuple, np.round(np.column_stack([h - o, lo - o, c - o])[a:b], 4))
    )


@pytest.mark.parametrize("block", [1, 24])
def test_permuted_bars_are_bars_on_the_grid_and_periods_stay_apart(block):
    df = read_sample()
    fs = 3333
    p = permute_candles(df, fs, np.random.default_rng(4), block=block)
    assert p.index.equals(df.index) and p.attrs == df.attrs and list(p.columns) == list(df.columns)
    assert (p["high"] >= p[["open", "close"]].max(axis=1)).all()
    assert (p["low"] <= p[["open", "close"]].min(axis=1)).all()
    assert np.allclose(
        p[["open", "high", "low", "close"]] * 1e5, np.round(p[["open", "high", "low", "close"]] * 1e5)
    )
    assert p.iloc[0].equals(df.iloc[0])  # the first price is kept
    assert p["close"].iloc[fs - 1] == pytest.approx(
        df["close"].iloc[fs - 1], abs=2e-5
    )  # forward starts there
    assert not np.array_equal(p["close"].to_numpy(), df["close"].to_numpy())
    # Each period holds its own moves, reordered: no forward move in the study window, none lost.
    for a, b in ((1, fs), (fs + 1, len(df))):
        got, want = _moves(p, a, b), _moves(df, a, b)
        if block > 1:
            continue  # whole blocks move together: the boundary bars' gaps differ
        assert np.allclose(got[0], want[0], atol=2e-4) and len(got[1]) == len(want[1])


def test_forward_scope_keeps_the_study_window_real():
    df = read_sample()
    p = permute_candles(df, 3333, np.random.default_rng(1), scope="forward")
    assert p.iloc[:3333].equals(df.iloc[:3333])
    assert not p.iloc[3333:].equals(df.iloc[3333:])


def _p(seed: int, permutations: int) -> float:
    df = candles(240, seed)
    job = Job(RandomEA, {"seed": seed}, AccountConfig(), seed, 160)
    return permutation_test(df, job, permutations, workers=0).p_values["net_profit"]


def _calibration(seeds: int) -> None:
    """p ≤ 0.05 (the real history beats all 19 permuted ones) happens with probability exactly 1/20 when
    bars are exchangeable: the count over the seeds is Binomial(seeds, 0.05), and p is uniform on
    {1/20, ..., 1}."""
    p = np.array([_p(seed, 19) for seed in range(seeds)])
    rejections = int(np.sum(p <= 0.05))
    low, high = stats.binom.ppf([0.0005, 0.9995], seeds, 0.05)
    assert low <= rejections <= high, rejections
    assert abs(p.mean() - 0.525) < 3.5 * np.sqrt((400 - 1) / 12 / 400 / seeds)


def test_a_random_trader_gets_uniform_p_values():
    _calibration(30)


@pytest.mark.slow
def test_a_random_trader_gets_uniform_p_values_over_many_seeds():
    _calibration(300)


def test_a_planted_edge_is_found_after_retraining_on_every_permuted_history():
    LearnerEA.learned = []
    df = candles(400, 2, phi=0.4)
    test = permutation_test(df, Job(LearnerEA, {}, AccountConfig(), 2, 200), 149, workers=0)
    assert test.p_values["net_profit"] < 0.01
    assert test.real["net_profit"] > test.distributions["net_profit"]["percentiles"]["99"]
    # One training per history, each on its own (permuted) study window: the real one finds the
    # planted autocorrelation, the permuted ones find none.
    assert len(LearnerEA.learned) == 150
    assert LearnerEA.learned[0] > 0.25 and abs(np.median(LearnerEA.learned[1:])) < 0.1


class Stopping(RandomEA):
    """RandomEA that raises Ctrl-C's KeyboardInterrupt once ``stop_after`` passes have run."""

    runs: list = []  # noqa: RUF012
    stop_after: int | None = None

    def on_init(self) -> None:
        cls = type(self)
        if cls.stop_after is not None and len(cls.runs) >= cls.stop_after:
            raise KeyboardInterrupt
        cls.runs.append(1)
        super().on_init()


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path):
    df = candles(200, 3)
    job = Job(Stopping, {"seed": 3}, AccountConfig(), 3, 120, block=3)
    Stopping.runs, Stopping.stop_after = [], None
    whole = permutation_test(df, job, 30, workers=0).to_dict()
    store = str(tmp_path / "perm.db")
    ran = 0
    for stop in (10, 13):  # batches of 8, then of 6 passes: each stop loses a batch in flight
        Stopping.runs, Stopping.stop_after = [], stop
        with pytest.raises(KeyboardInterrupt):
            permutation_test(df, job, 30, workers=0, store_path=store)
        ran += len(Stopping.runs)
    Stopping.runs, Stopping.stop_after = [], None
    resumed = permutation_test(df, job, 30, workers=0, store_path=store)
    ran += len(Stopping.runs)
    assert resumed.to_dict() | {"study": None} == whole | {"study": None}
    assert resumed.ran == 31 - 8 - 12 and ran == 31 + 2 + 1  # only the passes in flight ran twice
    more = permutation_test(df, job, 40, workers=0, store_path=store)  # more permutations continue
    assert more.ran == 10 and more.permutations == 40


@pytest.mark.slow
def test_dask_workers_give_the_same_p_values(tmp_path):
    df = candles(200, 4)
    job = Job(RandomEA, {"seed": 4}, AccountConfig(), 4, 120)
    inline = permutation_test(df, job, 24, workers=0).to_dict()
    assert permutation_test(df, job, 24, workers=2).to_dict() | {"study": None} == inline | {"study": None}


@pytest.mark.parametrize(
    "permutations, block, scope, match",
    [(0, 1, "both", "--permutations 0"), (10**9, 1, "both", "--permutations"), (5, 0, "both", "block"),
     (5, 10**6, "both", "block"), (5, 1, "study", "--permute")],
    ids=["N=0", "N absurd", "block 0", "block longer than the forward period", "unknown scope"],
)  # fmt: skip
def test_bad_requests_are_one_line_before_any_pass(permutations, block, scope, match):
    RandomEA.runs = []
    with pytest.raises(RobustnessError, match=match) as info:
        permutation_test(candles(120, 0), Job(RandomEA, {}, AccountConfig(), 0, 60, block=block, scope=scope),
                         permutations, workers=0)  # fmt: skip
    assert "\n" not in str(info.value)
