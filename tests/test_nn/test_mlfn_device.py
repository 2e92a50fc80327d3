"""The supervised head's criterion on the backend (nn.mlfn_device) against the float64 host reference
(nn.mlfn.criterion), and conjugate gradients run on the device against CG on the host."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nn
from nn.cg import conjugate_gradient
from nn.mlfn import Net, criterion
from nn.mlfn_device import BackendSpace, DeviceCriterion


def _backends() -> list:
    out = [("numpy", nn.get_backend("numpy"))]
    try:
        from nn.ops_opencl import OpenCLBackend

        f32 = OpenCLBackend(dtype=np.float32)
    except (ImportError, OSError, ValueError):
        return out
    out.append(("opencl-float32", f32))
    if f32.runtime.info.fp64:
        out.append(("opencl-float64", OpenCLBackend(dtype=np.float64)))
    return out


BACKENDS = _backends()


@pytest.fixture(params=BACKENDS, ids=[name for name, _ in BACKENDS])
def be(request):
    return request.param[1]


def _tol(be) -> float:
    return 1e-10 if be.dtype == np.float64 else 2e-4


def _net(rng, sizes, classifier):
    layers = [(rng.normal(size=(o, i)), rng.normal(size=o)) for i, o in itertools.pairwise(sizes)]
    return Net(layers, classifier)


@pytest.mark.parametrize("classifier", [True, False])
@pytest.mark.parametrize("sizes", [(3, 2), (5, 4, 3), (17, 9, 7, 4)])
@pytest.mark.parametrize("n", [1, 7, 130])
def test_criterion_and_gradient_match_the_reference(be, rng, classifier, sizes, n):
    net = _net(rng, sizes, classifier)
    x = rng.uniform(size=(n, sizes[0])).astype(be.dtype).astype(np.float64)
    k = sizes[-1]
    t = np.eye(k)[rng.integers(0, k, n)] if classifier else rng.uniform(size=(n, k))
    theta = net.flat().astype(be.dtype).astype(np.float64)
    net.set_flat(theta)
    want, want_g = criterion(net, x, t, 0.7)
    crit = DeviceCriterion(be, net, x, t, 0.7)
    dev = crit.to_device(theta)
    np.testing.assert_array_equal(crit.to_host(dev), theta)
    got, got_g = crit.value_grad(dev)
    tol = _tol(be)
    assert got == pytest.approx(want, rel=tol, abs=tol)
    assert crit.value(dev) == pytest.approx(want, rel=tol, abs=tol)
    np.testing.assert_allclose(crit.to_host(got_g), want_g, rtol=tol, atol=tol * np.abs(want_g).max())
    pads = np.ones(crit.size, dtype=bool)
    pads[crit._index] = False
    assert not be.to_numpy(got_g)[pads].any()  # padding between blocks stays zero


def test_forced_classifier_uses_the_largest_target(be, rng):
    """Continuous targets, classifier: the true class is each row's argmax (spec §1.2), as the reference."""
    net = _net(rng, (4, 3), True)
    x, t = rng.uniform(size=(9, 4)), rng.uniform(-1, 1, size=(9, 3))
    crit = DeviceCriterion(be, net, x, t, 0.0)
    assert crit.value(crit.to_device(net.flat())) == pytest.approx(
        criterion(net, x, t, 0.0, grad=False), rel=_tol(be), abs=_tol(be)
    )


def test_mismatched_data_is_refused(be):
    net = Net([(np.zeros((2, 3)), np.zeros(2))], True)
    with pytest.raises(ValueError, match="do not fit"):
        DeviceCriterion(be, net, np.zeros((4, 5)), np.zeros((4, 2)), 0.0)


@pytest.mark.parametrize("classifier", [True, False])
def test_cg_on_the_device_reaches_the_host_minimum(be, rng, classifier, monkeypatch):
    """Same problem, same start: CG with device tensors (BackendSpace, scalars only back to the host) ends
    at the criterion and weights of CG on host float64 vectors with the reference criterion. The problem is
    convex (no hidden layer, penalised), so the minimum is unique."""
    net = _net(rng, (6, 3), classifier)
    x = rng.uniform(size=(80, 6))
    t = np.eye(3)[(x[:, :3] + 0.3 * x[:, 3:]).argmax(1)] if classifier else np.tanh(x[:, :3] - x[:, 3:])
    start = 0.1 * rng.normal(size=net.n_weights)

    def fg(theta):
        net.set_flat(theta)
        return criterion(net, x, t, 0.01)

    host = conjugate_gradient(fg, start, max_iter=2000, tol=1e-12)
    crit = DeviceCriterion(be, net, x, t, 0.01)
    theta = crit.to_device(start)
    reads = []
    to_numpy = be.to_numpy
    monkeypatch.setattr(be, "to_numpy", lambda a: reads.append(a.size) or to_numpy(a))
    dev = conjugate_gradient(
        crit.value_grad, theta, max_iter=2000, tol=1e-12, f=crit.value, space=BackendSpace(be)
    )
    monkeypatch.undo()
    assert reads and max(reads) == 1  # only scalars came back to the host
    assert not isinstance(dev.x, np.ndarray) or be.name == "numpy"
    assert dev.points == [] or be.name == "numpy"
    loose = be.dtype != np.float64
    assert host.iterations < 2000
    assert dev.value == pytest.approx(host.value, rel=2e-3 if loose else 1e-7)
    net.set_flat(crit.to_host(dev.x))
    assert criterion(net, x, t, 0.01, grad=False) == pytest.approx(host.value, rel=2e-3 if loose else 1e-7)
    if not loose:
        np.testing.assert_allclose(crit.to_host(dev.x), host.x, atol=1e-4)
