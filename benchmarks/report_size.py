"""Size of report.html for a long run: a million bars and tens of thousands of trades must stay a page a
browser opens in seconds (the candles are merged into at most 5,000, every trade keeps its markers).

Runs the SMA-crossover EA over synthetic H1 bars (``--fast``/``--slow`` set how often it trades), writes
the report, and prints the bars, trades, the size of report.html and report.json, and the seconds each
step took; with ``--browser`` also the seconds Chromium takes to open the page and draw its plots.

    python -m benchmarks.report_size                      # 1,000,000 bars
    python -m benchmarks.report_size --bars 200000 --browser
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from backtests import AccountConfig, Backtest
from backtests.report import write_report
from benchmarks._machine import Contestant, header
from datafeeds import synthetic_candles
from strategies import SmaCrossEA


def browser_seconds(page: Path) -> float:
    """Seconds from opening the file in headless Chromium until every Bokeh document is built."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=args, offline=True
        )
        tab = ctx.new_page()
        t0 = time.perf_counter()
        tab.goto(page.resolve().as_uri(), timeout=120_000)
        tab.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 1", timeout=120_000)
        seconds = time.perf_counter() - t0
        ctx.close()
    return seconds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.report_size", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--bars", type=int, default=1_000_000)
    ap.add_argument("--fast", type=int, default=10)
    ap.add_argument("--slow", type=int, default=22)
    ap.add_argument("--browser", action="store_true", help="also time the page in headless Chromium")
    ap.add_argument("--tiny", action="store_true", help="a toy size: checks that the benchmark runs")
    args = ap.parse_args(argv)
    if args.tiny:
        args.bars, args.browser = 3000, False
    header([Contestant("neuronet backtest and report", 1, peer=False)])
    df = synthetic_candles(bars=args.bars, seed=1)
    t0 = time.perf_counter()
    account = AccountConfig(deposit=1e9)  # never blown: the EA trades to the last bar
    result = Backtest(df, SmaCrossEA, account=account).run(fast=args.fast, slow=args.slow, lots=0.1)
    run_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        page = write_report(result, Path(tmp) / "r")
        write_s = time.perf_counter() - t0
        size = page.stat().st_size
        json_size = (page.parent / "report.json").stat().st_size
        print(
            f"bars {len(df):,}, trades {len(result.trades):,}, deals {len(result.deals):,}: "
            f"report.html {size / 1e6:.2f} MB, report.json {json_size / 1e6:.1f} MB; "
            f"backtest {run_s:.1f} s, report written in {write_s:.1f} s"
        )
        if args.browser:
            print(f"Chromium opened and built the page in {browser_seconds(page):.1f} s")


if __name__ == "__main__":
    main()
