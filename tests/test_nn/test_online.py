"""The fused batch-1 epoch (nn.online_opencl, one launch per epoch on NVIDIA GPUs) trains exactly like the
step-by-step path: same weights, Adam moments and loss after an epoch, up to float32 summation order."""

from __future__ import annotations

import numpy as np
import pytest

from nn import Sequential
from nn.dense_stack import AdamStep, DenseLayerSpec, DenseStack
from opencl import NoDeviceError, list_devices
from opencl.selfcheck import verdict

try:
    NVIDIA = [
        d for d in list_devices() if d.kind == "gpu" and "nvidia" in d.platform.lower() and verdict(d).usable
    ]
except NoDeviceError:
    NVIDIA = []


def _model(specs, loss, optimizer, device, fused_online=True):
    from nn.ops_opencl import OpenCLBackend

    backend = OpenCLBackend(device, np.float32, fused_online=fused_online)
    return Sequential.from_specs(specs, (17,), loss=loss, optimizer=optimizer, backend=backend, seed=3)


CASES = {
    "cce-tanh": (
        [
            {"type": "dense", "units": 40, "activation": "tanh"},
            {"type": "dense", "units": 13, "activation": "relu"},
            {"type": "dense", "units": 3, "activation": "softmax"},
        ],
        "cce",
        {"type": "adam", "lr": 1e-3},
    ),
    "mse-sigmoid-l1l2": (
        [
            {"type": "dense", "units": 33, "activation": "lrelu"},
            {"type": "dense", "units": 5, "activation": "sigmoid"},
        ],
        "mse",
        {"type": "adam", "lr": 3e-3, "l1": 1e-4, "l2": 1e-3},
    ),
    "cce-one-layer": (
        [{"type": "dense", "units": 3, "activation": "softmax"}],
        "cce",
        {"type": "adam", "lr": 1e-2},
    ),
    "cce-five-layers": (
        [
            *({"type": "dense", "units": u, "activation": "tanh"} for u in (70, 9, 40, 5)),
            {"type": "dense", "units": 3, "activation": "softmax"},
        ],
        "cce",
        {"type": "adam", "lr": 1e-3, "schedule": {"type": "exponential", "rate": 0.5}},
    ),
    # Wide layers: several warps' worth of neurons per work-group and many groups per backward phase.
    "cce-wide": (
        [
            {"type": "dense", "units": 2000, "activation": "tanh"},
            {"type": "dense", "units": 20, "activation": "sigmoid"},
            {"type": "dense", "units": 9, "activation": "relu"},
            {"type": "dense", "units": 3, "activation": "softmax"},
        ],
        "cce",
        {"type": "adam", "lr": 1e-3},
    ),
    "mse-small-big-small": (
        [
            {"type": "dense", "units": 300, "activation": "tanh"},
            {"type": "dense", "units": 200, "activation": "lrelu"},
            {"type": "dense", "units": 5, "activation": "linear"},
        ],
        "mse",
        {"type": "adam", "lr": 1e-3, "l2": 1e-3},
    ),
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
    for a, b in [
        (fused.params, steps.params),
        *zip(fused.optimizer_slots, steps.optimizer_slots, strict=True),
    ]:
        np.testing.assert_allclose(be.to_numpy(a), be.to_numpy(b), rtol=2e-3, atol=2e-5)
    for rf, rs in zip(h_fused.epochs, h_steps.epochs, strict=True):
        assert rf.loss == pytest.approx(rs.loss, rel=1e-4)
    assert fused.optimizer.iterations == steps.optimizer.iterations == 602
    np.testing.assert_allclose(fused.predict(x[:7]), steps.predict(x[:7]), rtol=1e-3, atol=1e-5)


def test_fused_epoch_applies_only_where_it_computes_the_same():
    """NumPy backend, CPU devices, other layers, losses or optimizers: the step-by-step path."""
    specs, loss, opt = CASES["cce-tanh"]
    model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend="numpy")
    assert model._online_epoch([]) is None
    if NVIDIA:
        from nn.ops_opencl import OpenCLBackend

        gpu = OpenCLBackend(NVIDIA[0], np.float32)
        for other in ({"type": "sgd", "lr": 0.1}, {"type": "adam", "clipnorm": 1.0}):
            model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=other, backend=gpu)
            assert model._online_epoch([]) is None
        dropout = [specs[0], {"type": "dropout", "rate": 0.1}, *specs[1:]]
        model = Sequential.from_specs(dropout, (17,), loss=loss, optimizer=opt, backend=gpu)
        assert model._online_epoch([]) is None
        model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend=gpu)
        assert model._online_epoch([]) is not None


def test_the_model_describes_itself_to_the_fused_epoch_in_plain_numbers():
    """What the op layer gets instead of the model: each dense layer's place in the flat parameters, its
    sizes and activation, and the loss on the logits (the softmax the cross-entropy skips left out)."""
    specs, loss, opt = CASES["mse-sigmoid-l1l2"]
    model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend="numpy")
    stack = model._dense_stack()
    assert stack == DenseStack(
        (
            DenseLayerSpec(
                model.param_offset(0, "w"), model.param_offset(0, "b"), 17, 33, "lrelu", 0.01, 0.0
            ),
            DenseLayerSpec(
                model.param_offset(1, "w"), model.param_offset(1, "b"), 33, 5, "sigmoid", 1.0, 0.0
            ),
        ),
        "mse",
    )
    specs, loss, opt = CASES["cce-tanh"]
    model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend="numpy")
    stack = model._dense_stack()
    assert stack.loss == "softmax_cce" and [ly.units for ly in stack.layers] == [40, 13, 3]
    assert stack.layers[-1].activation == "linear"  # the logits: the softmax is the loss's
    model.optimizer.begin_epoch(0)
    model.optimizer.iterations = 7
    assert model._adam_step() == AdamStep(1e-3, 0.9, 0.999, 1e-8, 0.0, 0.0, 7)


@pytest.mark.parametrize(
    "change",
    [
        {"optimizer": {"type": "sgd", "lr": 0.1}},
        {"optimizer": {"type": "adam", "clipnorm": 1.0}},
        {"loss": "mae"},
        {"layers": [{"type": "dense", "units": 40, "activation": "swish"}]},
        {"layers": [{"type": "dense", "units": 40, "activation": "tanh"}, {"type": "dropout", "rate": 0.1}]},
        {"layers": [{"type": "batchnorm"}]},
    ],
    ids=["sgd", "clipnorm", "mae", "swish", "dropout", "batchnorm"],
)
def test_models_the_fused_epoch_does_not_compute_are_not_described(change):
    specs, loss, opt = CASES["mse-sigmoid-l1l2"]
    specs = [*change.get("layers", []), *specs]
    model = Sequential.from_specs(specs, (17,), loss=change.get("loss", loss),
                                  optimizer=change.get("optimizer", opt), backend="numpy")  # fmt: skip
    assert model._dense_stack() is None


def test_a_cpu_device_has_no_fused_epoch():
    """The kernel's grid-wide barrier needs NVIDIA's resident work-groups: CPU devices train step by step."""
    from opencl import get_runtime

    try:
        rt = get_runtime("cpu")
    except (NoDeviceError, OSError, ValueError) as exc:
        pytest.skip(f"no OpenCL CPU device: {exc}")
    from nn.ops_opencl import OpenCLBackend

    specs, loss, opt = CASES["cce-tanh"]
    model = Sequential.from_specs(specs, (17,), loss=loss, optimizer=opt, backend=OpenCLBackend(rt.info))
    assert model._dense_stack() is not None and model._online_epoch([]) is None
