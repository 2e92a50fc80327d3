"""Permutation test throughput: the real history and N permuted ones of SmaCrossEA over the embedded
5,000-bar EURUSD H1 sample (forward 1/3), each a full backtest of a rebuilt history, every one recorded in a
SQLite study store. Inline (this process) and on 1 and 2 local worker processes, timed end to end (workers'
start included); plus the Monte Carlo of the real run (trades and bar returns).

    python -m benchmarks.robustness [--permutations 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks._machine import Contestant, header


def time_permutations(df, permutations: int, workers: int, folder: Path) -> tuple[float, dict]:
    from backtests import AccountConfig
    from backtests.robustness.permutation import Job, permutation_test
    from strategies import SmaCrossEA

    job = Job(SmaCrossEA, dict(SmaCrossEA.param_defaults()), AccountConfig(), 0, len(df) - round(len(df) / 3))
    store = str(folder / f"w{workers}-{time.time_ns()}.db")
    t0 = time.perf_counter()
    test = permutation_test(df, job, permutations, workers=workers, store_path=store)
    return time.perf_counter() - t0, test.p_values


def time_monte_carlo(df, simulations: int) -> dict[str, float]:
    from backtests import Backtest
    from backtests.robustness.montecarlo import Plan, Run, monte_carlo
    from strategies import SmaCrossEA

    result = Backtest(df, SmaCrossEA).run()
    run = Run.from_frames(result.account["deposit"], result.trades, result.curves)
    out = {}
    for method in ("trades", "returns"):
        t0 = time.perf_counter()
        monte_carlo(run, Plan(method, simulations, 0, 20.0))
        out[method] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.robustness")
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--tiny", action="store_true", help="a toy size: checks that the benchmark runs")
    args = parser.parse_args(argv)
    from datafeeds import read_sample

    df = read_sample()
    n = 8 if args.tiny else args.permutations
    sims = 200 if args.tiny else 10_000
    counts = (0, 1, 2) if not args.tiny else (0,)
    header(
        [
            Contestant(f"neuronet permutation test, {w or 'inline'} worker(s)", max(w, 1), peer=False)
            for w in counts
        ]
    )
    print(f"SmaCrossEA on {len(df)} bars, {n} permutations + the real history")
    with tempfile.TemporaryDirectory() as tmp:
        for workers in counts:
            seconds, p = time_permutations(df, n, workers, Path(tmp))
            where = "inline" if workers == 0 else f"{workers} local worker process(es)"
            rate = (n + 1) / seconds
            print(f"permutations, {where}: {seconds:.1f} s, {rate:.1f} passes/s, p = {p['net_profit']:.4f}")
    for method, seconds in time_monte_carlo(df, sims).items():
        print(f"Monte Carlo {method}: {sims:,} simulations in {seconds:.2f} s")


if __name__ == "__main__":
    main()
