"""RBM training by CD-1: this library's OpenCL and NumPy backends vs the same algorithm in PyTorch.

The book's CUDA case (Masters, DBN vol. 1, CUDA.LOG): 784 visible (MNIST-shaped random binary data) x 400
hidden, 60,000 cases, 10 epochs of 100 batches of 600, CD-1 with mean-field visible reconstruction, the fast
reconstruction error, weight and sparsity penalties and the cosine learning-rate/momentum adaptation after
every batch. 14.93 s on the book's GPU (compute capability 3.5). Every contestant runs one untimed epoch
first (kernel builds, pools), then the timed 10 epochs. The PyTorch contestant keeps its learning rate and
momentum as device tensors too, so neither side waits for the host inside an epoch.

    python -m benchmarks.rbm                                   # full size
    python -m benchmarks.rbm --cases 6000 --hidden 100 --epochs 2 --only opencl numpy torch
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from benchmarks.epoch import machine

BOOK_S = 14.93


def make_data(cases: int, visible: int, seed: int = 0) -> np.ndarray:
    """Random binary images with MNIST's ~13 % ink: (cases, visible) float32 in {0, 1}."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(size=(cases, visible)) < 0.13).astype(np.float32)


def _config(args, epochs: int):
    from nn.rbm import RBMConfig

    return RBMConfig(n_hidden=args.hidden, n_rand=1, n_batches=args.batches, chain_start=1, chain_end=1,
                     max_epochs=epochs, convergence_crit=0.0, max_no_improvement=10**6, seed=1)


def time_neuronet(name: str, x: np.ndarray, args) -> tuple[float, float, float]:
    """(seconds of the epochs, seconds of the whole call with setup, final RMS reconstruction error)."""
    import nn
    from nn.rbm import train_rbm

    be = nn.get_backend(name, profile=args.profile)
    train_rbm(be, x, _config(args, 1))  # warm-up: kernel builds, GEMM tile timing per shape, pools
    if args.profile and hasattr(be, "runtime"):
        be.runtime.profiler.reset()
    t0 = time.perf_counter()
    fit = train_rbm(be, x, _config(args, args.epochs))
    total = time.perf_counter() - t0
    if args.profile and hasattr(be, "runtime"):
        print(be.runtime.profiler.table())
    return sum(h.seconds for h in fit.history), total, fit.history[-1].recon_rms


def time_torch(device: str, x: np.ndarray, args) -> tuple[float, float, float]:
    """The same CD-1 loop in PyTorch float32 (sampling with torch.rand_like)."""
    import torch

    from nn.rbm import _batch_bounds

    torch.manual_seed(0)
    n, nv = x.shape
    nh = args.hidden
    xd = torch.from_numpy(x).to(device)
    xm = xd.mean(0).clamp(1e-8, 1 - 1e-8)
    w = ((torch.rand(nh, nv, device=device) - 0.5) * (4.0 / math.sqrt(math.sqrt(nv * nh)))).contiguous()
    c = -(w @ xm)
    b = torch.log(xm / (1 - xm)) - 0.5 * w.sum(0)
    w_inc, b_inc, c_inc = torch.zeros_like(w), torch.zeros_like(b), torch.zeros_like(c)
    g_prev, on = torch.zeros_like(w), torch.full((nh,), 0.5, device=device)
    lr, mom = torch.tensor(0.05, device=device), torch.tensor(0.1, device=device)
    prev_len2, max_inc = torch.tensor(0.0, device=device), torch.tensor(0.0, device=device)
    bounds = _batch_bounds(n, args.batches)

    def epoch() -> float:
        nonlocal w, b, c, w_inc, b_inc, c_inc, g_prev, on, lr, mom, prev_len2, max_inc
        order = torch.randperm(n, device=device)
        err = torch.zeros((), device=device)
        for lo, hi in bounds:
            v1 = xd[order[lo:hi]]
            m = hi - lo
            q1 = torch.sigmoid(torch.addmm(c, v1, w.t()))
            h = (torch.rand_like(q1) < q1).to(v1.dtype)
            p = torch.sigmoid(torch.addmm(b, h, w))
            err += ((p - v1) ** 2).sum()
            q2 = torch.sigmoid(torch.addmm(c, p, w.t()))
            on = 0.95 * on + 0.05 * q1.mean(0)
            sp = 1e-3 * (on - 0.1) + 0.5 * (on - 0.01) * (on < 0.01) + 0.5 * (on - 0.99) * (on > 0.99)
            c_inc = mom * c_inc + lr * ((q1 - q2).sum(0) / m - sp)
            c += c_inc
            g = torch.addmm(q1.t() @ v1, q2.t(), p, alpha=-1.0 / m, beta=1.0 / m)
            g -= 1e-4 * w + torch.outer(sp, xm)
            w_inc = mom * w_inc + lr * g
            w += w_inc
            max_inc = torch.maximum(max_inc, w_inc.abs().max())
            b_inc = mom * b_inc + lr * (v1 - p).sum(0) / m
            b += b_inc
            len2, dot = (g * g).sum(), (g * g_prev).sum()
            cos = torch.where(prev_len2 > 0, dot / torch.sqrt(len2 * prev_len2), torch.zeros_like(dot))
            factor = torch.where(cos > 0.5, 1.2, torch.where(cos > 0.3, 1.1, torch.where(
                cos < -0.5, 1 / 1.2, torch.where(cos < -0.3, 1 / 1.1, 1.0))))
            lr = (lr * factor).clamp(0.001, 1.0)
            mom = torch.where(cos.abs() > 0.3, mom / 1.5, mom)
            g_prev, prev_len2 = g, len2
        mom = 0.99 * mom + 0.01 * 0.9
        return float(torch.sqrt(err / (n * nv)))  # the per-epoch host read

    epoch()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        rms = epoch()
    seconds = time.perf_counter() - t0
    return seconds, seconds, rms


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=60_000)
    ap.add_argument("--visible", type=int, default=784)
    ap.add_argument("--hidden", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None, help="PyTorch CPU threads (default: all)")
    ap.add_argument("--only", nargs="+", choices=["opencl", "numpy", "torch", "torch-cuda"],
                    default=["opencl", "torch", "torch-cuda"])
    ap.add_argument("--profile", action="store_true", help="per-kernel device time of the OpenCL run")
    ap.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = ap.parse_args(argv)
    if args.tiny:
        args.cases, args.visible, args.hidden, args.epochs, args.batches = 300, 20, 10, 1, 3
    x = make_data(args.cases, args.visible)
    print(f"machine: {machine()}")
    print(f"RBM {args.visible} x {args.hidden}, {args.cases} cases, {args.epochs} epochs of {args.batches} "
          f"batches, CD-1 (book: {BOOK_S} s for 60000 x 784 x 400, 10 x 100)")
    size = (args.cases, args.visible, args.hidden, args.epochs, args.batches)
    book_case = size == (60_000, 784, 400, 10, 100)
    rows = []
    for name in args.only:
        try:
            if name.startswith("torch"):
                import torch

                if args.threads:
                    torch.set_num_threads(args.threads)
                device = "cuda" if name == "torch-cuda" else "cpu"
                if device == "cuda" and not torch.cuda.is_available():
                    raise ImportError("no CUDA device")
                label = f"PyTorch {torch.__version__} {device}"
                if device == "cuda":
                    label += f" ({torch.cuda.get_device_name()})"
                seconds, total, rms = time_torch(device, x, args)
            else:
                import nn

                label = nn.get_backend(name).name
                seconds, total, rms = time_neuronet(name, x, args)
        except ImportError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        rows.append((label, seconds, rms))
        versus = f"  book/this {BOOK_S / seconds:6.1f}x" if book_case else ""
        print(f"{label:52s} epochs {seconds:7.3f} s (with setup {total:7.3f} s)  recon RMS {rms:.4f}{versus}",
              flush=True)
    if rows:
        first = rows[0][1]
        for label, seconds, _ in rows[1:]:
            print(f"{rows[0][0]} vs {label}: {seconds / first:.2f}x (>1: ours faster)")


if __name__ == "__main__":
    main()
