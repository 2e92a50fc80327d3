"""The tick model's speed: ticks per second through ``--model ticks``, with and without an ``on_tick`` EA.

A year of synthetic EURUSD ticks (``datafeeds.synthetic_ticks``: about 80 a minute, some 30 M in the 260
trading days of a year)
makes up synthetic M1 candles exactly; the EA trades on the H1 bars built from them. Two EAs run:

- ``BreakoutTickEA`` overrides ``on_tick`` (so it runs on every tick): it buys when a tick's bid breaks the
  last closed bar's high by ``breakout`` points, with SL/TP, and moves its stop to the entry once the bid
  is ``trail`` points up. It trades rarely; the rate is the hook loop's, the EA's own Python included.
- ``SmaCrossEA`` with SL/TP has no ``on_tick``: only the ticks that can reach a level are visited.

Each ``run()`` is timed end to end after one untimed warm-up run, best of ``--repeats``; the rate counts
XX with the rarely trading on_tick EA.
For the "1 minute OHLC" model against backtesting.py's H1 bar rate, see ``benchmarks.ohlc1m``.

    python -m benchmarks.ticks                 # a year of ticks
    python -m benchmarks.ticks --years 0.25 --repeats 1
"""

from __future__ import annotations

import argparse
import math
import time

from benchmarks._machine import header, python_contestant
from strategies import ExpertAdvisor


class BreakoutTickEA(ExpertAdvisor):
    """Buy a breakout of the last bar's high seen tick by tick; stop to break-even once ahead."""

    breakout: float = 100.0  # points above the last closed bar's high
    trail: float = 200.0  # points of profit that move the stop to the entry
    sl_points: float = 300.0
    tp_points: float = 600.0

    def on_init(self) -> None:
        self.level = math.inf  # the bid that triggers a buy
        self.ahead = math.inf  # the bid that moves the stop to the entry
        self.ticket = None

    def on_bar(self) -> None:
        self.level = self.bars.high[-1] + self.breakout * self.point
        if self.ticket is not None and not self.positions():
            self.ticket, self.ahead = None, math.inf

    def on_tick(self, tick) -> None:
        bid = tick.bid
        if bid > self.level:
            self.level = math.inf  # one try a bar
            if self.ticket is None:
                self.ticket = self.buy(0.1, sl_points=self.sl_points, tp_points=self.tp_points)
                self.ahead = tick.ask + self.trail * self.point
        elif bid > self.ahead:
            self.ahead = math.inf  # once
            for pos in self.positions():  # none when its SL or TP came first
                self.modify(pos.ticket, sl=pos.price_open)


def time_run(h1, ticks, ea, repeats: int, **params) -> tuple[float, float, int, int]:
    """(best end-to-end seconds, best replay seconds, trades, forward ticks)."""
    from backtests import AccountConfig, Backtest

    best, loop, trades = math.inf, math.inf, 0
    for i in range(repeats + 1):
        bt = Backtest(h1, ea, forward=None, model="ticks", ticks=ticks, account=AccountConfig(deposit=1e6))
        t0 = time.perf_counter()
        result = bt.run(**params)
        if i:
            best = min(best, time.perf_counter() - t0)
            loop = min(loop, result.timings["replay_s"])
        trades = len(result.trades)
    first = h1.index[bt.periods.forward_start]
    return best, loop, trades, int((ticks.index >= first).sum())


def main(argv: list[str] | None = None) -> None:
    from datafeeds import bars_from_ticks, resample, synthetic_candles, synthetic_ticks
    from strategies import SmaCrossEA

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--years", type=float, default=1.0, help="years of synthetic ticks")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = parser.parse_args(argv)
    if args.tiny:
        args.years, args.repeats = 0.01, 1
    header([python_contestant("neuronet Backtest.run, ticks model", False)])
    t0 = time.perf_counter()
    m1 = synthetic_candles("EURUSD", "M1", int(args.years * 260 * 1440), seed=5, start="2023-01-01")
    ticks = synthetic_ticks(m1, seed=5)
    h1 = resample(bars_from_ticks(ticks, "M1"), "H1")
    made = time.perf_counter() - t0
    print(f"{len(ticks):,} ticks, {len(m1):,} M1 bars, {len(h1):,} H1 bars (made in {made:.1f} s)")
    for name, ea, params in (
        ("on_tick EA (BreakoutTickEA)", BreakoutTickEA, {}),
        ("no on_tick (SmaCrossEA, SL/TP)", SmaCrossEA, {"sl_points": 300, "tp_points": 600}),
    ):
        best, loop, trades, n = time_run(h1, ticks, ea, args.repeats, **params)
        print(
            f"{name:32s} {n / best:>12,.0f} ticks/s end to end, {n / loop:>12,.0f} ticks/s replay "
            f"({trades} trades, {best:.2f} s)"
        )


if __name__ == "__main__":
    main()
