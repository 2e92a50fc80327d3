"""One training epoch of the Fractal_OCL network: this library's OpenCL and NumPy backends vs PyTorch.

The reference workload of the MQL5 "Neural networks made easy, Part 5" article: 240 inputs -> 500 -> 250 ->
125 -> 62 -> 3 (tanh hidden layers, softmax + cross-entropy, Adam lr 3e-4), one epoch over 12,405 samples
(the article's EURUSD H1 candles; here random features with learnable labels, which cost the same), at
batch sizes 1 (the article's online mode), 32 and 256. Every contestant gets one untimed warm-up epoch
(kernel builds, memory pools, allocator caches), then ``--repeats`` timed epochs; the best is reported.

    python -m benchmarks.epoch                          # OpenCL + NumPy + PyTorch CPU (+ CUDA if present)
    python -m benchmarks.epoch --only opencl --batch 256 --profile
    NEURONET_DEVICE=cpu python -m benchmarks.epoch --dtype float64

``--profile`` runs the OpenCL epochs with per-kernel device timing (OpenCL events) and prints where the
time goes: device time per kernel vs the epoch's wall time (the rest is launch and Python overhead).
The seed article's own figure, 4 min 22 s per epoch on a Core 2 Duo, is printed as a ratio.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

SAMPLES = 12_405
SIZES = (240, 500, 250, 125, 62, 3)
SEED_EPOCH_S = 4 * 60 + 22  # the article: 75 epochs in 5 h 27 min
LR = 3e-4


def make_data(seed: int = 0, samples: int = SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """Features (N, 240) float32 and one-hot labels (N, 3) of a fixed random linear rule."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, SIZES[0])).astype(np.float32)
    labels = np.argmax(x @ rng.standard_normal((SIZES[0], SIZES[-1])), axis=1)
    return x, np.eye(SIZES[-1], dtype=np.float32)[labels]


def specs() -> list[dict]:
    hidden = [{"type": "dense", "units": u, "activation": "tanh"} for u in SIZES[1:-1]]
    return [*hidden, {"type": "dense", "units": SIZES[-1], "activation": "softmax"}]


def time_neuronet(backend, x, y, batch: int, repeats: int) -> tuple[float, float | None]:
    """Best epoch wall time (s) and that epoch's profiled device time (s, or None)."""
    from nn.model import Sequential

    model = Sequential.from_specs(specs(), input_shape=(SIZES[0],), loss="cce",
                                  optimizer={"type": "adam", "lr": LR}, backend=backend, seed=0)
    model.fit(x, y, epochs=1, batch_size=batch, progress=False)  # warm-up
    best = (math.inf, None)
    for _ in range(repeats):
        rec = model.fit(x, y, epochs=1, batch_size=batch, progress=False).epochs[-1]
        if not math.isfinite(rec.loss):
            raise RuntimeError(f"{backend}: loss became {rec.loss}")
        best = min(best, (rec.wall_s, rec.device_s), key=lambda t: t[0])
    return best


def time_torch(device: str, x, y, batch: int, repeats: int) -> float:
    """Best epoch time of the same network in PyTorch (float32, Xavier-uniform weights, zero biases)."""
    import torch

    torch.manual_seed(0)
    layers = []
    for i in range(len(SIZES) - 1):
        lin = torch.nn.Linear(SIZES[i], SIZES[i + 1])
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        layers += [lin, torch.nn.Tanh()] if i < len(SIZES) - 2 else [lin]
    net = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()  # softmax + CCE from the logits
    xd = torch.from_numpy(x).to(device)
    yd = torch.from_numpy(np.argmax(y, axis=1)).to(device)

    samples = len(x)

    def epoch(seed: int) -> float:
        order = torch.randperm(samples, generator=torch.Generator().manual_seed(seed)).to(device)
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for start in range(0, samples, batch):
            idx = order[start:start + batch]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(xd[idx]), yd[idx]).backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    epoch(0)  # warm-up
    return min(epoch(r + 1) for r in range(repeats))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[256, 32, 1])
    ap.add_argument("--only", nargs="+", choices=["opencl", "numpy", "torch", "torch-cuda"],
                    default=["opencl", "numpy", "torch", "torch-cuda"])
    ap.add_argument("--repeats", type=int, default=2, help="timed epochs per contestant (best is kept)")
    ap.add_argument("--device", default=None, help="OpenCL device ('cpu', 'gpu', 'P:D', name part)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--threads", type=int, default=None,
                    help="PyTorch CPU threads (default: the number of CPUs, at most 2 as in the issue)")
    ap.add_argument("--numpy-max-batch1", action="store_true",
                    help="also time the NumPy backend at batch 1 (slow: ~10k Python steps)")
    ap.add_argument("--profile", action="store_true", help="per-kernel device time of the OpenCL epochs")
    ap.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = ap.parse_args(argv)
    if args.tiny:
        args.batch, args.repeats = [64], 1

    x, y = make_data(samples=256 if args.tiny else SAMPLES)
    print(f"machine: {machine()}")
    print(f"workload: {len(x)} samples, {' -> '.join(map(str, SIZES))}, tanh, softmax+CCE, Adam lr {LR}")
    rows: list[tuple[str, int, float, float | None]] = []
    ocl = None
    if "opencl" in args.only:
        from nn.ops_opencl import OpenCLBackend
        from opencl import get_runtime

        rt = get_runtime(args.device, args.dtype, profile=args.profile)
        ocl = OpenCLBackend(device=rt.info, dtype=args.dtype, profile=args.profile)
        print(f"OpenCL: {rt.info.name} | {rt.info.platform} {rt.info.platform_version} | {args.dtype}")
    torch_threads = args.threads or min(2, os.cpu_count() or 1)
    have_cuda = False
    if any(c.startswith("torch") for c in args.only):
        try:
            import torch

            torch.set_num_threads(torch_threads)
            have_cuda = torch.cuda.is_available()
            print(f"PyTorch {torch.__version__}, {torch_threads} CPU threads"
                  + (f", CUDA {torch.cuda.get_device_name(0)}" if have_cuda else ""))
        except ImportError:
            print("PyTorch not installed: pip install torch (CPU peer skipped)")
            args.only = [c for c in args.only if not c.startswith("torch")]
    for batch in args.batch:
        if ocl is not None:
            if args.profile:
                ocl.runtime.profiler.reset()
            wall, dev = time_neuronet(ocl, x, y, batch, args.repeats)
            rows.append(("neuronet opencl", batch, wall, dev))
            if args.profile:
                print(f"\n[batch {batch}] OpenCL epoch {wall:.3f} s wall, {dev or 0:.3f} s device "
                      f"(kernels of the warm-up and timed epochs below)")
                print(ocl.runtime.profiler.table())
        if "numpy" in args.only and (batch > 1 or args.numpy_max_batch1):
            rows.append(("neuronet numpy", batch, *time_neuronet("numpy", x, y, batch, 1)))
        if "torch" in args.only:
            rows.append(("pytorch cpu", batch, time_torch("cpu", x, y, batch, args.repeats), None))
        if "torch-cuda" in args.only and have_cuda:
            rows.append(("pytorch cuda", batch, time_torch("cuda", x, y, batch, args.repeats), None))
        _print_batch(rows, batch, len(x))


def _print_batch(rows, batch: int, samples: int) -> None:
    mine = [r for r in rows if r[1] == batch]
    peers = {r[0]: r[2] for r in mine}
    print(f"\nbatch {batch}")
    print(f"{'contestant':<18} {'epoch s':>9} {'samples/s':>11} {'vs torch cpu':>13} {'vs torch cuda':>14} "
          f"{'vs seed':>9}")
    for name, _, wall, _dev in mine:
        cpu = peers.get("pytorch cpu")
        cuda = peers.get("pytorch cuda")
        print(f"{name:<18} {wall:>9.3f} {samples / wall:>11.0f} "
              f"{(f'{cpu / wall:.2f}x' if cpu else '-'):>13} {(f'{cuda / wall:.2f}x' if cuda else '-'):>14} "
              f"{SEED_EPOCH_S / wall:>8.0f}x")


if __name__ == "__main__":
    main()
