"""Dense GEMM throughput: this library's OpenCL ``gemm`` vs NumPy, PyTorch CPU and PyTorch CUDA (float32).

Square products at 256..4096 and the products of the Fractal_OCL network (240 -> 500 -> 250 -> 125 -> 62 -> 3)
at batch 256, 32 and 1: forward ``x·wᵀ`` (B,I)x(O,I)ᵀ, weight gradient ``dzᵀ·x`` (B,O)ᵀx(B,I) and input
gradient ``dz·w`` (B,O)x(O,I) (not needed for the first layer). Each contestant computes exactly the same
transposition. Every timing is the best of ``--rounds`` rounds of enough calls to fill ``--min-time``
seconds (after a warm-up call that builds kernels and fills memory pools); contestants take turns round
by round, and device work is waited for inside the timed region.

    python -m benchmarks.gemm                       # everything (square sizes above 2048 skipped on CPUs)
    python -m benchmarks.gemm --square 1024 --no-network
    NEURONET_DEVICE=gpu python -m benchmarks.gemm --square 4096
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import numpy as np

from benchmarks._machine import header, numpy_contestant, opencl_contestant, torch_contestant

NETWORK = (240, 500, 250, 125, 62, 3)


def best_seconds(
    fns: dict[str, tuple[Callable[[], None], Callable[[], None]]], min_time: float, rounds: int
) -> dict[str, float]:
    """Best per-call seconds of each contestant.

    Contestants take turns round by round (each round runs a contestant's call enough times to last
    ``min_time``), so a background load that comes and goes hits all of them alike; the best round counts.
    Each round starts with untimed calls for half of ``min_time``: the previous contestant's worker threads
    (OpenBLAS, PyTorch's OpenMP and PoCL all spin for a while after their last call) compete for the cores
    at first, which on 2 cores cost the next contestant up to half of a 50 ms round.
    """
    reps = {}
    for name, (fn, sync) in fns.items():
        fn()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        reps[name] = max(1, int(min_time / max(time.perf_counter() - t0, 1e-7)))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, (fn, sync) in fns.items():
            for _ in range(max(1, reps[name] // 2)):
                fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(reps[name]):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - t0) / reps[name])
    return best


def problems(square: list[int], network: bool, batches: list[int]) -> list[tuple]:
    """(label, M, N, K, trans_a, trans_b) for C (M,N) = op(A) op(B)."""
    out = [(f"{n}^3", n, n, n, False, False) for n in square]
    if network:
        for b in batches:
            for i, o in itertools.pairwise(NETWORK):
                out.append((f"B{b} fwd {i}->{o}", b, o, i, False, True))
                out.append((f"B{b} gw  {i}->{o}", o, i, b, True, False))
                if i != NETWORK[0]:
                    out.append((f"B{b} gx  {i}->{o}", b, i, o, False, False))
    return out


def operands(rng, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def contestants(args) -> dict[str, Callable]:
    """name -> factory(a, b, ta, tb) returning (call, sync)."""
    out: dict[str, Callable] = {}
    from opencl import get_runtime, memory
    from opencl.blas import gemm

    rt = get_runtime(args.device)

    def ocl(a, b, ta, tb):
        da, db = memory.to_device(rt, a), memory.to_device(rt, b)
        m = a.shape[1] if ta else a.shape[0]
        n = b.shape[0] if tb else b.shape[1]
        dc = memory.empty(rt, (m, n))
        return (lambda: gemm(rt, da, db, dc, trans_a=ta, trans_b=tb)), rt.synchronize

    out["opencl"] = ocl

    def numpy_(a, b, ta, tb):
        aa, bb = (a.T if ta else a), (b.T if tb else b)
        c = np.empty((aa.shape[0], bb.shape[1]), np.float32)
        return (lambda: np.matmul(aa, bb, out=c)), (lambda: None)

    out["numpy"] = numpy_
    if args.torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:

            def torch_on(device):
                def make(a, b, ta, tb):
                    ta_, tb_ = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
                    aa, bb = (ta_.T if ta else ta_), (tb_.T if tb else tb_)
                    c = torch.empty((aa.shape[0], bb.shape[1]), dtype=torch.float32, device=device)
                    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
                    return (lambda: torch.mm(aa, bb, out=c)), sync

                return make

            out["torch-cpu"] = torch_on("cpu")
            if torch.cuda.is_available():
                out["torch-cuda"] = torch_on("cuda")
    return out


def _contestant(name: str, rt):
    if name == "opencl":
        return opencl_contestant(rt)
    if name == "numpy":
        return numpy_contestant(f"NumPy {np.__version__}")
    import torch

    return torch_contestant(torch, name.removeprefix("torch-"))


def tune(args) -> None:
    """Time the GPU kernel (``gemm_gpu.cl``) with explicit tile configurations, NN and NT layouts."""
    from opencl import get_runtime, memory
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import Tiles, gemm_gpu

    rt = get_runtime(args.device)
    header([opencl_contestant(rt)])
    rng = np.random.default_rng(0)
    for spec in args.tiles.split(","):
        t = Tiles(*(int(v) for v in spec.split("x")))
        for n in args.square or [1024, 4096]:
            for tb in (False, True):
                a, b = operands(rng, n, n, n, False, tb)
                da, db, dc = memory.to_device(rt, a), memory.to_device(rt, b), memory.empty(rt, (n, n))
                problem = _Problem(n, n, n, 1, False, tb, 0, 0, 0, 1.0, 0.0, False, epilogue(None))

                def call(da=da, db=db, dc=dc, t=t, problem=problem):
                    gemm_gpu(rt, da, db, dc, dc, problem, tiles=t)

                sec = best_seconds({"gpu": (call, rt.synchronize)}, args.min_time, args.rounds)["gpu"]
                rate = 2.0 * n**3 / sec / 1e9
                print(f"tiles {spec:<16} {n}^3 {'NT' if tb else 'NN'}: {rate:10.1f} GFLOP/s", flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gemm", description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="OpenCL device: gpu, cpu, P:D or part of a name")
    p.add_argument(
        "--square",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="square sizes, comma-separated (default 256,512,1024,2048,4096; <=2048 on CPUs)",
    )
    p.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[256, 32, 1])
    p.add_argument("--no-network", dest="network", action="store_false", help="skip the network's shapes")
    p.add_argument("--no-torch", dest="torch", action="store_false", help="skip the PyTorch peers")
    p.add_argument("--min-time", type=float, default=0.05, help="seconds per contestant and round")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument(
        "--tiles",
        default=None,
        help="GPU tuning: time these BMxBNxBKxTMxTN tile configurations (square sizes only)",
    )
    p.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = p.parse_args(argv)
    if args.tiny:
        args.square, args.batches, args.network, args.rounds, args.min_time = [64], [8], False, 1, 0.001
    if args.tiles:
        tune(args)
        return

    from opencl import get_runtime

    rt = get_runtime(args.device)
    square = args.square or ([256, 512, 1024, 2048] if rt.is_cpu else [256, 512, 1024, 2048, 4096])
    makers = contestants(args)
    names = list(makers)
    header([_contestant(name, rt) for name in names])
    info = rt.info
    print(f"OpenCL device {info.index} {info.name} ({info.platform_version}, driver {info.driver_version})")
    columns = f"{'product':<22}" + "".join(f"{n + ' GF/s':>17}" for n in names)
    columns += f"{'ocl/numpy':>11}" + (f"{'ocl/torch':>11}" if len(names) > 2 else "")
    print(columns)
    rng = np.random.default_rng(0)
    peer = "torch-cuda" if "torch-cuda" in names else ("torch-cpu" if "torch-cpu" in names else None)
    totals = {}
    for label, m, n, k, ta, tb in problems(square, args.network, args.batches):
        a, b = operands(rng, m, n, k, ta, tb)
        flops = 2.0 * m * n * k
        seconds = best_seconds({nm: makers[nm](a, b, ta, tb) for nm in names}, args.min_time, args.rounds)
        rates = {nm: flops / sec / 1e9 for nm, sec in seconds.items()}
        if label.startswith("B"):
            for nm, sec in seconds.items():
                key = (label.split()[0], nm)
                totals[key] = totals.get(key, 0.0) + sec
        line = f"{label:<22}" + "".join(f"{rates[nm]:>17.1f}" for nm in names)
        line += f"{rates['opencl'] / rates['numpy']:>11.2f}"
        if peer:
            line += f"{rates['opencl'] / rates[peer]:>11.2f}"
        print(line, flush=True)
    for batch in dict.fromkeys(key[0] for key in totals):
        parts = ", ".join(f"{nm} {totals[(batch, nm)] * 1e6:.0f} us" for nm in names)
        print(f"all products of one {batch} step: {parts}")


if __name__ == "__main__":
    main()
