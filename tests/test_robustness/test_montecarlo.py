"""Monte Carlo of a finished run: percentiles of a hand-made trade list against a direct computation and
against the exact distribution, seeds, chunks, Dask workers, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from backtests.robustness.errors import RobustnessError
from backtests.robustness.montecarlo import (
    CHUNK_VALUES,
    PERCENTILES,
    Plan,
    Run,
    chunk_tasks,
    monte_carlo,
    resample_indices,
)

DEPOSIT = 1000.0
NET = np.array([120.0, -80.0, 50.0, -200.0, 90.0])
T0 = pd.Timestamp("2024-01-01", tz="UTC")


def hand_run(net=NET, equity=None) -> Run:
    trades = pd.DataFrame(
        {"exit_time": [T0 + pd.Timedelta(days=2 * (i + 1)) for i in range(len(net))], "net_profit": net}
    )
    if equity is None:
        equity = DEPOSIT + np.concatenate(([0.0], np.cumsum(net)))
    curves = pd.DataFrame({"equity": equity}, index=[T0 + pd.Timedelta(days=i) for i in range(len(equity))])
    return Run.from_frames(DEPOSIT, trades, curves)


def direct(values: list[float], times: list[float]) -> tuple[float, float, float, float]:
    """One path's figures, the slow way: final, maximal drawdown (money, % of its peak), and the longest
    time from a peak to the first point back at it, or to the end while still below."""
    peak, peak_t, under = values[0], times[0], False
    dd = dd_pct = longest = 0.0
    for v, t in zip(values[1:], times[1:], strict=True):
        if v >= peak:
            if under:
                longest = max(longest, t - peak_t)
            peak, peak_t, under = v, t, False
        else:
            under = True
            dd, dd_pct = max(dd, peak - v), max(dd_pct, (peak - v) / peak * 100)
            longest = max(longest, t - peak_t)
    return values[-1], dd, dd_pct, longest


def test_percentiles_of_a_hand_made_trade_list_match_a_direct_computation():
    run = hand_run()
    plan = Plan("trades", 300, seed=7, ruin_pct=15.0)
    got = monte_carlo(run, plan)
    # The same draws, the slow way: chunk by chunk with the chunk's own generator.
    rows = []
    for _, (p, index) in chunk_tasks(run, plan):
        rng = np.random.default_rng([p.seed, 0, index])
        n = min(p.chunk(run), p.simulations - index * p.chunk(run))
        for draw in resample_indices(run, p, rng, n):
            balance = [DEPOSIT]
            for j in draw:
                balance.append(balance[-1] + NET[j])
            times = [run.start_time, *run.trade_times]
            rows.append(direct(balance, times))
    final, dd, dd_pct, uw = (np.array(c) for c in zip(*rows, strict=True))
    for key, values in (
        ("final", final),
        ("max_drawdown", dd),
        ("max_drawdown_pct", dd_pct),
        ("under_water_s", uw),
    ):
        want = np.percentile(values, PERCENTILES)
        assert list(got.figures[key]["percentiles"].values()) == pytest.approx(want, rel=1e-12, abs=1e-9), key
    assert got.ruin_probability == pytest.approx(np.mean(dd_pct >= 15.0))
    real = direct(list(DEPOSIT + np.concatenate(([0.0], np.cumsum(NET)))), [run.start_time, *run.trade_times])
    assert got.figures["max_drawdown"]["actual"] == pytest.approx(real[1])
    assert got.figures["under_water_s"]["actual"] == pytest.approx(real[3])


def test_trade_resampling_converges_to_the_exact_distribution():
    """Three trades drawn with replacement: 27 equally likely sequences; the simulated median final balance
    and ruin probability approach the exact ones."""
    net = np.array([100.0, -150.0, 40.0])
    finals, ruined = [], []
    for seq in itertools.product(net, repeat=3):
        path = DEPOSIT + np.concatenate(([0.0], np.cumsum(seq)))
        peak = np.maximum.accumulate(path)
        finals.append(path[-1])
        ruined.append(((peak - path) / peak * 100).max() >= 20.0)
    got = monte_carlo(hand_run(net), Plan("trades", 200_000, seed=1, ruin_pct=20.0))
    assert got.ruin_probability == pytest.approx(np.mean(ruined), abs=0.005)
    assert got.figures["final"]["mean"] == pytest.approx(np.mean(finals), abs=1.0)
    assert got.figures["final"]["percentiles"]["50"] == np.percentile(finals, 50)


def test_the_same_seed_gives_the_same_figures_and_another_seed_others():
    run = hand_run(equity=DEPOSIT * np.cumprod(np.r_[1.0, 1 + np.random.default_rng(0).normal(0, 0.01, 300)]))
    for method in ("trades", "returns"):
        a = monte_carlo(run, Plan(method, 500, seed=3, ruin_pct=10.0)).to_dict()
        b = monte_carlo(run, Plan(method, 500, seed=3, ruin_pct=10.0)).to_dict()
        c = monte_carlo(run, Plan(method, 500, seed=4, ruin_pct=10.0)).to_dict()
        assert a == b and a["figures"] != c["figures"]


def test_chunks_bound_memory_and_do_not_change_the_figures(monkeypatch):
    """Long histories run in chunks of at most CHUNK_VALUES path values; the figures are those of the
    chunk plan, which depends on the inputs only."""
    import backtests.robustness.montecarlo as mc

    run = hand_run(equity=DEPOSIT * np.cumprod(np.r_[1.0, 1 + np.random.default_rng(1).normal(0, 0.01, 999)]))
    plan = Plan("returns", 50_000, seed=2, ruin_pct=10.0)
    assert plan.chunk(run) * len(run.equity) <= CHUNK_VALUES and len(chunk_tasks(run, plan)) > 1
    seen = []
    real = mc._paths

    def spy(*args):
        out = real(*args)
        seen.append(out[0].size)
        return out

    monkeypatch.setattr(mc, "_paths", spy)
    monte_carlo(run, Plan("returns", 5000, seed=2, ruin_pct=10.0))
    assert max(seen) <= CHUNK_VALUES


def test_the_returns_bootstrap_keeps_the_real_path_as_its_actual_figures():
    equity = np.array([DEPOSIT, 1010.0, 990.0, 1030.0, 1000.0, 1050.0])
    got = monte_carlo(hand_run(equity=equity), Plan("returns", 100, seed=0, ruin_pct=50.0, block=2))
    assert got.figures["final"]["actual"] == pytest.approx(1050.0)
    assert got.figures["max_drawdown"]["actual"] == pytest.approx(30.0)
    assert got.block == 2


@pytest.mark.slow
def test_dask_workers_give_the_inline_figures():
    from backtests.optimize.engine import Engine

    run = hand_run(equity=DEPOSIT * np.cumprod(np.r_[1.0, 1 + np.random.default_rng(2).normal(0, 0.01, 500)]))
    plan = Plan("returns", 20_000, seed=5, ruin_pct=10.0)
    inline = monte_carlo(run, plan).to_dict()
    with Engine(workers=2) as engine:
        assert monte_carlo(run, plan, engine, engine.share(run)).to_dict() == inline


@pytest.mark.parametrize(
    "method, net, equity, simulations, match",
    [
        ("trades", NET[:1], None, 100, "at least 2 closed trades"),
        ("returns", NET, np.full(6, DEPOSIT), 100, "zero-variance"),
        ("returns", NET, np.array([DEPOSIT, 1000.0]), 100, "at least 3 bars"),
        ("trades", NET, None, 0, "--monte-carlo 0"),
        ("trades", NET, None, 10**9, "--monte-carlo 1000000000"),
        ("bootstrap", NET, None, 10, "method"),
    ],
    ids=["one trade", "flat equity", "two bars", "N=0", "N absurd", "unknown method"],
)
def test_bad_input_is_one_line(method, net, equity, simulations, match):
    with pytest.raises(RobustnessError, match=match) as info:
        monte_carlo(hand_run(net, equity), Plan(method, simulations, seed=0, ruin_pct=20.0))
    assert "\n" not in str(info.value)
