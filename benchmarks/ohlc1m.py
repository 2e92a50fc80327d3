"""The "1 minute OHLC" model's speed: M1 bars per second here vs backtesting.py's H1 bar rate.

The SMA(10/20) crossover EA with SL/TP (300/600 points) runs here with ``model="ohlc1m"`` over synthetic
EURUSD M1 candles (fills worked through every minute that can reach a level), and in "open prices only"
on the same candles resampled to H1; backtesting.py runs the same crossover (with the same stops) on the
H1 candles. Each ``run()`` is timed end to end after one untimed warm-up run, best of ``--repeats``.
The target (issue 13): the M1 rate here at least backtesting.py's H1 bar rate.

    python -m benchmarks.ohlc1m                 # 10 years of M1
    python -m benchmarks.ohlc1m --years 1 --repeats 1
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import pandas as pd

from benchmarks._machine import header, python_contestant

SL, TP = 300, 600  # points


def _peer_strategy():
    from backtesting import Strategy
    from backtesting.lib import crossover
    from backtesting.test import SMA

    class SmaCrossStops(Strategy):
        def init(self):
            self.f = self.I(SMA, self.data.Close, 10)
            self.s = self.I(SMA, self.data.Close, 20)

        def next(self):
            c = self.data.Close[-1]
            if crossover(self.f, self.s):
                self.position.close()
                self.buy(size=100_000, sl=c - SL * 1e-5, tp=c + TP * 1e-5)
            elif crossover(self.s, self.f):
                self.position.close()
                self.sell(size=100_000, sl=c + SL * 1e-5, tp=c - TP * 1e-5)

    return SmaCrossStops


def time_peer(h1: pd.DataFrame, repeats: int) -> float:
    from backtesting import Backtest

    data = h1.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    data.index = data.index.tz_localize(None)
    strategy, best = _peer_strategy(), math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(repeats + 1):
            bt = Backtest(data, strategy, cash=1e9, finalize_trades=True)
            t0 = time.perf_counter()
            bt.run()
            if i:
                best = min(best, time.perf_counter() - t0)
    return best


def time_ours(h1: pd.DataFrame, m1: pd.DataFrame | None, repeats: int) -> tuple[float, float, int]:
    from backtests import AccountConfig, Backtest
    from strategies import SmaCrossEA

    best, loop, trades = math.inf, math.inf, 0
    model = {"model": "ohlc1m", "m1": m1} if m1 is not None else {}
    for i in range(repeats + 1):
        bt = Backtest(h1, SmaCrossEA, forward=None, account=AccountConfig(deposit=1e9), **model)
        t0 = time.perf_counter()
        result = bt.run(sl_points=SL, tp_points=TP)
        if i:
            best = min(best, time.perf_counter() - t0)
            loop = min(loop, result.timings["replay_s"])
        trades = len(result.trades)
    return best, loop, trades


def main(argv: list[str] | None = None) -> None:
    from datafeeds import resample, synthetic_candles

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--years", type=float, default=10.0, help="years of synthetic M1 candles")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = parser.parse_args(argv)
    if args.tiny:
        args.years, args.repeats = 0.02, 1
    header(
        [
            python_contestant("backtesting.py Backtest.run", True),
            python_contestant("neuronet Backtest.run", False),
        ]
    )
    m1 = synthetic_candles("EURUSD", "M1", int(args.years * 365 * 1440), seed=5, start="2010-01-01")
    h1 = resample(m1, "H1")
    peer_s = time_peer(h1, args.repeats)
    open_s, _, open_trades = time_ours(h1, None, args.repeats)
    fine_s, fine_loop, fine_trades = time_ours(h1, m1, args.repeats)
    print(f"{len(m1):,} M1 bars, {len(h1):,} H1 bars")
    print(f"backtesting.py, H1:           {len(h1) / peer_s:>12,.0f} H1 bars/s")
    print(f"neuronet open prices, H1:     {len(h1) / open_s:>12,.0f} H1 bars/s ({open_trades} trades)")
    print(
        f"neuronet ohlc1m:              {len(m1) / fine_s:>12,.0f} M1 bars/s end to end, "
        f"{len(m1) / fine_loop:,.0f} M1 bars/s bar loop ({fine_trades} trades)"
    )
    ratio = peer_s / fine_s * len(m1) / len(h1)
    print(f"ratio (ohlc1m M1 bars/s over backtesting.py H1 bars/s): {ratio:.2f}x")


if __name__ == "__main__":
    main()
