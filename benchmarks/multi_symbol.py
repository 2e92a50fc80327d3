"""Several symbols on one account: the cost of a symbol-bar with three symbols against one symbol's.

The same EA (each symbol on its own: long after an up bar, short after a down bar, 0.1 lots, a stop-loss and
take-profit of 200/300 points, on a deposit no loss exhausts) runs on three synthetic symbols (EURUSD,
GBPUSD, AUDUSD, one seed each) on one account, and on each of them alone, in open prices, "1 minute OHLC"
and real ticks (synthetic ticks making up each symbol's minutes). Each ``run()``'s bar loop (``replay_s``)
is timed after one untimed warm-up, best of ``--repeats``; the cost per symbol-bar is the loop time over
symbols x bars, one symbol's being the three single-symbol runs' loops together over 3 x bars (the same
trades: the symbols differ in how often their stops are hit, so EURUSD alone is no measure of the others).
The target: three symbols' cost per symbol-bar within 1.2x of one symbol's.

    python -m benchmarks.multi_symbol           # 100,000 H1 bars (open), 10,000 (ohlc1m), 2,000 (ticks)
    python -m benchmarks.multi_symbol --bars 20000 --m1-bars 2000 --tick-bars 500 --repeats 1
    python -m benchmarks.multi_symbol --clock cpu   # CPU seconds: a shared machine's other jobs left out
"""

from __future__ import annotations

import argparse

from benchmarks._machine import CLOCKS, use_clock

SYMBOLS = ("EURUSD", "GBPUSD", "AUDUSD")


def _ea(symbols: tuple[str, ...]):
    from strategies.base import ExpertAdvisor

    class Follow(ExpertAdvisor):
        lots = 0.1

        def on_bar(self):
            for s in self.symbols:
                bars = self.data(s)
                if len(bars) < 2 or self.position_of(s):
                    continue
                up = bars.close[-1] > bars.close[-2]
                (self.buy if up else self.sell)(self.lots, symbol=s, sl_points=200, tp_points=300)

    Follow.symbols = symbols
    return Follow


def _time(frames, symbols, fine, model: str, repeats: int) -> tuple[float, int]:
    from backtests import AccountConfig, Backtest

    ea = _ea(symbols)
    one = len(symbols) == 1
    data = frames[symbols[0]] if one else {s: frames[s] for s in symbols}
    given = None if fine is None else (fine[symbols[0]] if one else {s: fine[s] for s in symbols})
    account = AccountConfig(deposit=1e9)  # never out of money: every run trades the whole history
    kind = {"ohlc1m": "m1", "ticks": "ticks"}.get(model)
    data_of = {kind: given} if kind else {}
    bt = Backtest(data, ea, forward=None, model=model, account=account, **data_of)
    bt.run()
    best, trades = float("inf"), 0
    for _ in range(repeats):
        result = bt.run()
        best, trades = min(best, result.timings["replay_s"]), len(result.trades)
    return best, trades


def _frames(bars: int, model: str, ticks_per_minute: float):
    """H1 candles of each symbol and the finer data ``model`` works through (M1 bars or ticks)."""
    from datafeeds import bars_from_ticks, resample, synthetic_candles, synthetic_ticks

    if model == "open":
        return {s: synthetic_candles(s, "H1", bars, seed=i + 1) for i, s in enumerate(SYMBOLS)}, None
    m1 = {s: synthetic_candles(s, "M1", bars * 60, seed=i + 1) for i, s in enumerate(SYMBOLS)}
    if model == "ohlc1m":
        return {s: resample(df, "H1") for s, df in m1.items()}, m1
    ticks = {
        s: synthetic_ticks(df, seed=i + 1, ticks_per_minute=ticks_per_minute)
        for i, (s, df) in enumerate(m1.items())
    }
    return {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}, ticks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=100_000, help="H1 bars per symbol, open prices")
    parser.add_argument("--m1-bars", type=int, default=10_000, help="H1 bars per symbol, ohlc1m (x60 M1)")
    parser.add_argument("--tick-bars", type=int, default=2_000, help="H1 bars per symbol, ticks")
    parser.add_argument("--ticks-per-minute", type=float, default=20.0)
    parser.add_argument("--models", default="open,ohlc1m,ticks", help="which models, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    parser.add_argument(
        "--clock", choices=CLOCKS, default="wall", help="cpu: CPU seconds of this process (a shared machine)"
    )
    args = parser.parse_args(argv)
    use_clock(args.clock)
    if args.tiny:
        args.bars, args.m1_bars, args.tick_bars, args.repeats = 500, 50, 20, 1
    print(
        f"{'model':8} {'H1 bars':>9} {'1 symbol':>16} {'3 symbols':>16} {'ratio':>7}   (loop per symbol-bar)"
    )
    sizes = {"open": args.bars, "ohlc1m": args.m1_bars, "ticks": args.tick_bars}
    for model in args.models.split(","):
        bars = sizes[model]
        frames, fine = _frames(bars, model, args.ticks_per_minute)
        alone = [_time(frames, (s,), fine, model, args.repeats) for s in SYMBOLS]
        one = sum(seconds for seconds, _ in alone)
        three, trades = _time(frames, SYMBOLS, fine, model, args.repeats)
        per_one, per_three = one / (3 * bars), three / (3 * bars)
        print(
            f"{model:8} {bars:>9,} {per_one * 1e6:>13.2f} us {per_three * 1e6:>13.2f} us "
            f"{per_three / per_one:>6.2f}x   ({trades} trades on 3 symbols, "
            f"{sum(n for _, n in alone)} alone)",
            flush=True,
        )


if __name__ == "__main__":
    main()
