"""Candle data at scale: synthetic generation, validation, resampling, MetaTrader CSV and the store.

Each step runs on the same synthetic M1 series (1,000,000 bars by default); the best of ``--repeats`` is
shown, in seconds and in bars per second.

    python -m benchmarks.datafeeds                 # 1M bars
    python -m benchmarks.datafeeds --bars 200000 --repeats 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks._machine import header, python_contestant


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.datafeeds")
    parser.add_argument("--bars", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = parser.parse_args(argv)
    if args.tiny:
        args.bars, args.repeats = 2_000, 1

    from datafeeds import (
        BrokerClock,
        CandleStore,
        read_mt5_csv,
        resample,
        synthetic_candles,
        validate,
        write_mt5_csv,
    )

    header([python_contestant("neuronet datafeeds", False)])
    n, r = args.bars, args.repeats
    df = synthetic_candles("EURUSD", "M1", n, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "EURUSD_M1.csv"
        store = CandleStore(tmp)
        steps = [
            ("synthetic_candles M1", lambda: synthetic_candles("EURUSD", "M1", n, seed=1)),
            ("validate", lambda: validate(df)),
            ("resample M1 -> H1", lambda: resample(df, "H1")),
            ("resample M1 -> D1 at UTC+2/us", lambda: resample(df, "D1", clock=BrokerClock(2, "us"))),
            ("write_mt5_csv", lambda: write_mt5_csv(df, csv_path)),
            ("read_mt5_csv (parse + validate)", lambda: read_mt5_csv(csv_path)),
            ("CandleStore.save (.npz, fsync)", lambda: store.save("bench", df)),
            ("CandleStore.load", lambda: store.load("bench", "EURUSD", "M1")),
        ]
        print(f"{n} M1 bars, best of {r}")
        for name, fn in steps:
            seconds = _best(fn, r)
            print(f"  {name:<34} {seconds:8.3f} s  {n / seconds:14,.0f} bars/s")


if __name__ == "__main__":
    main()
