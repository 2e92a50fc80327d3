"""Swap oracle: random market orders on two symbols whose bars go missing and open late around the server's
midnights, every trade's swap checked against the nights it was held, and the screened walks' tables against
those of the walks that work every minute or tick.

Nothing of the default suite: a tool for the rollover's rules where ``tools/diff_harness.py`` (whose ticks it
starts from) has no such bars. GBPUSD (the main symbol) and EURUSD, both with their profit in dollars, on a
hedging account with swaps in points (-40 long, -35 short): every position is its own trade, closed whole,
so its swap is exactly ``rate x lots x`` the nights from its entry's server day to its exit's (MetaTrader
charges a night to the positions open at that midnight only; triple on Wednesday, none at weekends). Around
most server midnights each symbol's ticks stop and resume at random (a bar's first minute after midnight,
a midnight inside a bar), and on most days the midnight's bar is folded into the bar before on both symbols
(the account's bar runs over midnight), so the EA decides after one symbol's midnight with the other's
minutes before the decision not walked.

    PYTHONPATH=$PWD python tools/swap_nights.py --seeds 0:20 --utc-offset 2 [--open 0.15]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pandas as pd

SYMBOLS = ("GBPUSD", "EURUSD")
RATES = {"buy": -40.0, "sell": -35.0}
HOUR = pd.Timedelta(hours=1)


def ticks_of(seed: int, utc_offset: int) -> dict:
    """Each symbol's ticks (``diff_harness._ticks``), a random span around most server midnights left out."""
    from tools.diff_harness import HOURS, T0, _ticks

    rng = np.random.default_rng(1000 + seed)
    start = pd.Timestamp(T0, tz="UTC").normalize() - utc_offset * HOUR
    out = {}
    for i, s in enumerate(SYMBOLS):
        ticks = _ticks(s, seed * 10 + i)
        ns = ticks.index.as_unit("ns").asi8
        keep = np.ones(len(ticks), dtype=bool)
        for day in range(HOURS // 24 + 2):
            if rng.random() < 0.7:
                midnight = (start + pd.Timedelta(days=day)).value
                a = midnight - int(rng.integers(0, 90)) * 60 * 10**9
                b = midnight + int(rng.integers(0, 90)) * 60 * 10**9
                keep &= (ns < a) | (ns >= b)
        out[s] = ticks[keep]
    return out


def frames_of(ticks: dict, seed: int, utc_offset: int) -> dict:
    """H1 bars of ``ticks`` on a UTC+``utc_offset`` server, the midnight's bar folded into the bar before on
    most days (on every symbol), or stamped an hour early where that bar is missing (its first minute after
    midnight)."""
    from datafeeds import make_frame
    from datafeeds.candles import meta_of
    from datafeeds.clock import BrokerClock
    from datafeeds.ticks import bars_from_ticks
    from tools.diff_harness import HOURS, T0

    rng = np.random.default_rng(2000 + seed)
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    start = pd.Timestamp(T0, tz="UTC").normalize() - utc_offset * HOUR
    for day in range(HOURS // 24 + 2):
        if rng.random() >= 0.6:
            continue
        midnight = start + pd.Timedelta(days=day)
        before = midnight - HOUR
        for s, f in frames.items():
            if midnight not in f.index:
                continue
            if before in f.index:
                f.loc[before, "high"] = max(f.loc[before, "high"], f.loc[midnight, "high"])
                f.loc[before, "low"] = min(f.loc[before, "low"], f.loc[midnight, "low"])
                f.loc[before, "close"] = f.loc[midnight, "close"]
                frames[s] = f.drop(midnight)
            else:
                frames[s] = f.rename(index={midnight: before})
    for s, f in frames.items():
        meta = replace(meta_of(f), clock=BrokerClock(float(utc_offset)))
        frames[s] = make_frame({c: f[c].to_numpy() for c in f.columns}, f.index, meta)
    return frames


def random_ea(seed: int, open_p: float) -> type:
    """Market orders of 0.01 to 0.3 lots with or without SL/TP on either symbol; whole closes."""
    from strategies.base import ExpertAdvisor

    class RandomEA(ExpertAdvisor):
        symbols = SYMBOLS

        def on_init(self):
            self.r = np.random.default_rng(seed)

        def on_bar(self):
            r = self.r
            for s in SYMBOLS:
                x = r.random()
                if x < open_p:
                    kw = {}
                    if r.random() < 0.5:
                        kw["sl_points"] = float(r.integers(30, 900))
                    if r.random() < 0.5:
                        kw["tp_points"] = float(r.integers(30, 900))
                    side = self.buy if r.random() < 0.5 else self.sell
                    side(float(r.choice([0.01, 0.1, 0.3])), symbol=s, **kw)
                elif x < open_p + 0.4 and self.positions(symbol=s):
                    ps = self.positions(symbol=s)
                    self.close(ps[int(r.integers(0, len(ps)))].ticket)

    return RandomEA


def run(frames: dict, fine: dict, model: str, ea: type, every: bool):
    """One run; ``every``: the walk works every minute or tick (its stop-out screen never rules one out)."""
    import backtests.merged as merged
    import backtests.merged_ticks as merged_ticks
    from backtests import AccountConfig, Backtest
    from datafeeds.symbols import BUILTIN

    walk = merged_ticks if model == "ticks" else merged
    screen = walk._stop_out_possible
    if every:
        walk._stop_out_possible = lambda *args: True
    try:
        account = AccountConfig(deposit=100_000.0, leverage=100.0, stop_out_level=50.0, hedging=True)
        specs = {s: replace(BUILTIN[s], swap_long=RATES["buy"], swap_short=RATES["sell"]) for s in SYMBOLS}
        return Backtest(frames, ea, model=model, account=account, forward=None, specs=specs, **fine).run()
    finally:
        walk._stop_out_possible = screen


def owed(trade, utc_offset: int) -> float:
    """The trade's swap by MetaTrader's rule: its rate for each night from its entry's day to its exit's."""
    from backtests import AccountConfig
    from backtests.broker.swap import SwapModel

    def day(ts: pd.Timestamp) -> int:
        return int((ts.value // 10**9 + utc_offset * 3600) // 86_400)

    nights = SwapModel(AccountConfig(), 0.00001).nights(day(trade.entry_time), day(trade.exit_time))
    return RATES[str(trade.type)] * nights * trade.lots


def main() -> int:
    from datafeeds.ticks import bars_from_ticks
    from tools.diff_harness import digest

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0:10")
    p.add_argument("--utc-offset", type=int, default=2)
    p.add_argument("--open", type=float, default=0.15, help="chance of an order per symbol and bar")
    args = p.parse_args()
    lo, hi = (int(x) for x in args.seeds.split(":"))
    trades = wrong = differ = 0
    for seed in range(lo, hi):
        ticks = ticks_of(seed, args.utc_offset)
        frames = frames_of(ticks, seed, args.utc_offset)
        for model in ("ohlc1m", "ticks"):
            prices = ticks if model == "ticks" else {s: bars_from_ticks(t, "M1") for s, t in ticks.items()}
            fine = {"ticks" if model == "ticks" else "m1": prices}
            ea = random_ea(seed, args.open)
            screened, every = run(frames, fine, model, ea, False), run(frames, fine, model, ea, True)
            a, b = digest(screened), digest(every)
            if a != b:
                differ += 1
                print(f"seed {seed} {model}: screened != every walk in {[k for k in a if a[k] != b[k]]}")
            for tr in screened.trades.itertuples():
                trades += 1
                want = owed(tr, args.utc_offset)
                if abs(tr.swap - want) > 0.011 * max(1.0, abs(want)):
                    wrong += 1
                    print(f"seed {seed} {model}: {tr.symbol} {tr.type} {tr.lots} {tr.entry_time} -> "
                          f"{tr.exit_time} ({tr.exit_reason}): swap {tr.swap}, owed {want:.2f}")  # fmt: skip
    print(f"trades={trades} wrong_swaps={wrong} walks_differ={differ}")
    return 1 if wrong or differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
