"""Complex layers at ATFNet's official F-block size: OpenCL (this library) vs the same maths in PyTorch.

One training step of each piece = forward + backward (input and parameter gradients), float32, timed with
the device synchronised inside the timed region (best of ``--rounds`` after a warm-up that builds kernels):

- ``dense``: complex dense ``(rows, 512) -> (rows, 2048)``, rows = batch·channels (the FFN's first product)
- ``encoder``: one ``ComplexEncoderLayer`` (token attention, modulus softmax, d 512, 8 heads, d_ff 2048,
  dropout off) on ``(batch, channels, 512)`` complex tokens
- ``spectral``: extended DFT -> spectrum norm -> de-normalise -> inverse DFT on ``(batch, channels, 96)``
- ``attn-core``: the attention core (scores, modulus softmax, weighted values; no projections) in the
  official ATFNet layout: per row (batch·channels), 8 heads attend across the 64 feature slots of width 1

PyTorch runs the identical maths on ``complex64`` tensors (its autograd gives the same real gradients).
``--profile`` prints the per-kernel device time of the OpenCL encoder step.

    python -m benchmarks.complex_layers                    # CPU OpenCL device vs torch CPU
    NEURONET_DEVICE=gpu python -m benchmarks.complex_layers --channels 7
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from benchmarks._machine import header, opencl_contestant, torch_contestant
from nn.complex import ComplexDense, ComplexEncoderLayer
from nn.ops_opencl import OpenCLBackend
from nn.spectral import ExtendedDFT, InverseExtendedDFT, SpectrumNorm

STEPS = ("dense", "encoder", "spectral", "attn-core")


Backend = OpenCLBackend


def best_seconds(step: Callable[[], None], sync: Callable[[], None], rounds: int, reps: int) -> float:
    step()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def bind(layer, be, input_shape, rng) -> None:
    layer.build(input_shape)
    params, grads = {}, {}
    for s in layer.param_specs():
        params[s.name] = be.asarray(rng.normal(scale=0.05, size=s.shape))
        grads[s.name] = be.empty(s.shape)
    layer.bind(be, params, grads, {})


def opencl_steps(args, rng) -> dict[str, Callable[[], None]]:
    be = Backend()
    rows = args.batch * args.channels
    dense = ComplexDense(4 * args.d_model)
    bind(dense, be, (args.d_model, 2), rng)
    x_dense = be.asarray(rng.normal(size=(rows, args.d_model, 2)))
    g_dense = be.asarray(rng.normal(size=(rows, 4 * args.d_model, 2)))
    enc = ComplexEncoderLayer(heads=args.heads, d_ff=4 * args.d_model, dropout=0.0)
    bind(enc, be, (args.channels, args.d_model, 2), rng)
    x_enc = be.asarray(rng.normal(size=(args.batch, args.channels, args.d_model, 2)))
    g_enc = be.asarray(rng.normal(size=(args.batch, args.channels, args.d_model, 2)))
    spec = [ExtendedDFT(args.pred_len), SpectrumNorm(), InverseExtendedDFT(args.seq_len, args.pred_len)]
    shape = (args.channels, args.seq_len)
    for layer in spec:
        shape = layer.build(shape)
        layer.bind(be, {}, {}, {})
    x_spec = be.asarray(rng.normal(size=(args.batch, args.channels, args.seq_len)))
    g_spec = be.asarray(rng.normal(size=(args.batch, args.channels, args.pred_len)))

    slots = args.d_model // args.heads
    qkv = be.asarray(rng.normal(size=(rows, slots, 3 * args.heads, 2)))
    g_att = be.asarray(rng.normal(size=(rows, slots, args.heads, 2)))

    def attn_core() -> None:
        _, s_, p_ = be.complex_attention_forward(qkv, args.heads, "modulus", False)
        be.complex_attention_backward(qkv, s_, p_, g_att, args.heads, "modulus", False)

    def spectral() -> None:
        dft, norm, inv = spec
        inv.forward(norm.denormalize(norm.forward(dft.forward(x_spec, True), True)), True)
        dft.backward(norm.backward(norm.denormalize_backward(inv.backward(g_spec))))

    return {
        "dense": lambda: (dense.forward(x_dense, True), dense.backward(g_dense)),
        "encoder": lambda: (enc.forward(x_enc, True), enc.backward(g_enc)),
        "spectral": spectral,
        "attn-core": attn_core,
        "_sync": be.synchronize,
        "_backend": be,
    }


def torch_steps(args, device: str, rng) -> dict[str, Callable[[], None]]:
    import torch

    def c(shape, scale=1.0, grad=False):
        re, im = (torch.from_numpy(rng.normal(scale=scale, size=shape).astype(np.float32)) for _ in range(2))
        t = torch.complex(re, im).to(device)
        return t.requires_grad_(grad)

    rows, d, heads = args.batch * args.channels, args.d_model, args.heads

    def split_relu(z):
        return torch.complex(torch.relu(z.real), torch.relu(z.imag))

    def layer_norm(z, w, b, eps=1e-5):
        c_ = z - z.mean(-1, keepdim=True)
        return w * c_ / torch.sqrt((c_.abs() ** 2).mean(-1, keepdim=True) + eps) + b

    w1, b1 = c((4 * d, d), 0.05, True), c((4 * d,), 0.05, True)
    x_dense, g_dense = c((rows, d), grad=True), c((rows, 4 * d))
    wqkv, bqkv, wo, bo = (
        c((3 * d, d), 0.05, True),
        c((3 * d,), 0.05, True),
        c((d, d), 0.05, True),
        c((d,), 0.05, True),
    )
    w2, b2 = c((d, 4 * d), 0.05, True), c((d,), 0.05, True)
    n1w, n1b, n2w, n2b = (c((d,), 0.05, True) for _ in range(4))
    x_enc, g_enc = c((args.batch, args.channels, d), grad=True), c((args.batch, args.channels, d))

    def encoder() -> None:
        bsz, n = x_enc.shape[0], x_enc.shape[1]
        qkv = (x_enc @ wqkv.T + bqkv).view(bsz, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = torch.softmax((q @ k.transpose(-1, -2)).abs(), dim=-1).to(q.dtype)
        att = (p @ v).permute(0, 2, 1, 3).reshape(bsz, n, d)
        h = layer_norm(x_enc + att @ wo.T + bo, n1w, n1b)
        f = split_relu(h @ w1.T + b1) @ w2.T + b2
        y = layer_norm(h + f, n2w, n2b)
        y.backward(g_enc)

    n_total = args.seq_len + args.pred_len
    x_spec = torch.from_numpy(rng.normal(size=(args.batch, args.channels, args.seq_len)).astype(np.float32))
    x_spec = x_spec.to(device).requires_grad_(True)
    g_spec = torch.from_numpy(rng.normal(size=(args.batch, args.channels, args.pred_len)).astype(np.float32))
    g_spec = g_spec.to(device)

    def spectral() -> None:
        spec = torch.fft.rfft(torch.nn.functional.pad(x_spec, (0, args.pred_len)), dim=-1) / n_total
        mean = spec.mean(-1, keepdim=True)
        std = torch.sqrt(spec.abs().var(-1, keepdim=True) + 1e-10)
        y = ((spec - mean) / std) * std + mean  # the gradient follows both statistics, as ours
        out = torch.fft.irfft(y * n_total, n=n_total, dim=-1)[..., -args.pred_len :]
        out.backward(g_spec)

    slots = d // heads
    qkv_t = c((rows, slots, 3, heads), grad=True)
    g_att = c((rows, heads, slots))

    def attn_core() -> None:
        q, k, v = (qkv_t[:, :, i].transpose(1, 2) for i in range(3))  # (rows, H, slots)
        p = torch.softmax((q[..., :, None] * k[..., None, :]).abs(), dim=-1).to(q.dtype)
        (p @ v[..., None])[..., 0].backward(g_att)

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return {
        "dense": lambda: (x_dense @ w1.T + b1).backward(g_dense),
        "encoder": encoder,
        "spectral": spectral,
        "attn-core": attn_core,
        "_sync": sync,
    }


TINY = dict(batch=2, channels=2, d_model=8, heads=2, seq_len=16, pred_len=8, rounds=1, reps=1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--channels", type=int, default=7)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=96)
    ap.add_argument("--pred-len", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--profile", action="store_true", help="per-kernel device time of the OpenCL encoder step"
    )
    ap.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = ap.parse_args(argv)
    if args.tiny:
        vars(args).update(TINY)
    rng = np.random.default_rng(0)
    ours = opencl_steps(args, rng)
    be = ours["_backend"]
    print(f"OpenCL device: {be.name}; batch {args.batch}, channels {args.channels}, d_model {args.d_model}")
    try:
        import torch
    except ImportError:
        print("PyTorch not installed: pip install torch (peer skipped)")
        torch = None
    devices = [] if torch is None else ["cuda"] if torch.cuda.is_available() else ["cpu"]
    header([opencl_contestant(be.runtime), *(torch_contestant(torch, d) for d in devices)])
    results: dict[str, dict[str, float]] = {}
    for name in STEPS:
        results.setdefault(name, {})["opencl"] = best_seconds(
            ours[name], ours["_sync"], args.rounds, args.reps
        )
    if torch is not None:
        for device in devices:
            theirs = torch_steps(args, device, rng)
            for name in STEPS:
                results[name][f"torch-{device}"] = best_seconds(
                    theirs[name], theirs["_sync"], args.rounds, args.reps
                )
    print(f"{'step (fwd+bwd)':<16}" + "".join(f"{k:>14}" for k in results["dense"]) + f"{'ratio':>10}")
    for name, row in results.items():
        peer = min((v for k, v in row.items() if k != "opencl"), default=None)
        ratio = f"{row['opencl'] / peer:>9.2f}x" if peer else f"{'-':>10}"
        print(f"{name:<16}" + "".join(f"{v * 1e3:>12.2f}ms" for v in row.values()) + ratio)
    if args.profile:
        prof_be = Backend(profile=True)
        step = opencl_steps_on(prof_be, args, np.random.default_rng(1))
        step()
        prof_be.synchronize()
        prof_be.runtime.profiler.reset()
        step()
        prof_be.synchronize()
        print(prof_be.runtime.profiler.table())


def opencl_steps_on(be, args, rng) -> Callable[[], None]:
    """The encoder step on a given backend (used for the profiled run)."""
    enc = ComplexEncoderLayer(heads=args.heads, d_ff=4 * args.d_model, dropout=0.0)
    bind(enc, be, (args.channels, args.d_model, 2), rng)
    x = be.asarray(rng.normal(size=(args.batch, args.channels, args.d_model, 2)))
    g = be.asarray(rng.normal(size=(args.batch, args.channels, args.d_model, 2)))
    return lambda: (enc.forward(x, True), enc.backward(g))


if __name__ == "__main__":
    main()
