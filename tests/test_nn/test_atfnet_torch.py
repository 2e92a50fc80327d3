"""ATFNet against an independent PyTorch implementation (real FFTs, torch's own encoder layer, autograd).

The PyTorch model is the one ``benchmarks/atfnet.py`` times; here both run in float64 with the same weights,
so equal outputs and gradients check our whole model (and that the benchmark compares like with like).
"""

from __future__ import annotations

import numpy as np
import pytest

from nn.atfnet import ATFNet
from nn.attention import sinusoid_table
from nn.ops_numpy import NumpyBackend

torch = pytest.importorskip("torch")
bench = pytest.importorskip("benchmarks.atfnet")


RefBackend = NumpyBackend


@pytest.mark.parametrize(("seq", "pred", "channels"), [(32, 8, 1), (33, 10, 3)])
def test_atfnet_matches_pytorch(rng, seq, pred, channels):
    cfg = dict(seq=seq, pred=pred, d_model=8, heads=2, layers=2, d_ff=12, patch=8, stride=4)
    layer = ATFNet(pred, 8, 2, 2, 12, 0.1, patch_len=8, stride=4, fnet_d_model=8, fnet_d_ff=12, fnet_layers=2)
    be = RefBackend()
    layer.build((seq, channels))
    specs = layer.param_specs()
    flat = rng.normal(scale=0.3, size=sum(s.size for s in specs))
    grads_flat = np.zeros_like(flat)
    params, grads, off = {}, {}, 0
    for s in specs:
        params[s.name], grads[s.name] = be.view(flat, off, s.shape), be.view(grads_flat, off, s.shape)
        off += s.size
    layer.bind(be, params, grads, {})
    model = bench.torch_atfnet(cfg, channels)
    for t in [*model.parameters(), *model.buffers()]:  # Module.to(float64) would drop imaginary parts
        t.data = t.data.to(torch.complex128 if t.is_complex() else torch.float64)
    model.pos.data = torch.as_tensor(sinusoid_table(*model.pos.shape))  # the float32 table lacks digits
    bench.copy_weights(model, params)
    model.eval()
    x, target = rng.normal(size=(4, seq, channels)), rng.normal(size=(4, pred, channels))
    y = layer.forward(x, False)
    layer.backward(2.0 * (y - target) / y.size, False)
    yt = model(torch.as_tensor(x))
    torch.nn.functional.mse_loss(yt, torch.as_tensor(target)).backward()
    np.testing.assert_allclose(yt.detach().numpy(), y, rtol=1e-9, atol=1e-10)
    checks = [
        (model.head.weight, "t.0.head.w"),
        (model.t_enc[0].self_attn.in_proj_weight, "t.0.enc0.attn.wqkv"),
        (model.embed.weight, "t.0.embed.w"),
        (model.f_proj.w, "f.0.proj.w"),
        (model.f_enc[0].qkv.w, "f.0.enc0.attn.w_qkv"),
        (model.f_embed.w, "f.0.embed.w"),
    ]
    for param, name in checks:
        g = param.grad.numpy()
        if np.iscomplexobj(g):  # torch: dL/dRe + i dL/dIm, our convention too
            g = np.stack([g.real, g.imag], axis=-1)
        np.testing.assert_allclose(grads[name], g, rtol=1e-7, atol=1e-10, err_msg=name)
