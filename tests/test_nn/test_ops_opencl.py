"""Every OpenCL op against the float64 NumPy reference, forward and backward, in float32 and float64.

Inputs are random and non-zero, sizes awkward (1, 3, 5, 17, 130: not multiples of a vector width or a
work-group size). Outputs are poisoned with NaN before each run: caller-given outputs directly, fresh
outputs by filling and releasing pool blocks of the output sizes first, so that an element a kernel never
writes shows up as NaN. float32 tolerances grow with the length of the reduction behind an element; float64
ones are tight. The whole module skips when no OpenCL device exists.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nn.backend import ACTIVATIONS, Activation
from nn.ops_numpy import NumpyBackend

AWKWARD = (1, 3, 5, 17, 130)


def _opencl_backends() -> list:
    try:
        from nn.ops_opencl import OpenCLBackend

        out = [OpenCLBackend(dtype=np.float32)]
    except (ImportError, OSError) as exc:  # no pyopencl, no platform, no usable device
        pytest.skip(f"no OpenCL device: {exc}", allow_module_level=True)
    if out[0].runtime.info.fp64:
        out.append(OpenCLBackend(dtype=np.float64))
    # The other device kind's work-group layout (CPU: vector items and row loops; GPU: local-memory
    # reductions), so both sets of kernels are checked on whatever device this machine has.
    other = "gpu" if out[0]._cpu else "cpu"
    out.append(OpenCLBackend(dtype=np.float32, layout=other))
    return out


OCL = _opencl_backends()
REF = NumpyBackend()


@pytest.fixture(params=OCL, ids=lambda b: f"{b.dtype.name}-{'cpu' if b._cpu else 'gpu'}")
def ob(request):
    return request.param


def _data(ob, rng, shape, low=None, high=None):
    """(device tensor, float64 copy of exactly the values the device holds)."""
    if low is None:
        a = rng.standard_normal(shape)
        a[np.abs(a) < 1e-3] = 0.5  # non-zero inputs
    else:
        a = rng.uniform(low, high, shape)
    a = a.astype(ob.dtype).astype(np.float64)
    return ob.asarray(a), a


def _poison(ob, t) -> None:
    ob.fill_(t, float("nan"))


def _poison_pool(ob, *shapes, copies: int = 4) -> None:
    """Fill pool blocks of these shapes with NaN and release them: fresh outputs reuse them."""
    held = [ob.empty(s) for s in shapes for _ in range(copies)]
    for t in held:
        if t.size:
            _poison(ob, t)
    ob.synchronize()
    del held


def _check(ob, out, ref, k: int = 1, what: str = "") -> None:
    """Compare within a few ulps, times the square root of the length ``k`` of the reduction behind each
    element (rounding errors of a sum add up like a random walk), relative to the largest value."""
    got = ob.to_numpy(out).astype(np.float64) if not isinstance(out, np.ndarray) else out
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, what
    assert np.isfinite(got).all(), f"{what}: unwritten (NaN) or non-finite elements"
    eps = np.finfo(ob.dtype).eps
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(
        got, ref, rtol=16 * eps * math.sqrt(k + 1), atol=16 * eps * (k + 1) * scale, err_msg=what
    )


def test_pool_poisoning_reaches_fresh_outputs(ob):
    """The poisoning helper must really hand NaN blocks to the next allocation, or tests would be weak."""
    _poison_pool(ob, (17, 5))
    assert np.isnan(ob.to_numpy(ob.empty((17, 5)))).all()


# --- memory -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", AWKWARD)
def test_memory_ops(ob, rng, n):
    x, xh = _data(ob, rng, (n, 3))
    assert ob.to_numpy(x).dtype == ob.dtype
    np.testing.assert_array_equal(ob.to_numpy(x), xh)
    z = ob.zeros((n, 3))
    np.testing.assert_array_equal(ob.to_numpy(z), 0)
    ob.fill_(z, 2.5)
    np.testing.assert_array_equal(ob.to_numpy(z), 2.5)
    ob.add_(z, x)
    _check(ob, z, xh + 2.5)
    y = ob.empty((n, 3))
    _poison(ob, y)
    ob.copy_(y, x)
    np.testing.assert_array_equal(ob.to_numpy(y), xh)
    a, ah = _data(ob, rng, (n, 3))
    _poison_pool(ob, (n, 3))
    _check(ob, ob.mul(a, x), ah * xh)


def test_backend_protocol(ob):
    from nn.backend import Backend

    assert isinstance(ob, Backend)
    assert ob.name.startswith("opencl:")
    assert ob.alignment >= 1


def test_views_of_a_flat_buffer(ob, rng):
    al = ob.alignment
    flat, fh = _data(ob, rng, (3 * al + 17,))
    v = ob.view(flat, 2 * al, (5, 3))
    np.testing.assert_array_equal(ob.to_numpy(v), fh[2 * al : 2 * al + 15].reshape(5, 3))
    ob.fill_(v, 1.0)  # writes through the view only
    fh[2 * al : 2 * al + 15] = 1.0
    np.testing.assert_array_equal(ob.to_numpy(flat), fh)
    with pytest.raises(ValueError):
        ob.view(flat, 1, (2,)) if al > 1 else ob.view(flat, 3 * al + 17, (2,))


@pytest.mark.parametrize(("n", "f", "b"), [(1, 1, 1), (5, 3, 17), (130, 17, 130), (17, 130, 5)])
def test_gather_rows(ob, rng, n, f, b):
    src, sh = _data(ob, rng, (n, f))
    rows = rng.integers(0, n, b).astype(np.int32)
    _poison_pool(ob, (b, f))
    out = ob.gather_rows(src, ob.asarray(rows))
    np.testing.assert_array_equal(ob.to_numpy(out), sh[rows])


# --- dense --------------------------------------------------------------------------------------------
# Batches of 1-4 rows take the matrix-vector kernels, larger ones the GEMM.
# Online-training shapes (batch 1-4, layer sizes of the epoch benchmark and awkward ones) on both layouts.
DENSE_SHAPES = [
    (1, 1, 1),
    (1, 130, 17),
    (3, 5, 17),
    (4, 17, 3),
    (5, 130, 130),
    (17, 130, 3),
    (130, 17, 5),
    (130, 3, 1),
    (1, 240, 500),
    (2, 500, 250),
    (3, 250, 125),
    (4, 125, 62),
    (1, 62, 3),
    (1, 3, 500),
    (2, 500, 1),
    (4, 17, 130),
    (3, 1, 5),
]
FUSABLE = [
    Activation("linear", 0.7, -0.2),
    Activation("sigmoid"),
    Activation("tanh"),
    Activation("relu"),
    Activation("lrelu", 0.1),
]


@pytest.mark.parametrize("act", FUSABLE, ids=lambda a: a.kind)
@pytest.mark.parametrize(("b", "i", "o"), DENSE_SHAPES)
def test_dense(ob, rng, act, b, i, o):
    x, xh = _data(ob, rng, (b, i))
    w, wh = _data(ob, rng, (o, i))
    bias, bh = _data(ob, rng, (o,))
    _poison_pool(ob, (b, o))
    y = ob.dense_forward(x, w, bias, act)
    yr = REF.dense_forward(xh, wh, bh, act)
    _check(ob, y, yr, k=i, what="forward")
    yh = ob.to_numpy(y).astype(np.float64)  # the backward pass sees the device's own y
    gy, gyh = _data(ob, rng, (b, o))
    gwr, gbr = np.zeros((o, i)), np.zeros(o)
    gxr = REF.dense_backward(xh, wh, yh, gyh, act, gwr, gbr, True)
    for need in (True, False):
        gw, gb = ob.empty((o, i)), ob.empty((o,))
        _poison(ob, gw)
        _poison(ob, gb)
        _poison_pool(ob, (b, o), (b, i))
        gx = ob.dense_backward(x, w, y, gy, act, gw, gb, need)
        _check(ob, gw, gwr, k=b, what="weight gradient")
        _check(ob, gb, gbr, k=b, what="bias gradient")
        if need:
            _check(ob, gx, gxr, k=o, what="input gradient")
        else:
            assert gx is None


def test_dense_rejects_unfusable_activation(ob, rng):
    x, _ = _data(ob, rng, (3, 5))
    w, _ = _data(ob, rng, (2, 5))
    b, _ = _data(ob, rng, (2,))
    with pytest.raises(ValueError, match="gelu"):
        ob.dense_forward(x, w, b, Activation("gelu"))


# --- activations and softmax --------------------------------------------------------------------------
ALL_ACTS = [Activation(k) for k in ACTIVATIONS] + [
    Activation("linear", 1.5, 0.25),
    Activation("lrelu", 0.2),
    Activation("swish", 1.7),
]


@pytest.mark.parametrize("act", ALL_ACTS, ids=lambda a: f"{a.kind}-{a.alpha}")
@pytest.mark.parametrize("shape", [(1,), (3, 5), (17, 130)])
def test_activation(ob, rng, act, shape):
    x, xh = _data(ob, rng, shape)
    xh_big = xh * 4  # reaches the saturated regions
    x = ob.asarray(xh_big)
    _poison_pool(ob, shape)
    y = ob.activation_forward(x, act)
    _check(ob, y, REF.activation_forward(xh_big, act), k=4, what="forward")
    gy, gyh = _data(ob, rng, shape)
    _poison_pool(ob, shape)
    yh = ob.to_numpy(y).astype(np.float64)
    gx = ob.activation_backward(x, y, gy, act)
    _check(ob, gx, REF.activation_backward(xh_big, yh, gyh, act), k=4, what="backward")


@pytest.mark.parametrize(("b", "c"), [(1, 1), (3, 5), (17, 130), (130, 3)])
def test_softmax(ob, rng, b, c):
    x, xh = _data(ob, rng, (b, c))
    xh = xh * 2
    xh[0] *= 100  # large logits: an unshifted exp would overflow in float32
    x = ob.asarray(xh)
    _poison_pool(ob, (b, c))
    y = ob.softmax_forward(x)
    _check(ob, y, REF.softmax_forward(xh), k=c, what="forward")
    yh = ob.to_numpy(y).astype(np.float64)
    gy, gyh = _data(ob, rng, (b, c))
    _poison_pool(ob, (b, c))
    _check(ob, ob.softmax_backward(y, gy), REF.softmax_backward(yh, gyh), k=c, what="backward")


# --- dropout ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (3, 5), (17, 130), (130, 17, 3)])
@pytest.mark.parametrize(("rate", "seed", "counter"), [(0.0, 0, 0), (0.3, 7, 1), (0.5, 2**31 + 5, 2**32 - 1)])
def test_dropout_mask_matches_the_reference_bit_for_bit(ob, shape, rate, seed, counter):
    _poison_pool(ob, shape)
    mask = ob.to_numpy(ob.dropout_mask(shape, rate, seed, counter))
    ref = REF.dropout_mask(shape, rate, seed, counter)
    np.testing.assert_array_equal(mask == 0, ref == 0)
    _check(ob, mask, ref)


@pytest.mark.parametrize(
    ("shape", "pairs"), [((1,), False), ((17, 130), False), ((3, 5, 2), True), ((130, 17, 2), True)]
)
@pytest.mark.parametrize(("rate", "seed", "counter"), [(0.0, 0, 0), (0.3, 7, 1), (0.5, 2**31 + 5, 2**32 - 1)])
def test_dropout_apply_is_the_mask_times_x_bit_for_bit(ob, rng, shape, pairs, rate, seed, counter):
    """One pass gives the mask ``dropout_mask`` draws (one per complex pair with ``pairs``) and exactly
    ``x`` times it, as the reference does."""
    x, xh = _data(ob, rng, shape)
    mshape = shape[:-1] if pairs else shape
    _poison_pool(ob, shape, mshape)
    y, mask = ob.dropout_apply(x, rate, seed, counter, pairs)
    ry, rmask = REF.dropout_apply(xh, rate, seed, counter, pairs)
    drawn = ob.dropout_mask(mshape, rate, seed, counter)
    np.testing.assert_array_equal(ob.to_numpy(mask), ob.to_numpy(drawn))
    np.testing.assert_array_equal(ob.to_numpy(mask) == 0, rmask == 0)
    want = ob.to_numpy(x) * (ob.to_numpy(mask)[..., None] if pairs else ob.to_numpy(mask))
    np.testing.assert_array_equal(ob.to_numpy(y), want)  # the product in the device's precision, exactly
    _check(ob, y, ry)


def test_dropout_apply_refuses_pairs_of_a_real_tensor(ob, rng):
    x, xh = _data(ob, rng, (3, 5))
    for backend, t in ((ob, x), (REF, xh)):
        with pytest.raises(ValueError, match="pairs=True needs a complex"):
            backend.dropout_apply(t, 0.1, 0, 1, True)
    with pytest.raises(ValueError, match="rate"):
        ob.dropout_apply(x, 1.0, 0, 1)
    y, mask = ob.dropout_apply(ob.empty((0, 2)), 0.5, 0, 1, True)  # nothing to draw: no launch
    assert (y.shape, mask.shape) == ((0, 2), (0,))


def test_dropout_refuses_more_elements_than_the_kernels_index_before_allocating(ob):
    """The kernels count elements in a signed 32-bit int: 2^31 of them used to pass the check (which allowed
    up to 2^32), then the launch failed deep in OpenCL after the arrays were allocated. Now one clear line,
    and nothing is allocated first (a 2^31-element float64 mask would be 16 GiB)."""
    from nn.ops_opencl import _dropout_args
    from opencl.errors import ShapeError

    assert _dropout_args(2**31 - 1, 0.5, 0, 1)[0] == 2**31 - 1
    for shape in ((2**31,), (2**16, 2**15), (2**20, 2**20)):
        with pytest.raises(ShapeError, match="32-bit signed index"):
            ob.dropout_mask(shape, 0.5, 0, 1)
    with pytest.raises(ValueError, match="rate"):
        ob.dropout_mask((2**40,), 1.0, 0, 1)  # a bad rate is named before the size is allocated


def test_dropout_rate_boundary_is_exact(ob):
    """A rate equal to one of the drawn values must drop exactly the values below it, as NumPy does."""
    from nn.random import uniform01

    u = uniform01(3, 9, np.arange(1000, dtype=np.uint32))
    rate = float(np.sort(u)[400])  # keeps u >= rate: 600 elements
    mask = ob.to_numpy(ob.dropout_mask((1000,), rate, 3, 9))
    assert int((mask != 0).sum()) == 600
    with pytest.raises(ValueError, match="rate"):
        ob.dropout_mask((3,), 1.0, 0, 0)


# --- batch normalization ------------------------------------------------------------------------------
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize(("b", "f"), [(1, 5), (3, 1), (17, 17), (130, 5), (5, 130)])
def test_batchnorm(ob, rng, training, b, f):
    x, xh = _data(ob, rng, (b, f))
    xh = xh * 3 + 1.5
    x = ob.asarray(xh)
    gamma, gh = _data(ob, rng, (f,))
    beta, bh = _data(ob, rng, (f,))
    rm, rmh = _data(ob, rng, (f,))
    rv, rvh = _data(ob, rng, (f,), 0.5, 2.0)
    _poison_pool(ob, (b, f), (f,))
    y, xhat, inv_std = ob.batchnorm_forward(x, gamma, beta, rm, rv, training, 0.1, 1e-5)
    rmh, rvh = rmh.copy(), rvh.copy()
    yr, xhatr, isr = REF.batchnorm_forward(xh, gh, bh, rmh, rvh, training, 0.1, 1e-5)
    _check(ob, y, yr, k=b, what="y")
    _check(ob, xhat, xhatr, k=b, what="xhat")
    _check(ob, inv_std, isr, k=b, what="inv_std")
    _check(ob, rm, rmh, k=b, what="running mean")
    _check(ob, rv, rvh, k=b, what="running variance")
    gy, gyh = _data(ob, rng, (b, f))
    gg, gbt = ob.empty((f,)), ob.empty((f,))
    _poison(ob, gg)
    _poison(ob, gbt)
    _poison_pool(ob, (b, f))
    ggr, gbr = np.zeros(f), np.zeros(f)
    xhat_dev = ob.to_numpy(xhat).astype(np.float64)
    is_dev = ob.to_numpy(inv_std).astype(np.float64)
    gxr = REF.batchnorm_backward(gyh, xhat_dev, is_dev, gh, ggr, gbr)
    gx = ob.batchnorm_backward(gy, xhat, inv_std, gamma, gg, gbt)
    _check(ob, gg, ggr, k=b, what="ggamma")
    _check(ob, gbt, gbr, k=b, what="gbeta")
    _check(ob, gx, gxr, k=b, what="gx")


# --- losses -------------------------------------------------------------------------------------------
LOSS_SHAPES = [(1, 1), (3, 5), (17, 3), (130, 17), (1, 130)]


def _loss_inputs(rng, kind, shape):
    if kind == "bce":
        p = rng.uniform(0.01, 0.99, shape)
        p.flat[0] = 0.0  # clipped values
        p.flat[-1] = 1.0
        return p, rng.uniform(0, 1, shape)
    if kind == "softmax_cce":
        t = rng.uniform(0, 1, shape)
        return rng.standard_normal(shape) * 20, t / t.sum(axis=1, keepdims=True)
    return rng.standard_normal(shape), rng.standard_normal(shape)


@pytest.mark.parametrize("kind", ["mse", "mae", "softmax_cce", "bce"])
@pytest.mark.parametrize("shape", LOSS_SHAPES)
def test_loss(ob, rng, kind, shape):
    p, t = _loss_inputs(rng, kind, shape)
    p = p.astype(ob.dtype).astype(np.float64)
    t = t.astype(ob.dtype).astype(np.float64)
    _poison_pool(ob, (1,), shape)
    value, grad = ob.loss(kind, ob.asarray(p), ob.asarray(t))
    vr, gr = REF.loss(kind, p, t)
    n = p.size
    _check(ob, value, vr, k=n, what="value")
    _check(ob, grad, gr, k=shape[1], what="gradient")


def test_loss_errors(ob, rng):
    p, _ = _data(ob, rng, (3, 2))
    t, _ = _data(ob, rng, (3, 3))
    with pytest.raises(ValueError, match="differ"):
        ob.loss("mse", p, t)
    with pytest.raises(ValueError, match="unknown loss"):
        ob.loss("hinge", p, p)


# --- optimizers ---------------------------------------------------------------------------------------
OPTIMIZERS = {
    "sgd": (1, dict(lr=0.1)),
    "momentum": (2, dict(lr=0.05, momentum=0.9, nesterov=False)),
    "nesterov": (2, dict(lr=0.05, momentum=0.9, nesterov=True)),
    "adagrad": (2, dict(lr=0.1, eps=1e-8)),
    "rmsprop": (2, dict(lr=0.01, rho=0.9, eps=1e-8)),
    "adadelta": (3, dict(lr=1.0, rho=0.95, eps=1e-6)),
    "adam": (3, dict(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("reg", [(0.0, 0.0), (0.01, 0.001)], ids=["plain", "l1l2"])
@pytest.mark.parametrize("n", [1, 17, 130, 5003])
def test_optimizer_steps(ob, rng, name, reg, n):
    tensors, hyper = OPTIMIZERS[name]
    method = ("momentum" if name == "nesterov" else name) + "_update"
    w, wh = _data(ob, rng, (n,))
    wh = wh.copy()
    states = [ob.zeros((n,)) for _ in range(tensors - 1)]
    states_h = [np.zeros(n) for _ in range(tensors - 1)]
    for step in range(1, 5):
        g, gh = _data(ob, rng, (n,))
        extra = {"step": step} if name == "adam" else {}
        getattr(ob, method)(w, g, *states, **hyper, **extra, l1=reg[0], l2=reg[1])
        getattr(REF, method)(wh, gh, *states_h, **hyper, **extra, l1=reg[0], l2=reg[1])
        # Continue from the device's state so float32 rounding does not compound across steps.
        _check(ob, w, wh, k=8, what=f"{name} weights, step {step}")
        for s, sh in zip(states, states_h, strict=True):
            _check(ob, s, sh, k=8, what=f"{name} state, step {step}")
            sh[...] = ob.to_numpy(s)
        wh[...] = ob.to_numpy(w)


@pytest.mark.parametrize("n", [1, 17, 130, 100_003])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_by_global_norm(ob, rng, n, max_norm):
    g, gh = _data(ob, rng, (n,))
    ob.clip_by_global_norm_(g, max_norm)
    gh = gh.copy()
    REF.clip_by_global_norm_(gh, max_norm)
    _check(ob, g, gh, k=n, what="clipped gradient")
    if max_norm < 1:
        assert np.linalg.norm(ob.to_numpy(g).astype(np.float64)) == pytest.approx(max_norm, rel=1e-4)


def test_optimizer_rejects_mismatched_buffers(ob, rng):
    w, _ = _data(ob, rng, (5,))
    g, _ = _data(ob, rng, (4,))
    with pytest.raises(ValueError):
        ob.sgd_update(w, g, lr=0.1, l1=0.0, l2=0.0)
    with pytest.raises(ValueError, match="step"):
        ob.adam_update(w, w, w, w, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8, step=0, l1=0.0, l2=0.0)
