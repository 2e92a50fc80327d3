"""The fused batch-1 epoch (nn.online_opencl, one launch per epoch on NVIDIA GPUs) trains exactly like the
step-by-step path: same weights, Adam moments and loss after an epoch, up to float32 summation order."""

from __future__ import annotations

import numpy as np
import pytest

from nn import Sequential
from opencl import NoDeviceError, list_devices
from opencl.device import probe

try:
    NVIDIA = [d for d in list_devices()
              if d.kind == "gpu" and "nvidia" in d.platform.lower() and probe(d) is None]
except NoDeviceError:
    NVIDIA = []


def _model(specs, loss, optimizer, device, fused_online=True):
    from nn.ops_opencl import OpenCLBackend

    backend = OpenCLBackend(device, np.float32, fused_online=fused_online)
    return Sequential.from_specs(specs, (17,), loss=loss, optimizer=optimizer, backend=backend, seed=3)


CASES = {
    "cce-tanh": ([{"type": "dense", "units": 40, "activation": "tanh"},
                  {"type": "dense", "units": 13, "activation": "relu"},
                  {"type": "dense", "units": 3, "activation": "softmax"}], "cce",
                 {"type": "adam", "lr": 1e-3}),
    "mse-sigmoid-l1l2": ([{"type": "dense", "units": 33, "activation": "lrelu"},
                          {"type": "dense", "units": 5, "activation": "sigmoid"}], "mse",
                         {"type": "adam", "lr": 3e-3, "l1": 1e-4, "l2": 1e-3}),
    "cce-one-layer": ([{"type": "dense", "units": 3, "activation": "softmax"}], "cce",
                      {"type": "adam", "lr": 1e-2}),
    "cce-five-layers": ([*({"type": "dense", "units": u, "activation": "tanh"} for u in (70, 9, 40, 5)),
                         {"type": "dense", "units": 3, "activation": "softmax"}], "cce",
                        {"type": "adam", "lr": 1e-3, "schedule": {"type": "exponential", "rate": 0.5}}),
    # Wide layers: several warps' worth of neurons per work-group and many groups per backward phase.
    "cce-wide": ([{"type": "dense", "units": 2000, "activation": "tanh"},
                           {"type": "dense", "units": 20, "activation": "sigmoid"},
                           {"type": "dense", "units": 9, "activation": "relu"},
                           {"type": "dense", "units": 3, "activation": "softmax"}], "cce",
                          {"type": "adam", "lr": 1e-3}),
    "mse-small-big-small": ([{"type": "dense", "units": 300, "activation": "tanh"},
                             {"type": "dense", "units": 200, "activation": "lrelu"},
                             {"type": "dense", "units": 5, "activation": "linear"}], "mse",
                            {"type": "adam", "lr": 1e-3, "l2": 1e-3}),
}



@pytest.mark.skipif(not NVIDIA, reason="the fused online epoch runs on NVIDIA OpenCL GPUs only")
@pytest.mark.parametrize("case", list(CASES))
def test_fused_epoch_matches_step_by_step(case):
    specs, loss, opt = CASES[case]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(301, 17))
    y = np.eye(3)[rng.integers(0, 3, 301)] if loss == "cce" else rng.uniform(size=(301, 5))
    assert specs[-1]["units"] == y.shape[1]
    fused = _model(specs, loss, opt, NVIDIA[0])
    h_fused = fused.fit(x, y, epochs=2, batch_size=1, seed=5, progress=False)
    from nn.online_opencl import OnlineEpoch

    assert isinstance(fused._online, OnlineEpoch)
    steps = _model(specs, loss, opt, NVIDIA[0], fused_online=False)
    h_steps = steps.fit(x, y, epochs=2, batch_size=1, seed=5, progress=False)
    assert steps._online is None
    be = fused.backend
    for a, b in [(fused.params, steps.params),
                 *zip(fused.optimizer_slots, steps.optimizer_slots, strict=True)]:
        np.testing.assert_allclose(be.to_numpy(a), be.to_numpy(b), rtol=2e-3, atol=2e-5)
    for rf, rs in zip(h_fused.epochs, h_steps.epochs, strict=True):
        assert rf.loss == pytest.approx(rs.loss, rel=1e-4)
    assert fused.optimizer.iterations == steps.optimizer.iterations == 602
    np.testing.assert_allclose(fused.predict(x[:7]), steps.predict(x[:7]), rtol=1e-3, atol=1e-5)


def test_fused_epoch_applies_only_where_it_computes_the_same():
    """NumPy backend, CPU devices, other layers, losses or optimizers: the step-by-step path."""
    specs, loss, opt = CASES["cce-tanh"]
    model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend="numpy")
    assert model.backend.online_epoch(model) is None
    if NVIDIA:
        from nn.ops_opencl import OpenCLBackend

        gpu = OpenCLBackend(NVIDIA[0], np.float32)
        for other in ({"type": "sgd", "lr": 0.1}, {"type": "adam", "clipnorm": 1.0}):
            model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=other, backend=gpu)
            assert model.backend.online_epoch(model) is None
        dropout = [specs[0], {"type": "dropout", "rate": 0.1}, *specs[1:]]
        model = Sequential.from_specs(dropout, (17,), loss=loss, optimizer=opt, backend=gpu)
        assert model.backend.online_epoch(model) is None
        model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend=gpu)
        assert model.backend.online_epoch(model) is not None
