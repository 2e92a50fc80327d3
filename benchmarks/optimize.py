"""Optimisation throughput: passes per second of a 200-pass SMA grid here vs backtesting.py's ``optimize``.

Both run from this process on the embedded 5,000-bar EURUSD H1 sample, the same SMA-crossover rules and
the same 200 (fast, slow) points, on the same number of processes: ``--workers`` (default: the CPUs this
process was given). backtesting.py's ``Backtest.optimize`` gets a forked pool of that size (through
``backtesting.Pool``, its documented hook: by itself it starts one process per CPU of the host, more than
were given on a pinned run); ours is ``backtests.optimize.optimize`` with that many local workers, every
pass recorded in a SQLite study. Ours is also timed with one worker.

"End to end" is the whole ``optimize`` call: workers started, the study store opened, every pass run and
recorded, the results table and the robustness statistics of the search (Deflated Sharpe Ratio, PBO, SPA),
which backtesting.py does not compute; their share is shown. Contestants take turns round by round
(``--repeats`` rounds) and the spread over rounds is printed, with the CPU seconds each spent per pass (all
its processes), which a shared machine's load changes less than the wall time, and the CPU of one pass of
each run in this process, no pool (``pass_cpu``), steadier still. Then a paper estimate for
10 and 100 workers from the measured per-pass cost, the per-task round trip and the client's per-pass
cost (sampler proposal + its share of a batched store write):

    passes/s(W) = min(W / (pass_s + task_overhead_s / batch), 1 / client_s)

    taskset -c 0,1 python -m benchmarks.optimize [--repeats 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # backtesting.py's progress bars would drown the table

from benchmarks._machine import Contestant, cpus_given, header
from benchmarks._peer_sma import PeerSmaCross  # after the variable backtesting.py reads

FAST = list(range(2, 42, 2))  # 20 values
SLOW = list(range(50, 150, 10))  # 10 values: 200 passes, all with fast < slow
BATCH = 32  # the engine's largest batch, reached by large grids


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the pools' workers, once shut)."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def size_peer_pool(processes: int) -> None:
    """backtesting.py's pool with ``processes`` forked processes (its own choice: one per host CPU)."""
    import backtesting

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)

    def pool(_processes=None, initializer=None, initargs=()):
        return context.Pool(processes, initializer, initargs)

    backtesting.Pool = pool


def time_peer(df, fast: list[int], slow: list[int]) -> tuple[float, float]:
    """Wall and CPU seconds of backtesting.py's ``optimize`` over the grid."""
    from backtesting import Backtest

    data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    data.index = data.index.tz_localize(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = Backtest(data, PeerSmaCross, cash=1e9)
        c0, t0 = _cpu(), time.perf_counter()
        _, heat = bt.optimize(fast=fast, slow=slow, maximize="Equity Final [$]", return_heatmap=True)
        elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
    assert len(heat) == len(fast) * len(slow)
    return elapsed, cpu


def time_ours(df, fast: list[int], slow: list[int], workers: int, folder: Path) -> dict:
    """Wall and CPU seconds of ``optimize`` end to end (the CPU of all its processes, and of this one: the
    client's proposals, store writes and statistics), the share of its robustness statistics, and the
    mean worker-side seconds of a pass."""
    from backtests.optimize import api
    from strategies import SmaCrossEA

    spent = {"robustness_s": 0.0}
    measured = api.robustness_of

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return measured(*args, **kwargs)
        finally:
            spent["robustness_s"] += time.perf_counter() - t

    api.robustness_of = timed
    try:
        c0, p0, t0 = _cpu(), time.process_time(), time.perf_counter()
        table = api.optimize(
            df, SmaCrossEA, {"fast": fast, "slow": slow}, workers=workers,
            store_path=str(folder / f"w{workers}-{time.time_ns()}.db"),
        )  # fmt: skip
        elapsed, cpu, client = time.perf_counter() - t0, _cpu() - c0, time.process_time() - p0
    finally:
        api.robustness_of = measured
    assert table.attrs["ran"] == len(table) == len(fast) * len(slow)
    pass_s = float(table["seconds"].mean())
    return {"total_s": elapsed, "cpu_s": cpu, "client_s": client, "pass_s": pass_s, **spent}


def pass_cpu(df, points: list[tuple[int, int]], rounds: int = 3) -> tuple[float, float]:
    """CPU seconds of one pass in this process, no pool, the lowest of ``rounds`` rounds over ``points``:
    backtesting.py's ``Backtest.run`` (what each process of its ``optimize`` runs per pass) and ours
    (``backtests.optimize.passes``: the window's backtest, the pass and the figures the study records).
    The steadiest figure on a shared machine: no scheduling between processes, one core's work. Ours starts
    each round with no kept indicator proof (``backtests.indicator_cache``): the round proves its lines as
    a worker of the grid would the first time it meets them (the sampled points share one slow period and
    no fast one, so about half are proved; in the whole grid a worker proves 30 lines of 400)."""
    from backtesting import Backtest

    from backtests.indicator_cache import PROVEN
    from backtests.optimize.criteria import get_criterion
    from backtests.optimize.passes import Job, Window, make_backtest, run_one, summarize
    from strategies import SmaCrossEA

    data = df.rename(columns=str.capitalize)[["Open", "High", "Low", "Close"]]
    data.index = data.index.tz_localize(None)
    job = Job(SmaCrossEA, get_criterion("balance"))
    ours = make_backtest(df, job, Window(0, len(df)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = Backtest(data, PeerSmaCross, cash=1e9)

        def run_peer(fast: int, slow: int) -> None:
            peer.run(fast=fast, slow=slow)

        def run_ours(fast: int, slow: int) -> None:
            summarize(run_one(ours, job, {"fast": fast, "slow": slow}), job)

        best = {run_peer: float("inf"), run_ours: float("inf")}
        for _ in range(rounds):
            for fn in best:  # contestants take turns
                PROVEN.clear()
                fn(*points[0])  # warm
                t0 = time.process_time()
                for fast, slow in points:
                    fn(fast, slow)
                best[fn] = min(best[fn], (time.process_time() - t0) / len(points))
    return best[run_peer], best[run_ours]


def _noop(shared, i):
    return i


def task_overhead(workers: int) -> float:
    """Round-trip seconds per task of a no-op task streamed as the optimiser streams batches, per worker."""
    from backtests.optimize import Engine

    n = 200
    with Engine(workers) as engine:
        shared = engine.share(0)
        t0 = time.perf_counter()
        done = sum(1 for _ in engine.stream(_noop, shared, ((i, (i,)) for i in range(n))))
        elapsed = time.perf_counter() - t0
    assert done == n
    return elapsed / n * workers


def client_cost(folder: Path, n: int = 256) -> float:
    """Seconds per pass on the client: a GridSampler proposal in memory plus its share of a batched SQLite
    record of ``BATCH`` passes, with the attributes of a real pass (its statistics, its daily returns)."""
    import optuna
    from optuna.trial import create_trial

    from backtests.optimize import store
    from backtests.optimize.criteria import PASS_STATS

    grid = {"fast": FAST, "slow": SLOW + list(range(150, 300, 10))}
    dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in grid.items()}
    durable = store.open_study(store.storage_url(folder / "client.db"), "cost", "maximize", {})
    driver = optuna.create_study(sampler=optuna.samplers.GridSampler(grid, seed=0))
    stats = {k: 1.0 for k in (*PASS_STATS, "custom")} | {"daily_returns": [1e-4] * 208}
    t0 = time.perf_counter()
    batch = []
    for i in range(n):
        trial = driver.ask(dist)
        batch.append(create_trial(value=float(i), params=trial.params, distributions=dist,
                                  user_attrs={"stats": {**stats, "seconds": 0.03}}))  # fmt: skip
        if len(batch) == BATCH:
            durable.record(batch)
            batch = []
    return (time.perf_counter() - t0) / n


def _spread(values: list[float], digits: int = 1) -> str:
    """The median and, over several rounds, the range."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} (range {low:.{digits}f}-{high:.{digits}f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds, contestants taking turns in each")
    parser.add_argument("--workers", type=int, default=None, help="processes of each (default: CPUs given)")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = parser.parse_args(argv)
    from backtests.optimize.pool import start_method
    from datafeeds.sample import read_sample

    df, fast, slow = read_sample(), FAST, SLOW
    if args.tiny:
        args.repeats, df, fast, slow = 1, df.iloc[:1500], FAST[:4], SLOW[:3]
    workers = args.workers or len(cpus_given())
    counts = sorted({1, workers})
    header(
        [
            Contestant("backtesting.py optimize", workers, note="a forked multiprocessing pool"),
            *(
                Contestant(f"neuronet optimize, {w} worker{'s' if w > 1 else ''}", w, peer=False,
                           note=f"started by {start_method()}; this process records the passes")
                for w in counts
            ),
        ]
    )  # fmt: skip
    size_peer_pool(workers)
    n = len(fast) * len(slow)
    peer: list[tuple[float, float]] = []
    ours: dict[int, list[dict]] = {w: [] for w in counts}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for _ in range(args.repeats):  # contestants take turns, round by round
            peer.append(time_peer(df, fast, slow))
            for w in counts:
                ours[w].append(time_ours(df, fast, slow, w, folder))
        client = client_cost(folder)
    overhead = task_overhead(workers)
    points = [(f, s) for f in fast for s in slow][:: max(1, n // 20)]
    peer_pass, our_pass = pass_cpu(df, points, rounds=1 if args.tiny else 3)
    print(f"{n}-pass SMA grid on {len(df):,} bars, {args.repeats} rounds; passes/s as median (range)")
    print(f"backtesting.py optimize, {workers} processes: {_spread([n / s for s, _ in peer])} passes/s, "
          f"{1e3 * statistics.median(c for _, c in peer) / n:.1f} ms CPU/pass")  # fmt: skip
    for w, runs in ours.items():
        ratios = [p[0] / r["total_s"] for p, r in zip(peer, runs, strict=True)]
        stats_share = statistics.median(r["robustness_s"] / r["total_s"] for r in runs)
        rates = _spread([n / r["total_s"] for r in runs])
        print(
            f"neuronet, {w} worker{'s' if w > 1 else ' '}: end to end {rates} passes/s, "
            f"x backtesting.py {_spread(ratios, 2)}; "
            f"{1e3 * statistics.median(r['cpu_s'] for r in runs) / n:.1f} ms CPU/pass (client "
            f"{1e3 * statistics.median(r['client_s'] for r in runs) / n:.1f}), worker-side "
            f"{1e3 * statistics.median(r['pass_s'] for r in runs):.1f} ms/pass, robustness statistics "
            f"{100 * stats_share:.0f} % of the time"
        )
        print(f"  x backtesting.py per round: {', '.join(f'{x:.2f}' for x in ratios)}")
    print(
        f"one pass in one process, CPU (best of the rounds, {len(points)} passes): backtesting.py "
        f"{1e3 * peer_pass:.1f} ms, neuronet {1e3 * our_pass:.1f} ms "
        f"(x backtesting.py {peer_pass / our_pass:.2f})"
    )
    print(f"task round trip {1e3 * overhead:.2f} ms; client {1e3 * client:.2f} ms/pass (proposal + write)")
    pass_s = statistics.median(r["pass_s"] for r in ours[1])
    for w in (10, 100):
        worker_bound = w / (pass_s + overhead / BATCH)
        print(
            f"paper estimate, {w} workers: {min(worker_bound, 1 / client):.0f} passes/s "
            f"(workers alone {worker_bound:.0f}/s, client limit {1 / client:.0f}/s)"
        )


if __name__ == "__main__":
    main()
