"""The 14 products of one batch-256 Fractal_OCL training step, host and device, against PyTorch.

One training step of the Fractal_OCL network (240 -> 500 -> 250 -> 125 -> 62 -> 3) multiplies 14 matrices:
per layer the forward ``x·wᵀ``, the weight gradient ``dzᵀ·x`` and (after the first layer) the input
gradient ``dz·w`` (those two as one ``gemm_pair``, one launch on GPUs, as ``Sequential.fit`` runs them;
``--unpaired`` also times them as separate calls). They are small, so what a call costs the host
(validation, kernel choice, argument setting, the enqueue) matters as much as the kernels.
Three figures per run:

- ``step``: the 14 products back to back, waited for at the end; the best of ``--rounds`` rounds, each
  contestant in turn (``benchmarks.gemm.best_seconds``). PyTorch runs the same products with ``torch.mm``
  (CUDA when present, else the CPU).
- ``host``: what the 14 calls cost this process's thread in CPU time while the queue is held shut by an
  OpenCL user event, so nothing runs meanwhile (on a CPU device the kernels would otherwise compete with
  the host for the same cores); the best of ``--rounds``.
- ``fit``: CPU time of this thread per step of a batch-256 training epoch of the whole network (gather,
  products, bias gradients, loss, Adam): the host side of every launch of a step.

With ``--profile`` each product is also timed alone by its kernels' device time (OpenCL profiling events;
PyTorch's kernels through ``torch.profiler`` when it runs on CUDA), with the tile configuration and K split
chosen for it: where the step's device time goes.

    python -m benchmarks.step                      # the device neuronet chooses
    NEURONET_DEVICE=gpu python -m benchmarks.step --rounds 20 [--profile]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._machine import header, opencl_contestant, torch_contestant
from benchmarks.gemm import best_seconds, operands, problems


def _opencl_step(rt, batch: int, pair: bool = True):
    """The 14 products as training runs them: on a GPU a layer's weight and input gradients as one
    ``gemm_pair`` (one launch) unless ``pair`` is false; on a CPU device, as there, two calls."""
    from opencl import memory
    from opencl.blas import Product, gemm, gemm_pair

    pair = pair and not rt.is_cpu
    rng = np.random.default_rng(0)
    calls = []
    for label, m, n, k, ta, tb in problems([], True, [batch]):
        a, b = operands(rng, m, n, k, ta, tb)
        product = Product(memory.to_device(rt, a), memory.to_device(rt, b), memory.empty(rt, (m, n)), ta, tb)
        if pair and " gx " in label:  # follows the same layer's weight gradient
            calls[-1] = (calls[-1][0], product)
        else:
            calls.append((product, None))

    def step() -> None:
        for first, second in calls:
            if second is None:
                gemm(rt, first.A, first.B, first.C, trans_a=first.trans_a, trans_b=first.trans_b)
            else:
                gemm_pair(rt, first, second)

    return step, sum(1 if second is None else 2 for _, second in calls)


def _torch_step(torch, device: str, batch: int):
    rng = np.random.default_rng(0)
    calls = []
    for _, m, n, k, ta, tb in problems([], True, [batch]):
        a, b = (torch.from_numpy(x).to(device) for x in operands(rng, m, n, k, ta, tb))
        calls.append((a.T if ta else a, b.T if tb else b, torch.empty((m, n), device=device)))

    def step() -> None:
        for a, b, c in calls:
            torch.mm(a, b, out=c)

    return step, (torch.cuda.synchronize if device == "cuda" else (lambda: None))


def _torch_kernel_seconds(torch, a, b, c, reps: int) -> float:
    """Device seconds per ``torch.mm`` call: the CUDA kernels' time from ``torch.profiler``."""
    from torch.profiler import ProfilerActivity, profile

    torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) * 1e-6 / reps


def profile_products(rt, batch: int, torch=None, reps: int = 20) -> None:
    """Print each product's shape, layout, tiles and K split, and its device µs alone (ours, PyTorch's)."""
    from opencl import gemm_gpu, memory
    from opencl.blas import _plan

    rng = np.random.default_rng(0)
    queue = rt.timing_queue
    print(
        f"{'product':<22} {'M x N x K':>14} {'op':>3} {'tiles (BMxBNxBK TMxTN stages)':>30} {'split':>5} "
        f"{'opencl us':>9} {'torch us':>9}"
    )
    total = total_torch = 0.0
    for label, m, n, k, ta, tb in problems([], True, [batch]):
        a, b = operands(rng, m, n, k, ta, tb)
        da, db, dc = memory.to_device(rt, a), memory.to_device(rt, b), memory.empty(rt, (m, n))
        plan = _plan(rt, False, da, db, dc, ta, tb, 1.0, 0.0, None, None)  # this product's launches (tuned)
        us = plan.device_seconds(queue, da, db, dc, dc, reps) * 1e6
        tiles, split = "CPU kernels", 1
        if not rt.is_cpu:
            split = gemm_gpu.split_k(rt, m, n, k, 1)
            t = next(v for key, v in gemm_gpu._chosen.items() if key[3:9] == (m, n, k, 1, ta, tb))
            tiles = f"{t.bm}x{t.bn}x{t.bk} {t.tm}x{t.tn} {t.stages}"
        theirs = float("nan")
        if torch is not None:
            ta_, tb_ = (torch.from_numpy(x).cuda() for x in (a, b))
            out = torch.empty((m, n), device="cuda")
            theirs = _torch_kernel_seconds(torch, ta_.T if ta else ta_, tb_.T if tb else tb_, out, reps) * 1e6
        total, total_torch = total + us, total_torch + theirs
        op = ("T" if ta else "N") + ("T" if tb else "N")
        print(f"{label:<22} {f'{m}x{n}x{k}':>14} {op:>3} {tiles:>30} {split:>5} {us:>9.1f} {theirs:>9.1f}")
    print(f"{'device time of the products alone':<78} {total:>9.1f} {total_torch:>9.1f}")


def host_seconds(rt, step, rounds: int, steps: int = 20) -> float:
    """Thread CPU seconds per ``step`` with the queue held shut (nothing executes while it is timed)."""
    import pyopencl as cl

    best = float("inf")
    for _ in range(rounds):
        gate = cl.UserEvent(rt.context)
        cl.enqueue_marker(rt.queue, wait_for=[gate])
        t0 = time.thread_time()
        for _ in range(steps):
            step()
        best = min(best, (time.thread_time() - t0) / steps)
        gate.set_status(cl.command_execution_status.COMPLETE)
        rt.synchronize()
    return best


def fit_host_seconds(rt, batch: int, samples: int) -> tuple[float, int]:
    """Thread CPU seconds per training step of one epoch (after a warm-up epoch), and the steps."""
    from benchmarks.epoch import LR, SIZES, make_data, specs
    from nn.model import Sequential
    from nn.ops_opencl import OpenCLBackend

    x, y = make_data(samples=samples)
    backend = OpenCLBackend(device=rt.info, dtype=rt.dtype)
    model = Sequential.from_specs(
        specs(),
        input_shape=(SIZES[0],),
        loss="cce",
        optimizer={"type": "adam", "lr": LR},
        backend=backend,
        seed=0,
    )
    model.fit(x, y, epochs=1, batch_size=batch, progress=False)
    t0 = time.thread_time()
    model.fit(x, y, epochs=1, batch_size=batch, progress=False)
    steps = -(-samples // batch)
    return (time.thread_time() - t0) / steps, steps


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.step", description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="OpenCL device: gpu, cpu, P:D or part of a name")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--min-time", type=float, default=0.05, help="seconds per contestant and round")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--samples", type=int, default=12_405, help="samples of the fit epoch (0: skip it)")
    p.add_argument("--no-torch", dest="torch", action="store_false", help="skip the PyTorch peer")
    p.add_argument("--profile", action="store_true", help="each product's device time alone, and its tiles")
    p.add_argument(
        "--unpaired",
        action="store_true",
        help="also time every product as its own gemm call (each layer's gradients not paired)",
    )
    p.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = p.parse_args(argv)
    if args.tiny:
        args.batch, args.rounds, args.min_time, args.samples = 8, 1, 0.001, 64

    from opencl import get_runtime

    rt = get_runtime(args.device)
    step, count = _opencl_step(rt, args.batch)
    fns = {"opencl": (step, rt.synchronize)}
    if args.unpaired:
        fns["opencl-unpaired"] = (_opencl_step(rt, args.batch, pair=False)[0], rt.synchronize)
    contestants = [opencl_contestant(rt)]
    torch = None
    if args.torch:
        try:
            import torch
        except ImportError:
            print("PyTorch not installed: its row is skipped")
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        fns[f"torch-{device}"] = _torch_step(torch, device, args.batch)
        contestants.append(torch_contestant(torch, device))
    header(contestants)
    info = rt.info
    print(f"OpenCL device {info.index} {info.name} ({info.platform_version}, driver {info.driver_version})")
    seconds = best_seconds(fns, args.min_time, args.rounds)
    parts = ", ".join(f"{name} {sec * 1e6:.0f} us" for name, sec in seconds.items())
    print(f"the {count} products of one batch-{args.batch} step, host + device: {parts}")
    if args.profile:
        profile_products(rt, args.batch, torch if torch is not None and torch.cuda.is_available() else None)
    host = host_seconds(rt, step, args.rounds)
    print(f"host CPU time of those {count} calls: {host * 1e6:.1f} us ({host / count * 1e6:.2f} us per call)")
    if args.samples:
        per_step, steps = fit_host_seconds(rt, args.batch, args.samples)
        print(
            f"host CPU time per training step of a batch-{args.batch} epoch ({steps} steps, every launch): "
            f"{per_step * 1e6:.0f} us"
        )


if __name__ == "__main__":
    main()
