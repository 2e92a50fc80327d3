"""The OpenCL RBM ops against the float64 reference on awkward sizes, fresh outputs poisoned with NaN.

float32 and float64, and both work-group layouts (the other device kind's runs on this device too).
"""

from __future__ import annotations

import numpy as np
import pytest

from nn.rbm_ops import COSINE, HYPER, LR, MAX_INC, MOMENTUM, RBMOps, RBMState
from nn.rbm_ops_numpy import RBMNumpyOps

AWKWARD = (1, 3, 5, 17, 130)
REF = RBMNumpyOps()


def _backends() -> list:
    try:
        from nn.ops_opencl import OpenCLBackend
        from opencl import memory
    except ImportError as exc:
        pytest.skip(f"no pyopencl: {exc}", allow_module_level=True)

    class Poisoned(OpenCLBackend):
        """Every fresh array is NaN first: the core ops' (``empty``) and the families' (the launcher's)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            fresh = self.launcher.empty
            self.launcher.empty = lambda shape, dtype=None: memory.poison(fresh(shape, dtype))

        def empty(self, shape, dtype=None):
            return memory.poison(super().empty(shape, dtype))

    try:
        out = [Poisoned(dtype=np.float32)]
    except OSError as exc:
        pytest.skip(f"no OpenCL device: {exc}", allow_module_level=True)
    if out[0].runtime.info.fp64:
        out.append(Poisoned(dtype=np.float64))
    out.append(Poisoned(dtype=np.float32, layout="gpu" if out[0]._cpu else "cpu"))
    return out


OCL = _backends()


@pytest.fixture(params=OCL, ids=lambda b: f"{b.dtype.name}-{'cpu' if b._cpu else 'gpu'}")
def ob(request):
    return request.param


def _tol(ob) -> float:
    return 1e-10 if ob.dtype == np.float64 else 2e-5


def _up(ob, a):
    """(device tensor, float64 copy of exactly the device's values)."""
    a = np.asarray(a).astype(ob.dtype).astype(np.float64)
    return ob.asarray(a), a


def _close(ob, got, want, tol=None):
    tol = _tol(ob) if tol is None else tol
    np.testing.assert_allclose(ob.to_numpy(got), want, rtol=tol, atol=tol)


def test_protocol(ob):
    assert isinstance(ob, RBMOps) and isinstance(REF, RBMOps)


@pytest.mark.parametrize("n", AWKWARD)
def test_conditionals(ob, rng, n):
    nv, nh = (n, 17) if n < 17 else (130, n % 7 + 3)
    w, w64 = _up(ob, rng.normal(size=(nh, nv)))
    b, b64 = _up(ob, rng.normal(size=nv))
    c, c64 = _up(ob, rng.normal(size=nh))
    v, v64 = _up(ob, rng.uniform(size=(n, nv)))
    h, h64 = _up(ob, rng.uniform(size=(n, nh)) < 0.5)
    _close(ob, ob.rbm_hidden_probs(v, w, c), REF.rbm_hidden_probs(v64, w64, c64))
    _close(ob, ob.rbm_visible_probs(h, w, b), REF.rbm_visible_probs(h64, w64, b64))


@pytest.mark.parametrize("n", AWKWARD)
def test_sample_bit_for_bit(ob, rng, n):
    p, p64 = _up(ob, rng.uniform(size=(n, 7)))
    got = ob.to_numpy(ob.rbm_sample(p, seed=12345, counter=n))
    np.testing.assert_array_equal(got, REF.rbm_sample(p64, 12345, n))
    assert set(np.unique(got)) <= {0.0, 1.0}
    other = ob.to_numpy(ob.rbm_sample(p, seed=12346, counter=n))
    assert n < 17 or not np.array_equal(got, other)


def test_sample_frequency(ob):
    p, _ = _up(ob, np.full(20000, 0.3))
    assert abs(ob.to_numpy(ob.rbm_sample(p, 7, 0)).mean() - 0.3) < 0.015


@pytest.mark.parametrize("kind", ["mse", "ce"])
@pytest.mark.parametrize("n", AWKWARD)
def test_recon_error_and_max(ob, rng, n, kind):
    x, x64 = _up(ob, rng.uniform(size=(n, 13)))
    p, p64 = _up(ob, rng.uniform(0.01, 0.99, size=(n, 13)))
    want = REF.rbm_recon_error(x64, p64, kind)
    _close(ob, ob.rbm_recon_error(x, p, kind), want, tol=_tol(ob) * max(1.0, want[0]))
    t, t64 = _up(ob, rng.normal(size=(n, 5)))
    _close(ob, ob.rbm_max_abs(t), REF.rbm_max_abs(t64))


def test_recon_error_rejects_unknown_kind(ob, rng):
    x, _ = _up(ob, rng.uniform(size=(3, 3)))
    with pytest.raises(ValueError, match="kind"):
        ob.rbm_recon_error(x, x, "rmse")


@pytest.mark.parametrize(("n", "tries"), [(1, 1), (17, 3), (130, 5)])
def test_try_errors(ob, rng, n, tries):
    nv, nh = 5, 3
    x, x64 = _up(ob, rng.uniform(size=(n, nv)))
    w, w64 = _up(ob, rng.normal(size=(tries, nh, nv)))
    b, b64 = _up(ob, rng.normal(size=(tries, nv)))
    c, c64 = _up(ob, rng.normal(size=(tries, nh)))
    want = REF.rbm_try_errors(x64, w64, b64, c64)
    _close(ob, ob.rbm_try_errors(x, w, b, c), want, tol=_tol(ob) * max(1.0, want.max()))


def _state(make, rng, nh, nv, lr, mom, prev_len2):
    hyper = np.zeros(HYPER)
    hyper[[LR, MOMENTUM, MAX_INC, 3]] = lr, mom, 0.01, prev_len2
    arrays = dict(
        w=rng.normal(size=(nh, nv)),
        b=rng.normal(size=nv),
        c=rng.normal(size=nh),
        w_inc=rng.normal(size=(nh, nv)) * 0.01,
        b_inc=rng.normal(size=nv) * 0.01,
        c_inc=rng.normal(size=nh) * 0.01,
        on_frac=rng.uniform(size=nh),
        g_prev=rng.normal(size=(nh, nv)),
        hyper=hyper,
    )
    arrays["on_frac"][0] = 0.001  # below the saturation floor
    if nh > 1:
        arrays["on_frac"][1] = 0.999
    return RBMState(**{k: make(v) for k, v in arrays.items()})


@pytest.mark.parametrize("prev_len2", [0.0, 2.0])
@pytest.mark.parametrize("n", AWKWARD)
def test_update(ob, rng, n, prev_len2):
    nh, nv = (3, 5) if n < 17 else (17, 130)
    seed = int(rng.integers(1 << 30))
    exact = lambda a: a.astype(ob.dtype).astype(np.float64)  # noqa: E731
    ref = _state(exact, np.random.default_rng(seed), nh, nv, 0.05, 0.5, prev_len2)
    dev = _state(lambda a: ob.asarray(a), np.random.default_rng(seed), nh, nv, 0.05, 0.5, prev_len2)
    batch = {
        k: _up(ob, rng.uniform(size=(n, m)))
        for k, m in (("v1", nv), ("h", nh), ("q1", nh), ("v2", nv), ("q2", nh))
    }
    xm, xm64 = _up(ob, rng.uniform(size=nv))
    kw = dict(weight_penalty=0.01, sparsity_penalty=0.1, sparsity_target=0.2)
    for _ in range(2):  # the second step sees a gradient close to the first: cosine near 1, lr and mu adapt
        ob.rbm_update(dev, *(batch[k][0] for k in ("v1", "h", "q1", "v2", "q2")), xm, **kw)
        REF.rbm_update(ref, *(batch[k][1] for k in ("v1", "h", "q1", "v2", "q2")), xm64, **kw)
    assert ref.hyper[COSINE] > 0.5 and ref.hyper[MOMENTUM] < 0.5
    tol = 1e-9 if ob.dtype == np.float64 else 1e-4
    for name in ("w", "b", "c", "w_inc", "b_inc", "c_inc", "on_frac", "g_prev", "hyper"):
        np.testing.assert_allclose(
            ob.to_numpy(getattr(dev, name)), getattr(ref, name), rtol=tol, atol=tol, err_msg=name
        )


@pytest.mark.parametrize("n", AWKWARD)
def test_head_vector_ops(ob, rng, n):
    """dot, axpby and the bias-free weight penalty (value and gradient) of the supervised head's CG."""
    x, x64 = _up(ob, rng.normal(size=(n, 3)))
    y, y64 = _up(ob, rng.normal(size=(n, 3)))
    mask64 = (rng.uniform(size=(n, 3)) < 0.7).astype(np.float64)
    mask = ob.asarray(mask64)
    scale = _tol(ob) * max(1.0, float(np.abs(x64 * y64).sum()))
    _close(ob, ob.dbn_dot(x, y), REF.dbn_dot(x64, y64), tol=scale)
    _close(ob, ob.dbn_axpby(0.5, x, -2.0, y), REF.dbn_axpby(0.5, x64, -2.0, y64))
    g, g64 = _up(ob, rng.normal(size=(n, 3)))
    want = REF.dbn_weight_penalty(x64, mask64, 0.25, g64)
    _close(ob, ob.dbn_weight_penalty(x, mask, 0.25, g), want, tol=scale)
    _close(ob, g, g64)
    assert want[0] == pytest.approx(0.25 * float((mask64 * x64**2).sum()))
    _close(ob, ob.dbn_weight_penalty(x, mask, 0.25, None), want, tol=scale)


def test_head_vector_ops_refuse_mismatched_shapes(ob):
    a, b = ob.zeros((3,)), ob.zeros((4,))
    with pytest.raises(ValueError, match="differ"):
        ob.dbn_dot(a, b)
    with pytest.raises(ValueError, match="differ"):
        ob.dbn_axpby(1.0, a, 1.0, b)


def test_every_rbm_kernel_is_declared_once_with_its_work_group():
    """rbm.cl's kernels and the family's KERNELS table name the same kernels, each declared once with a
    work-group for both layouts (the launcher's one declaration per kernel)."""
    import re
    from pathlib import Path

    from nn.backend import FAMILIES
    from nn.rbm_ops_opencl import KERNELS

    assert RBMOps in FAMILIES
    source = (Path(__file__).resolve().parents[2] / "opencl" / "kernels" / "rbm.cl").read_text()
    defined = set(re.findall(r"__kernel\s+void\s+(\w+)", source))
    declared = [k.name for k in KERNELS]
    assert sorted(declared) == sorted(defined) and len(set(declared)) == len(declared)
    assert all(k.file == "rbm.cl" and k.cpu and k.gpu for k in KERNELS)
