"""Replay speed: bars per second of the SMA-crossover EA here vs the same strategy in backtesting.py.

Both run in this process on the same candles: the embedded 5,000-bar EURUSD H1 sample and a 1,000,000-bar
synthetic H1 series. Each side's ``run()`` is timed end to end (indicators, the bar loop, the statistics)
after one untimed warm-up run; the best of ``--repeats`` is kept. Before each run the previous run's
result is released and collected, on both sides, so that neither run pays for another's million-row tables
still held in memory (as a user's single run does not). ``--hold-previous`` times each run as a notebook
re-running ``result = bt.run()`` does, on both sides: the previous result stays alive until the new run
returns and is then dropped by the name's rebinding, with no collection forced (what it holds in reference
cycles waits for Python's own collector), so the new run's arrays come from fresh memory. For this harness
the bar loop alone (``replay_s``) is shown as well; its end-to-end time includes the causality probes of
the indicators (each is recomputed on three shorter prefixes) and the MetaTrader statistics.

    python -m benchmarks.replay                 # sample + 1M synthetic bars
    python -m benchmarks.replay --bars 200000 --repeats 3
    python -m benchmarks.replay --clock cpu      # CPU seconds: a shared machine's other jobs left out
    python -m benchmarks.replay --hold-previous  # each run timed while the previous result is held
"""

from __future__ import annotations

import argparse
import gc
import math
import time
import warnings

import pandas as pd

from benchmarks._machine import CLOCKS, header, python_contestant, use_clock


def _peer_strategy():
    from benchmarks._peer_sma import PeerSmaCross  # imports backtesting.py only when its run is timed

    return PeerSmaCross


def time_peer(df: pd.DataFrame, repeats: int, hold: bool = False) -> tuple[float, int]:
    from backtesting import Backtest

    data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    data.index = data.index.tz_localize(None)
    strategy = _peer_strategy()
    best, trades, stats = math.inf, 0, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(repeats + 1):
            if not hold:  # the last run's result released and collected before this one
                bt = stats = None
                gc.collect()
            bt = Backtest(data, strategy, cash=1e9, finalize_trades=True)
            t0 = time.perf_counter()
            stats = bt.run()  # held: the last result is alive until this returns, as in a notebook
            if i:
                best = min(best, time.perf_counter() - t0)
            trades = int(stats["# Trades"])
    return best, trades


def time_ours(df: pd.DataFrame, repeats: int, hold: bool = False) -> tuple[float, float, int]:
    from backtests import AccountConfig, Backtest
    from strategies import SmaCrossEA

    best, loop, trades, result = math.inf, math.inf, 0, None
    for i in range(repeats + 1):
        if not hold:  # the last run's result released and collected before this one
            bt = result = None
            gc.collect()
        bt = Backtest(df, SmaCrossEA, forward=None, account=AccountConfig(deposit=1e9))
        t0 = time.perf_counter()
        result = bt.run()  # held: the last result is alive until this returns, as in a notebook
        if i:
            best = min(best, time.perf_counter() - t0)
            loop = min(loop, result.timings["replay_s"])
        trades = len(result.trades)
    return best, loop, trades


def datasets(bars: int) -> list[tuple[str, pd.DataFrame]]:
    from datafeeds import read_sample, synthetic_candles

    out = [("EURUSD H1 sample", read_sample())]
    if bars:
        out.append((f"synthetic H1, {bars:,} bars", synthetic_candles("EURUSD", "H1", bars, seed=1)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=1_000_000, help="synthetic bars (0 = sample only)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--hold-previous",
        action="store_true",
        help="keep each side's previous result alive while its next run is timed (a notebook's re-run)",
    )
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    parser.add_argument(
        "--clock", choices=CLOCKS, default="wall", help="cpu: CPU seconds of this process (a shared machine)"
    )
    args = parser.parse_args(argv)
    use_clock(args.clock)
    if args.tiny:
        args.bars, args.repeats = 2_000, 1
    header(
        [
            python_contestant("backtesting.py Backtest.run", True),
            python_contestant("neuronet Backtest.run", False),
        ]
    )
    head = f"{'data':<28} {'bars':>9} {'backtesting.py':>16} {'neuronet':>14} {'(loop only)':>14}"
    print(f"{head} {'ratio':>7}")
    for name, df in datasets(args.bars):
        n = len(df)
        peer_s, peer_trades = time_peer(df, args.repeats, args.hold_previous)
        ours_s, loop_s, our_trades = time_ours(df, args.repeats, args.hold_previous)
        print(
            f"{name:<28} {n:>9,} {n / peer_s:>12,.0f} b/s {n / ours_s:>10,.0f} b/s {n / loop_s:>10,.0f} b/s "
            f"{peer_s / ours_s:>6.2f}x"
        )
        if peer_trades != our_trades:
            # backtesting.py's crossover() is strict on both bars and its SMA rounds differently, so bars
            # where the two averages tie exactly can resolve differently; the sample has no such ties.
            print(f"  note: {peer_trades} vs {our_trades} trades (exact SMA ties resolve differently)")
    held = "held" if args.hold_previous else "released and collected"
    print(f"previous result: {held} during each timed run, on both sides")
    print("ratio = backtesting.py time / neuronet time for the same run (higher is faster here)")


if __name__ == "__main__":
    main()
