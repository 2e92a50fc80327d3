"""Several symbols on one account: the cost of a symbol-bar with three symbols against one symbol's.

The same EA (each symbol on its own: long after an up bar, short after a down bar, 0.1 lots, a stop-loss and
take-profit of 200/300 points, on a deposit no loss exhausts) runs on three synthetic symbols (EURUSD,
GBPUSD, AUDUSD, one seed each) and on EURUSD alone, in open prices and in "1 minute OHLC". Each ``run()``'s
bar loop (``replay_s``) is timed after one untimed warm-up, best of ``--repeats``; the cost per symbol-bar is
the loop time over symbols x bars. The target: three symbols' cost per symbol-bar within 1.2x of one
symbol's.

    python -m benchmarks.multi_symbol                        # 100,000 H1 bars (open), 10,000 (ohlc1m)
    python -m benchmarks.multi_symbol --bars 20000 --m1-bars 2000 --repeats 1
"""

from __future__ import annotations

import argparse

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


def _time(frames, symbols, m1, repeats: int) -> tuple[float, int]:
    from backtests import AccountConfig, Backtest

    ea = _ea(symbols)
    one = len(symbols) == 1
    data = frames[symbols[0]] if one else {s: frames[s] for s in symbols}
    minutes = None if m1 is None else (m1[symbols[0]] if one else {s: m1[s] for s in symbols})
    model = "open" if m1 is None else "ohlc1m"
    account = AccountConfig(deposit=1e9)  # never out of money: every run trades the whole history
    bt = Backtest(data, ea, forward=None, model=model, m1=minutes, account=account)
    bt.run()
    best, trades = float("inf"), 0
    for _ in range(repeats):
        result = bt.run()
        best, trades = min(best, result.timings["replay_s"]), len(result.trades)
    return best, trades


def _frames(bars: int, minutes: bool):
    from datafeeds import resample, synthetic_candles

    if not minutes:
        return {s: synthetic_candles(s, "H1", bars, seed=i + 1) for i, s in enumerate(SYMBOLS)}, None
    m1 = {s: synthetic_candles(s, "M1", bars * 60, seed=i + 1) for i, s in enumerate(SYMBOLS)}
    return {s: resample(df, "H1") for s, df in m1.items()}, m1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=100_000, help="H1 bars per symbol, open prices")
    parser.add_argument("--m1-bars", type=int, default=10_000, help="H1 bars per symbol, ohlc1m (x60 M1)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = parser.parse_args(argv)
    if args.tiny:
        args.bars, args.m1_bars, args.repeats = 500, 50, 1
    print(
        f"{'model':8} {'H1 bars':>9} {'1 symbol':>16} {'3 symbols':>16} {'ratio':>7}   (loop per symbol-bar)"
    )
    for model, bars in (("open", args.bars), ("ohlc1m", args.m1_bars)):
        frames, m1 = _frames(bars, model == "ohlc1m")
        one, _ = _time(frames, SYMBOLS[:1], m1, args.repeats)
        three, trades = _time(frames, SYMBOLS, m1, args.repeats)
        per_one, per_three = one / bars, three / (3 * bars)
        print(
            f"{model:8} {bars:>9,} {per_one * 1e6:>13.2f} us {per_three * 1e6:>13.2f} us "
            f"{per_three / per_one:>6.2f}x   ({trades} trades on 3 symbols)"
        )


if __name__ == "__main__":
    main()
