"""Differential harness: the same random EAs on the same markets under two code trees, every figure compared.

Nothing of the default suite: a tool for checking that a change which must not move money moves none.

    python tools/diff_harness.py run OUT_A --tree /path/to/tree_a [--seeds 0:20] [--models open,ohlc1m,ticks]
    python tools/diff_harness.py run OUT_B --tree /path/to/tree_b ...
    python tools/diff_harness.py compare OUT_A OUT_B

``run`` re-executes itself with ``PYTHONPATH`` set to the tree, so the package imported is that tree's. Each
case is one random EA (market orders, netting reversals, pending orders of all six types with and without
expiry, SL/TP, modifying positions and orders, cancelling, partial closes, close-by on hedging accounts, two
magic numbers) on one symbol (the single-symbol path and the several-symbol path with one symbol) or three
symbols (EURGBP, USDJPY, EURUSD on a dollar account: profit and margin converted through GBPUSD, USDJPY,
EURUSD), on hedging and netting accounts, with swaps over the rollovers of a week (a Wednesday's triple
swap, a weekend), a small deposit that meets margin calls and stop-outs, and a restricted trade mode, in
open prices, 1 minute OHLC and real ticks. Every table (trades, orders, deals, rejected), curve (balance,
equity, curves, equity path, charts) and statistic is written as exact text (floats by ``repr``) and
compared byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

T0 = "2024-01-01 20:00"  # a Monday evening: the run crosses a Wednesday's triple swap and a weekend
HOURS = int(os.environ.get("DIFF_HOURS", "150"))  # a longer history: DIFF_HOURS=3000
BASE = {"EURUSD": 1.10, "GBPUSD": 1.30, "EURGBP": 0.85, "USDJPY": 148.0}
DIGITS = {"EURUSD": 5, "GBPUSD": 5, "EURGBP": 5, "USDJPY": 3}
THREE = ("EURGBP", "USDJPY", "EURUSD")
LOADED = ("EURGBP", "USDJPY", "EURUSD", "GBPUSD")  # GBPUSD converts EURGBP's pounds
# (deposit, hedging, swaps, restricted trade mode, lot scale, leverage): a rich account, a small one that
# meets margin calls and stop-outs, a netting one with swaps and a restricted symbol, a small leveraged one
ACCOUNTS = (
    (100_000.0, True, True, False, 1.0, 100.0),
    (2_000.0, True, True, False, 1.0, 100.0),
    (1_500.0, False, True, True, 1.0, 100.0),
    (800.0, False, False, False, 1.0, 500.0),
)


def _ticks(symbol: str, seed: int):
    import numpy as np
    import pandas as pd

    from datafeeds.ticks import TickMeta, make_ticks

    rng = np.random.default_rng(seed)
    digits = DIGITS[symbol]
    pt = 10.0**-digits
    density = int(rng.integers(8, 40))
    n = HOURS * density
    secs = np.sort(rng.choice(HOURS * 3600, size=n, replace=False))
    if symbol in ("EURGBP", "USDJPY") and rng.random() < 0.5:  # silent hours: bars missing on this symbol
        keep = (secs // 3600) % 7 != 3
        secs = secs[keep]
        n = len(secs)
    secs[0] = 0
    vol = 0.0004 * (3.0 if rng.random() < 0.3 else 1.0)
    steps = rng.normal(0, vol * BASE[symbol], n)
    if rng.random() < 0.5:  # one violent move: stop-outs for the small accounts
        k = int(rng.integers(n // 4, 3 * n // 4))
        steps[k : k + 40] += rng.choice([-1, 1]) * 0.0006 * BASE[symbol]
    bid = np.round((BASE[symbol] + np.cumsum(steps)) / pt) * pt
    spread = rng.integers(0, 6, n) * pt
    t0 = pd.Timestamp(T0, tz="UTC").value
    ns = (t0 + secs.astype(np.int64) * 10**9).astype(np.int64)
    meta = TickMeta(symbol, digits, f"{symbol}.csv")
    return make_ticks(ns, np.round(bid, digits), np.round(bid + spread, digits), meta)


def _ea(symbols: tuple[str, ...], seed: int, lot: float):
    import numpy as np
    import pandas as pd

    from strategies.base import ExpertAdvisor

    class RandomEA(ExpertAdvisor):
        """Random requests of every kind, each symbol each bar, from its own generator."""

        def on_init(self):
            self.rng = np.random.default_rng(seed)

        def on_bar(self):
            r = self.rng
            for s in symbols:
                pt = 10.0 ** -DIGITS[s]
                bid, ask = self.bid_of(s), self.ask_of(s)
                if not np.isfinite(bid):
                    r.random()
                    continue
                x = r.random()
                magic = int(r.integers(1, 3))
                lots = float(r.choice([0.1, 0.5, 1.0, 2.0])) * lot
                if x < 0.12:
                    side = self.buy if r.random() < 0.5 else self.sell
                    kw = {}
                    if r.random() < 0.6:
                        kw["sl_points"] = float(r.integers(30, 900))
                    if r.random() < 0.6:
                        kw["tp_points"] = float(r.integers(30, 900))
                    side(lots, symbol=s, magic=magic, **kw)
                elif x < 0.16:  # a reversal on netting, a second leg on hedging
                    net = self.position_of(s)
                    if net:
                        (self.sell if net > 0 else self.buy)(round(abs(net) * 2, 2), symbol=s, magic=magic)
                elif x < 0.30:
                    k = int(r.integers(0, 6))
                    d = float(r.integers(5, 500)) * pt
                    kw = {"symbol": s, "magic": magic}
                    if r.random() < 0.5:
                        kw["expiration"] = self.time_current + pd.Timedelta(minutes=int(r.integers(5, 600)))
                    below = k in (0, 3, 5)  # buy limit, sell stop, sell stop-limit sit below
                    if k == 0:
                        price = round(ask - d, DIGITS[s])
                    elif below:
                        price = round(bid - d, DIGITS[s])
                    else:
                        price = round(bid + d, DIGITS[s]) if k == 1 else round(ask + d, DIGITS[s])
                    if r.random() < 0.5:
                        off = float(r.integers(40, 700)) * pt
                        kw["sl"] = round(price - off if k in (0, 2, 4) else price + off, DIGITS[s])
                    if r.random() < 0.4:
                        off = float(r.integers(40, 700)) * pt
                        kw["tp"] = round(price + off if k in (0, 2, 4) else price - off, DIGITS[s])
                    if k == 0:
                        self.buy_limit(lots, price, **kw)
                    elif k == 1:
                        self.sell_limit(lots, price, **kw)
                    elif k == 2:
                        self.buy_stop(lots, price, **kw)
                    elif k == 3:
                        self.sell_stop(lots, price, **kw)
                    elif k == 4:
                        gap = float(r.integers(1, 80)) * pt
                        self.buy_stop_limit(lots, price, round(price - gap, DIGITS[s]), **kw)
                    else:
                        gap = float(r.integers(1, 80)) * pt
                        self.sell_stop_limit(lots, price, round(price + gap, DIGITS[s]), **kw)
                elif x < 0.35:
                    self.close(magic=magic, symbol=s)
                elif x < 0.36:
                    self.close()
                elif x < 0.42 and self.positions(symbol=s):
                    p = self.positions(symbol=s)[int(r.integers(0, len(self.positions(symbol=s))))]
                    near = float(r.integers(3, 400)) * pt
                    lvl = round(bid - near, DIGITS[s]) if p.side > 0 else round(ask + near, DIGITS[s])
                    if r.random() < 0.5:
                        self.modify(p.ticket, sl=lvl)
                    else:
                        far = round(bid + near if p.side > 0 else ask - near, DIGITS[s])
                        self.modify(p.ticket, tp=far)
                elif x < 0.47 and self.positions(symbol=s):
                    p = self.positions(symbol=s)[0]
                    part = round(p.lots * float(r.choice([0.3, 0.5, 1.5])), 2)
                    self.close(p.ticket, lots=part)
                elif x < 0.50 and self.orders(symbol=s):
                    o = self.orders(symbol=s)[0]
                    if r.random() < 0.5:
                        self.cancel(o.ticket)
                    else:
                        moved = round(o.price + float(r.integers(-50, 50)) * pt, DIGITS[s])
                        self.modify_order(o.ticket, price=moved)
                elif x < 0.53:
                    ps = self.positions(symbol=s)
                    longs = [p for p in ps if p.side > 0]
                    shorts = [p for p in ps if p.side < 0]
                    if longs and shorts:
                        self.close_by(longs[0].ticket, shorts[0].ticket)

    RandomEA.symbols = symbols
    RandomEA.__name__ = RandomEA.__qualname__ = "RandomEA"
    return RandomEA


def case(model: str, seed: int, n_symbols: int, account_index: int, single_path: bool):
    """One run: the Result."""
    from dataclasses import replace

    from backtests import AccountConfig, Backtest
    from datafeeds.symbols import BUILTIN
    from datafeeds.ticks import bars_from_ticks

    deposit, hedging, swaps, restricted, lot, leverage = ACCOUNTS[account_index]
    symbols = ("EURUSD",) if n_symbols == 1 else THREE
    loaded = symbols if n_symbols == 1 else LOADED
    ticks = {s: _ticks(s, seed * 10 + i) for i, s in enumerate(loaded)}
    frames = {s: bars_from_ticks(t, "H1") for s, t in ticks.items()}
    fine = {}
    if model == "ticks":
        fine["ticks"] = ticks
    elif model == "ohlc1m":
        fine["m1"] = {s: bars_from_ticks(t, "M1") for s, t in ticks.items()}
    ea = _ea(symbols, seed, lot)
    if n_symbols == 1 and single_path:
        account = AccountConfig(deposit=deposit, leverage=leverage, stop_out_level=50.0, hedging=hedging,
                                swap_long=-40.0 if swaps else 0.0, swap_short=-35.0 if swaps else 0.0,
                                commission=3.5)  # fmt: skip
        fine = {k: v["EURUSD"] for k, v in fine.items()}
        return Backtest(frames["EURUSD"], ea, model=model, account=account, forward=None, **fine).run()
    account = AccountConfig(deposit=deposit, leverage=leverage, stop_out_level=50.0, hedging=hedging,
                            commission=3.5)  # fmt: skip
    specs = {}
    for s in loaded:
        spec = BUILTIN[s]
        if swaps:
            spec = replace(spec, swap_long=-40.0, swap_short=25.0 if s == "USDJPY" else -35.0)
        specs[s] = spec
    if restricted and n_symbols == 3:
        modes = ("long_only", "short_only", "close_only")
        specs["EURGBP"] = replace(specs["EURGBP"], trade_mode=modes[seed % 3])
    return Backtest(frames, ea, model=model, account=account, forward=None, specs=specs, **fine).run()


def _frame_text(frame) -> str:
    if frame is None:
        return "None"
    return frame.to_csv()  # floats by repr: exact


def digest(result) -> dict:
    """Every figure of a run as exact text: tables, curves, statistics, the report's JSON."""
    import numpy as np
    import pandas as pd

    from backtests.report import report_dict, trades_csv

    out: dict = {}
    digits = int(result.data.get("digits") or 5)
    for name in ("trades", "orders", "deals"):
        table = getattr(result, name)
        out[name] = _frame_text(table)
        out[name + ".csv"] = trades_csv(table, digits).decode()
    out["rejected"] = pd.DataFrame(result.rejected).to_csv()
    out["balance"] = repr(np.asarray(result.balance).tolist())
    out["time"] = repr([str(t) for t in result.time])
    out["equity"] = _frame_text(result.equity)
    out["curves"] = _frame_text(result.curves)
    out["equity_path"] = _frame_text(result.equity_path)
    out["stats"] = repr(sorted((k, repr(v)) for k, v in dict(result.stats).items()))
    doc = report_dict(result, env={"fixed": True})
    for key in ("created", "timings", "environment"):
        doc.pop(key, None)
    out["report.json"] = json.dumps(doc, sort_keys=True, default=repr)
    out["chart_data"] = json.dumps(result.chart_data, sort_keys=True, default=repr)
    out["symbol_charts"] = json.dumps(result.symbol_charts, sort_keys=True, default=repr)
    out["complete"] = repr((result.complete, result.interrupted))
    return out


def cases(seeds: range, models: list[str]):
    for model in models:
        for seed in seeds:
            for n_symbols in (1, 3):
                for account_index in range(len(ACCOUNTS)):
                    paths = (True, False) if n_symbols == 1 else (False,)
                    for single_path in paths:
                        yield model, seed, n_symbols, account_index, single_path


def unscreen() -> list[str]:
    """Turn off every screen that lets a replay skip checks (quiet bars, the stop-out's bounds, quiet
    minutes and ticks), where the tree has it: a run then checks everything, and must give the same figures
    as the screened run of the same tree. Returns what was turned off."""
    import importlib

    done = []
    for module, owner, name, value in (
        ("backtests.broker.calm", "Calm", "holds", lambda self, t: False),
        ("backtests.broker.calm", "Calm", "span", None),
        ("backtests.broker.account", "Account", "ruled_out", lambda self, t: False),
        ("backtests.broker.screen", "Screen", "ruled_out", lambda self, t: False),
        ("backtests.merged", None, "_stop_out_possible", lambda *a, **k: True),
        ("backtests.merged_ticks", None, "_stop_out_possible", lambda *a, **k: True),
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        target = getattr(mod, owner, None) if owner else mod
        if target is None or not hasattr(target, name):
            continue
        if name == "span":
            span = mod.Span

            def value(self, t, _span=span):
                return _span(t, self.state())

        setattr(target, name, value)
        done.append(f"{module}.{owner + '.' if owner else ''}{name}")
    return done


def run_here(out: Path, seeds: range, models: list[str]) -> None:
    import hashlib

    out.mkdir(parents=True, exist_ok=True)
    for model, seed, n_symbols, account_index, single_path in cases(seeds, models):
        name = f"{model}_s{seed}_n{n_symbols}_a{account_index}_{'single' if single_path else 'multi'}"
        try:
            d = digest(case(model, seed, n_symbols, account_index, single_path))
        except Exception as e:  # a refusal or a crash is a figure too: it must be the same in both trees
            d = {"error": f"{type(e).__name__}: {e}"[:2000]}
        text = json.dumps(d, sort_keys=True)
        (out / f"{name}.json").write_text(text)
        n_trades = d.get("trades", "").count("\n") - 1 if "trades" in d else -1
        stopped = d.get("trades", "").count("stop out")
        print(name, hashlib.md5(text.encode()).hexdigest()[:8], f"trades={n_trades} stopouts={stopped}",
              d.get("error", "")[:120], flush=True)  # fmt: skip


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.json")} | {p.name for p in b.glob("*.json")})
    same = differ = missing = 0
    for name in names:
        pa, pb = a / name, b / name
        if not (pa.exists() and pb.exists()):
            missing += 1
            print("MISSING", name)
            continue
        da, db = json.loads(pa.read_text()), json.loads(pb.read_text())
        if da == db:
            same += 1
            continue
        differ += 1
        keys = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
        print("DIFF", name, keys)
        for k in keys[:3]:
            la, lb = str(da.get(k)).splitlines(), str(db.get(k)).splitlines()
            for i, (x, y) in enumerate(zip(la, lb, strict=False)):
                if x != y:
                    print(f"  {k} line {i}:\n    A {x[:300]}\n    B {y[:300]}")
                    break
            else:
                print(f"  {k}: lengths {len(la)} vs {len(lb)}")
    print(f"same={same} differ={differ} missing={missing}")
    return 1 if differ or missing else 0


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--tree", required=True)
    r.add_argument("--seeds", default="0:5")
    r.add_argument("--models", default="open,ohlc1m,ticks")
    r.add_argument("--unscreened", action="store_true", help="turn off the replay's screens (see unscreen)")
    r.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args()
    if args.cmd == "compare":
        return compare(Path(args.a), Path(args.b))
    lo, hi = (int(x) for x in args.seeds.split(":"))
    if not args.inside:
        env = {**os.environ, "PYTHONPATH": str(Path(args.tree).resolve()), "PYTHONHASHSEED": "0"}
        cmd = [sys.executable, "-u", __file__, "run", args.out, "--tree", args.tree,
               "--seeds", args.seeds, "--models", args.models, "--inside"]  # fmt: skip
        cmd += ["--unscreened"] if args.unscreened else []
        return subprocess.call(cmd, env=env, cwd=args.tree)
    import backtests

    assert Path(backtests.__file__).resolve().is_relative_to(Path(args.tree).resolve()), backtests.__file__
    if args.unscreened:
        print("unscreened:", ", ".join(unscreen()), flush=True)
    run_here(Path(args.out), range(lo, hi), args.models.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
