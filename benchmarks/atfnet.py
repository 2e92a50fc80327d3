"""ATFNet training step and inference throughput: this library on OpenCL vs the same model in PyTorch.

Both sides run the identical model (official defaults: d_model 512, 8 heads, 2 layers per block, d_ff 2048,
dropout 0.1, patches 16/8, seq 96, horizon 96, batch 256) in float32: PatchTST T block (RevIN, patching,
bias-free patch embedding, sinusoidal positions, post-norm GELU encoder, final LayerNorm, flatten head),
complex F block (extended DFT, spectrum normalisation, complex embedding, encoder layers with the official
feature-slot attention and modulus softmax, complex LayerNorm, split-ReLU FFN, projection, inverse DFT) and
the harmonic-weight mix. A training step is forward + MSE + backward + Adam; inference is a forward pass
in evaluation mode. Times are the best of ``--rounds`` after a warm-up, device synchronised.

    python -m benchmarks.atfnet                      # CPU: OpenCL CPU device vs torch CPU (reduced size)
    python -m benchmarks.atfnet --size official      # the official size (slow on a small CPU)
    python -m benchmarks.atfnet --device gpu         # OpenCL GPU vs torch CUDA, official size
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable

import numpy as np

from benchmarks._machine import header, opencl_contestant, torch_contestant

SIZES = {
    "official": dict(batch=256, d_model=512, heads=8, layers=2, d_ff=2048),
    "reduced": dict(batch=32, d_model=128, heads=8, layers=2, d_ff=256),
    "tiny": dict(batch=2, d_model=8, heads=2, layers=1, d_ff=16),  # --tiny: checks the benchmark runs
}


def best_seconds(step: Callable[[], None], sync: Callable[[], None], rounds: int) -> float:
    step()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        step()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


# --- this library ------------------------------------------------------------------------------------
def ours(
    cfg: dict, channels: int, rng: np.random.Generator, profile: bool = False
) -> tuple[str, Callable, Callable, Callable]:
    from nn.atfnet import ATFNet
    from nn.model import Sequential
    from nn.ops_opencl import OpenCLBackend

    Backend = OpenCLBackend
    be = Backend(dtype=np.float32, profile=profile)
    d, h, n, f = cfg["d_model"], cfg["heads"], cfg["layers"], cfg["d_ff"]
    layer = ATFNet(
        cfg["pred"], d, h, n, f, 0.1, fnet_d_model=d, fnet_d_ff=f, fnet_layers=n, complex_dropout=0.1
    )
    net = Sequential([layer], (cfg["seq"], channels), "mse", {"type": "adam", "lr": 1e-4}, be, seed=0)
    x = be.asarray(rng.normal(size=(cfg["batch"], cfg["seq"], channels)))
    y = be.asarray(rng.normal(size=(cfg["batch"], cfg["pred"], channels)))

    def train() -> None:
        net._train_step(x, y)

    def infer() -> None:
        net._forward(x, False, len(net.layers))

    return be.name, train, infer, be.synchronize


# --- PyTorch, written for the benchmark with the same maths ------------------------------------------------
def torch_atfnet(cfg: dict, channels: int):
    """The ATFNet of ``cfg`` as a ``torch.nn.Module`` (float32 parameters)."""
    import torch
    from torch import nn

    seq, pred, d, h, layers, dff = (cfg[k] for k in ("seq", "pred", "d_model", "heads", "layers", "d_ff"))
    patch, stride = cfg.get("patch", 16), cfg.get("stride", 8)
    n_total = seq + pred
    bins = n_total // 2 + 1
    n_patches = (seq + stride - patch) // stride + 1

    def sinusoids(length: int) -> torch.Tensor:
        pos = torch.arange(length, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        table = torch.zeros(length, d)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        return table

    class CLinear(nn.Module):
        def __init__(self, i: int, o: int) -> None:
            super().__init__()
            bound = math.sqrt(6.0 / (2 * i + 2 * o))
            self.w = nn.Parameter(
                torch.complex(
                    torch.empty(o, i).uniform_(-bound, bound), torch.empty(o, i).uniform_(-bound, bound)
                )
            )
            self.b = nn.Parameter(torch.zeros(o, dtype=torch.cfloat))

        def forward(self, x):
            return x @ self.w.T + self.b

    class CLayerNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.full((d,), complex(math.sqrt(0.5), math.sqrt(0.5))))
            self.b = nn.Parameter(torch.zeros(d, dtype=torch.cfloat))

        def forward(self, x):
            c = x - x.mean(-1, keepdim=True)
            return c / torch.sqrt((c.abs() ** 2).mean(-1, keepdim=True) + 1e-5) * self.w + self.b

    def cdrop(x, p: float, training: bool):
        if not training:
            return x
        return x * torch.nn.functional.dropout(torch.ones(x.shape, device=x.device), p, True)

    class CEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.out = CLinear(d, 3 * d), CLinear(d, d)
            self.n1, self.n2, self.f1, self.f2 = CLayerNorm(), CLayerNorm(), CLinear(d, dff), CLinear(dff, d)

        def forward(self, x):  # (R, d) complex; heads attend across d/h feature slots
            r = x.shape[0]
            q, k, v = (t.reshape(r, d // h, h) for t in self.qkv(x).chunk(3, dim=-1))
            p = torch.softmax(torch.einsum("rlh,rsh->rhls", q, k).abs(), dim=-1)
            p = torch.nn.functional.dropout(p, 0.1, self.training).to(v.dtype)
            a = self.out(torch.einsum("rhls,rsh->rlh", p, v).reshape(r, d))
            x = self.n1(x + cdrop(a, 0.1, self.training))
            y = torch.complex(torch.relu(self.f1(x).real), torch.relu(self.f1(x).imag))
            y = cdrop(self.f2(cdrop(y, 0.1, self.training)), 0.1, self.training)
            return self.n2(x + y)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(patch, d, bias=False)
            self.register_buffer("pos", sinusoids(n_patches))
            self.t_enc = nn.ModuleList(
                nn.TransformerEncoderLayer(d, h, dff, 0.1, "gelu", batch_first=True) for _ in range(layers)
            )
            self.t_norm, self.head = nn.LayerNorm(d), nn.Linear(d * n_patches, pred)
            self.f_embed, self.f_proj = CLinear(bins, d), CLinear(d, bins)
            self.f_enc = nn.ModuleList(CEncoder() for _ in range(layers))
            self.drop = nn.Dropout(0.1)

        def forward(self, x):  # (B, L, C)
            b = x.shape[0]
            rows = x.permute(0, 2, 1).reshape(b * channels, seq)
            mean, std = (
                rows.mean(1, keepdim=True),
                torch.sqrt(rows.var(1, keepdim=True, unbiased=False) + 1e-5),
            )
            z = torch.cat([(rows - mean) / std, ((rows[:, -1:] - mean) / std).expand(-1, stride)], dim=1)
            t = self.drop(self.embed(z.unfold(1, patch, stride)) + self.pos)
            for enc in self.t_enc:
                t = enc(t)
            t = self.t_norm(t).permute(0, 2, 1).reshape(b * channels, -1)
            y_t = self.drop(self.head(t)) * std + mean
            spec = (
                torch.fft.rfft(torch.cat([rows, torch.zeros(b * channels, pred, device=x.device)], 1))
                / n_total
            )
            s_mean, s_std = spec.mean(1, keepdim=True), torch.sqrt(spec.abs().var(1, keepdim=True) + 1e-10)
            f = cdrop(self.f_embed((spec - s_mean) / s_std), 0.1, self.training)
            for enc in self.f_enc:
                f = enc(f)
            f = self.f_proj(f) * s_std + s_mean
            y_f = torch.fft.irfft(f * n_total, n=n_total)[:, -pred:]
            amp = torch.fft.rfft(rows - mean).abs()
            win = amp.clone()
            win[:, :3], win[:, amp.shape[1] // 3 :] = 0, 0
            k0 = win.argmax(1, keepdim=True)
            energy = sum(amp.gather(1, m * k0) ** 2 for m in (1, 2, 3))
            w = energy / ((amp**2).sum(1, keepdim=True) + 1e-5)
            y = w * y_f + (1 - w) * y_t
            return y.reshape(b, channels, pred).permute(0, 2, 1)

    return Model()


def copy_weights(model, params: dict) -> None:
    """Load this library's ATFNet parameters (``layer.params``, NumPy arrays) into ``torch_atfnet``."""
    import torch

    def real(name):
        return torch.as_tensor(np.asarray(params[name]))

    def cplx(name):
        a = np.asarray(params[name])
        return torch.as_tensor(a[..., 0] + 1j * a[..., 1])

    pairs = [
        (model.embed.weight, real("t.0.embed.w")),
        (model.t_norm.weight, real("t.0.norm.gamma")),
        (model.t_norm.bias, real("t.0.norm.beta")),
        (model.head.weight, real("t.0.head.w")),
        (model.head.bias, real("t.0.head.b")),
        (model.f_embed.w, cplx("f.0.embed.w")),
        (model.f_embed.b, cplx("f.0.embed.b")),
        (model.f_proj.w, cplx("f.0.proj.w")),
        (model.f_proj.b, cplx("f.0.proj.b")),
    ]
    for i, enc in enumerate(model.t_enc):
        p = f"t.0.enc{i}."
        pairs += [
            (enc.self_attn.in_proj_weight, real(p + "attn.wqkv")),
            (enc.self_attn.in_proj_bias, real(p + "attn.bqkv")),
            (enc.self_attn.out_proj.weight, real(p + "attn.wo")),
            (enc.self_attn.out_proj.bias, real(p + "attn.bo")),
            (enc.norm1.weight, real(p + "norm1.gamma")),
            (enc.norm1.bias, real(p + "norm1.beta")),
            (enc.linear1.weight, real(p + "ffn.w1")),
            (enc.linear1.bias, real(p + "ffn.b1")),
            (enc.linear2.weight, real(p + "ffn.w2")),
            (enc.linear2.bias, real(p + "ffn.b2")),
            (enc.norm2.weight, real(p + "norm2.gamma")),
            (enc.norm2.bias, real(p + "norm2.beta")),
        ]
    for i, enc in enumerate(model.f_enc):
        p = f"f.0.enc{i}."
        for mod, name in (
            (enc.qkv, "attn.w_qkv"),
            (enc.out, "attn.w_out"),
            (enc.f1, "ff1.w"),
            (enc.f2, "ff2.w"),
            (enc.n1, "norm1.w"),
            (enc.n2, "norm2.w"),
        ):
            pairs.append((mod.w, cplx(p + name)))
            pairs.append((mod.b, cplx(p + name.replace("w_", "b_").replace(".w", ".b"))))
    with torch.no_grad():
        for target, value in pairs:
            if tuple(target.shape) != tuple(value.shape):
                raise ValueError(f"shape mismatch {tuple(target.shape)} vs {tuple(value.shape)}")
            target.copy_(value.to(target.dtype))


def theirs(cfg: dict, channels: int, device: str) -> tuple[Callable, Callable, Callable]:
    import torch

    model = torch_atfnet(cfg, channels).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(cfg["batch"], cfg["seq"], channels, device=device)
    y = torch.randn(cfg["batch"], cfg["pred"], channels, device=device)

    def train() -> None:
        model.train()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    def infer() -> None:
        model.eval()
        with torch.no_grad():
            model(x)

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return train, infer, sync


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument(
        "--size", choices=tuple(SIZES), default=None, help="default: official on gpu, reduced on cpu"
    )
    ap.add_argument("--channels", type=int, nargs="+", default=[1, 7])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--profile", action="store_true", help="per-kernel device time of one OpenCL train step")
    ap.add_argument("--tiny", action="store_true", help="toy sizes: checks the benchmark runs")
    args = ap.parse_args(argv)
    size = "tiny" if args.tiny else args.size or ("official" if args.device == "gpu" else "reduced")
    cfg = dict(SIZES[size], seq=24 if args.tiny else 96, pred=8 if args.tiny else 96)
    if args.tiny:
        args.channels, args.rounds = [1], 1
    if args.device == "gpu":
        os.environ.setdefault("NEURONET_DEVICE", "gpu")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    tdev = "cuda" if args.device == "gpu" else "cpu"
    rng = np.random.default_rng(0)
    peer = f"torch {torch.__version__} on {tdev}" if torch else "PyTorch not installed: peer skipped"
    from opencl import get_runtime

    header(
        [
            opencl_contestant(get_runtime(None, np.float32)),
            *([torch_contestant(torch, tdev)] if torch else []),
        ]
    )
    print(f"ATFNet {size} size: {cfg}, float32, dropout 0.1, Adam; {peer}")
    print(f"{'channels':>8} {'side':>8} {'train step ms':>14} {'infer ms':>10} {'samples/s':>10}")
    for c in args.channels:
        if args.profile:
            _, train, _, sync = ours(cfg, c, rng, profile=True)
            train()
            sync()
            from opencl import get_runtime

            rt = get_runtime(None, np.float32, True)
            rt.profiler.reset()
            train()
            sync()
            print(f"one training step, {c} channel(s):\n{rt.profiler.table()}")
            continue
        name, o_train, o_infer, o_sync = ours(cfg, c, rng)
        sides = {"opencl": (o_train, o_infer, o_sync)}
        if torch is not None:
            sides["torch"] = theirs(cfg, c, tdev)
        res = {}
        for side, (train, infer, sync) in sides.items():
            res[side] = (best_seconds(train, sync, args.rounds), best_seconds(infer, sync, args.rounds))
            tr, inf = res[side]
            print(f"{c:>8} {side:>8} {tr * 1e3:>14.1f} {inf * 1e3:>10.1f} {cfg['batch'] / inf:>10.0f}")
        if torch is None:
            continue
        ratio_train = res["opencl"][0] / res["torch"][0]
        ratio_infer = res["opencl"][1] / res["torch"][1]
        print(f"{c:>8} {'ratio':>8} {ratio_train:>13.2f}x {ratio_infer:>9.2f}x  (OpenCL / torch; {name})")


if __name__ == "__main__":
    main()
