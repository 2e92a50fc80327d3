"""GEMM against NumPy float64 on awkward sizes, every transposition, fused epilogues, views, batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opencl import ShapeError, memory
from opencl.blas import gemm, gemm_batched

SIZES = (1, 3, 5, 17, 130)


def _tol(rt, k: int) -> tuple[float, float]:
    """(rtol, atol) for a K-term dot product of N(0, 1) values in the runtime's precision."""
    if rt.dtype == np.float64:
        return 1e-12, 1e-13 * k
    return 1e-5, 2e-6 * k


def _run(rt, rng, m, n, k, ta, tb, *, alpha=1.0, beta=0.0, bias=False, act=None):
    a = rng.standard_normal((k, m) if ta else (m, k))
    b = rng.standard_normal((n, k) if tb else (k, n))
    c0 = rng.standard_normal((m, n))
    bv = rng.standard_normal(n)
    da, db, dbias = memory.to_device(rt, a), memory.to_device(rt, b), memory.to_device(rt, bv)
    dc = memory.to_device(rt, c0) if beta else memory.poison(memory.empty(rt, (m, n)))
    gemm(
        rt,
        da,
        db,
        dc,
        trans_a=ta,
        trans_b=tb,
        alpha=alpha,
        beta=beta,
        bias=dbias if bias else None,
        activation=act,
    )
    # Reference from the values the device actually saw (rounded to its dtype), in float64.
    a, b, c0, bv = (x.astype(rt.dtype).astype(np.float64) for x in (a, b, c0, bv))
    ref = alpha * ((a.T if ta else a) @ (b.T if tb else b)) + beta * c0 + (bv if bias else 0.0)
    return dc.get(), ref


TRANS = list(itertools.product((False, True), repeat=2))


@pytest.mark.parametrize("ta,tb", TRANS, ids=lambda v: "T" if v else "N")
def test_all_awkward_shapes(rt, rng, ta, tb):
    for m, n, k in itertools.product(SIZES, repeat=3):
        out, ref = _run(rt, rng, m, n, k, ta, tb)
        rtol, atol = _tol(rt, k)
        msg = f"M={m} N={n} K={k} ta={ta} tb={tb}"
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, err_msg=msg)


ACTS = {
    "linear": lambda z: 0.5 * z - 0.25,
    "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, 0),
    "lrelu": lambda z: np.where(z > 0, z, 0.1 * z),
}


class _Act:  # the attributes gemm reads from nn.Activation
    def __init__(self, kind, alpha=1.0, beta=0.0):
        self.kind, self.alpha, self.beta = kind, alpha, beta


@pytest.mark.parametrize("kind", list(ACTS))
def test_fused_epilogue(rt, rng, kind):
    act = {"linear": _Act("linear", 0.5, -0.25), "lrelu": _Act("lrelu", 0.1)}.get(kind, kind)
    for m, n, k in ((17, 130, 5), (3, 17, 130), (130, 33, 17)):
        for ta, tb in ((False, True), (True, False)):
            out, ref = _run(rt, rng, m, n, k, ta, tb, alpha=0.7, beta=0.3, bias=True, act=act)
            rtol, atol = _tol(rt, k)
            msg = f"{kind} {m}x{n}x{k}"
            np.testing.assert_allclose(out, ACTS[kind](ref), rtol=rtol * 10, atol=atol, err_msg=msg)


def test_dense_layer_shapes_on_views(rt, rng):
    """Forward, weight gradient and input gradient with w, b, gw as views of one flat buffer."""
    bsz, i, o = 33, 130, 17
    al = rt.alignment
    w_off, b_off, gw_off = 0, memory.aligned_size(o * i, al), memory.aligned_size(o * i + o, al) + al
    flat = memory.to_device(rt, rng.standard_normal(gw_off + o * i + 3))
    w = memory.view(flat, w_off, (o, i), al)
    b = memory.view(flat, b_off, (o,), al)
    gw = memory.view(flat, gw_off, (o, i), al)
    x_h = rng.standard_normal((bsz, i))
    dz_h = rng.standard_normal((bsz, o))
    x, dz = memory.to_device(rt, x_h), memory.to_device(rt, dz_h)
    y, gx = memory.poison(memory.empty(rt, (bsz, o))), memory.poison(memory.empty(rt, (bsz, i)))
    gemm(rt, x, w, y, trans_b=True, bias=b, activation="tanh")
    gemm(rt, dz, x, gw, trans_a=True)
    gemm(rt, dz, w, gx)
    host = flat.get().astype(np.float64)
    w_h, b_h = host[w_off : w_off + o * i].reshape(o, i), host[b_off : b_off + o]
    x_h, dz_h = x_h.astype(rt.dtype), dz_h.astype(rt.dtype)
    rtol, atol = _tol(rt, i)
    np.testing.assert_allclose(y.get(), np.tanh(x_h @ w_h.T + b_h), rtol=rtol * 10, atol=atol)
    np.testing.assert_allclose(
        host[gw_off : gw_off + o * i].reshape(o, i), dz_h.T @ x_h, rtol=rtol, atol=atol
    )
    np.testing.assert_allclose(gx.get(), dz_h @ w_h, rtol=rtol, atol=atol)
    np.testing.assert_array_equal(host[w_off : w_off + o * i].reshape(o, i), w.get())  # w untouched


@pytest.mark.parametrize("ta,tb", TRANS, ids=lambda v: "T" if v else "N")
def test_batched(rt, rng, ta, tb):
    """G products in one launch, operands given as views that start inside a larger buffer."""
    for g, m, n, k in ((3, 17, 5, 130), (2, 130, 17, 3), (4, 1, 33, 17)):
        a = rng.standard_normal((g + 1, k, m) if ta else (g + 1, m, k))
        b = rng.standard_normal((g, n, k) if tb else (g, k, n))
        bias = rng.standard_normal(n)
        da = memory.to_device(rt, a)[1:]  # a view at an offset of one product
        c = memory.poison(memory.empty(rt, (g, m, n)))
        gemm_batched(
            rt,
            da,
            memory.to_device(rt, b),
            c,
            trans_a=ta,
            trans_b=tb,
            alpha=2,
            bias=memory.to_device(rt, bias),
            activation="tanh",
        )
        a, b, bias = (x.astype(rt.dtype).astype(np.float64) for x in (a[1:], b, bias))
        opa, opb = (a.transpose(0, 2, 1) if ta else a), (b.transpose(0, 2, 1) if tb else b)
        ref = np.tanh(2 * np.matmul(opa, opb) + bias)
        rtol, atol = _tol(rt, k)
        np.testing.assert_allclose(c.get(), ref, rtol=rtol * 10, atol=atol * 2, err_msg=f"{g}x{m}x{n}x{k}")


def test_bad_operands_raise_clear_errors(rt):
    a, b, c = memory.empty(rt, (3, 4)), memory.empty(rt, (5, 6)), memory.empty(rt, (3, 6))
    with pytest.raises(ShapeError, match="does not fit"):
        gemm(rt, a, b, c)
    with pytest.raises(ShapeError, match="cannot be fused"):
        gemm(rt, a, memory.empty(rt, (4, 6)), c, activation="softplus")
    with pytest.raises(ShapeError, match="dtype"):
        gemm(rt, a, memory.empty(rt, (4, 6), np.int32), c)
    with pytest.raises(ShapeError, match="bias"):
        gemm(rt, a, memory.empty(rt, (4, 6)), c, bias=memory.empty(rt, (5,)))
    with pytest.raises(ShapeError, match="3-D"):
        gemm_batched(rt, a, b, c)
    with pytest.raises(ShapeError, match="products"):
        three = memory.empty(rt, (3, 4, 6))
        gemm_batched(rt, memory.empty(rt, (2, 3, 4)), three, memory.empty(rt, (3, 3, 6)))


def test_gpu_kernel_on_every_device(rt, rng):
    """The local-memory kernel of GPUs, run on whatever device is here, for every tile configuration."""
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import CONFIGS, gemm_gpu

    # All configurations and layouts on GPUs; on CPUs (where each variant is a slow PoCL build, with local
    # memory and barriers) the smallest configuration in two layouts.
    configs, layouts = (CONFIGS, TRANS) if not rt.is_cpu else (CONFIGS[-2:], TRANS[::3])
    shapes = ((130, 17, 5), (3, 130, 33), (64, 128, 32), (128, 128, 32))  # the last: vector reads everywhere
    for tiles in configs:
        for (m, n, k), (ta, tb) in itertools.product(shapes, layouts):
            a = rng.standard_normal((k, m) if ta else (m, k))
            b = rng.standard_normal((n, k) if tb else (k, n))
            bias = rng.standard_normal(n)
            c = memory.poison(memory.empty(rt, (m, n)))
            da, db, dbias = memory.to_device(rt, a), memory.to_device(rt, b), memory.to_device(rt, bias)
            problem = _Problem(m, n, k, 1, ta, tb, 0, 0, 0, 1.0, 0.0, True, epilogue("relu"))
            gemm_gpu(rt, da, db, c, dbias, problem, tiles=tiles)
            a, b, bias = (x.astype(rt.dtype).astype(np.float64) for x in (a, b, bias))
            ref = np.maximum((a.T if ta else a) @ (b.T if tb else b) + bias, 0)
            rtol, atol = _tol(rt, k)
            msg = f"{tiles} {m}x{n}x{k} {ta} {tb}"
            np.testing.assert_allclose(c.get(), ref, rtol=rtol, atol=atol, err_msg=msg)


def test_gpu_kernel_variants_give_the_same_bits(rt, rng):
    """Double-buffered or not, operands read as vectors or as scalars (an operand at an odd offset cannot be
    read as aligned vectors): every variant adds the same products in the same order."""
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import Tiles, gemm_gpu

    blocks = [(32, 32, 16, 4, 4)] if rt.is_cpu else [(128, 128, 16, 8, 8), (128, 64, 8, 8, 4)]
    m, n, k = 128, 128, 48
    for block, (ta, tb) in itertools.product(blocks, TRANS if not rt.is_cpu else TRANS[1:3]):
        a = rng.standard_normal((k, m) if ta else (m, k))
        b = rng.standard_normal((n, k) if tb else (k, n))
        aligned_a, aligned_b = memory.to_device(rt, a), memory.to_device(rt, b)
        shifted = memory.to_device(rt, np.concatenate([[0.0], a.ravel(), b.ravel()]))
        odd_a = shifted[1 : 1 + a.size].reshape(a.shape)
        odd_b = shifted[1 + a.size :].reshape(b.shape)
        problem = _Problem(m, n, k, 1, ta, tb, 0, 0, 0, 1.0, 0.0, False, epilogue(None))
        results = []
        for stages in (1, 2):
            for da, db in ((aligned_a, aligned_b), (odd_a, odd_b)):
                c = memory.poison(memory.empty(rt, (m, n)))
                gemm_gpu(rt, da, db, c, c, problem, tiles=Tiles(*block, stages=stages))
                results.append(c.get())
        for other in results[1:]:
            np.testing.assert_array_equal(other, results[0], err_msg=f"{block} {ta} {tb}")
        ref = (a.T if ta else a) @ (b.T if tb else b)
        rtol, atol = _tol(rt, k)
        np.testing.assert_allclose(results[0], ref, rtol=rtol, atol=atol)


class _Device:  # the one attribute _cpu_tiles reads from a pyopencl Device
    def __init__(self, width: int):
        self.native_vector_width_float = width


@pytest.mark.parametrize("width", [4, 8, 16], ids=["sse", "avx2", "avx512"])
def test_cpu_register_tiles_for_every_vector_width(rt, rng, monkeypatch, width):
    """The tile shapes chosen for other CPUs than this one (AVX2: 6-row tiles, 8-wide dot products in 4x2
    blocks; AVX-512: 12 rows, 16-wide, 4x4) compute the same products: row and column remainders, K not a
    multiple of the vector width, the dot-product path (few rows, B transposed) and the packed path."""
    from opencl import blas

    if not rt.is_cpu:
        pytest.skip("CPU kernel")
    tiles = blas._cpu_tiles(_Device(width), rt.dtype.itemsize)
    monkeypatch.setattr(blas, "_cpu_tiles", lambda device, itemsize: tiles)
    monkeypatch.setattr(rt, "plans", {})  # products prepared with the other tiles, dropped afterwards
    for (m, n, k), (ta, tb) in itertools.product(((130, 17, 5), (13, 130, 33), (3, 37, 200)), TRANS):
        out, ref = _run(rt, rng, m, n, k, ta, tb, bias=True, act="tanh")
        rtol, atol = _tol(rt, k)
        np.testing.assert_allclose(
            out, np.tanh(ref), rtol=rtol, atol=atol, err_msg=f"{tiles} {m}x{n}x{k} {ta} {tb}"
        )


@pytest.mark.parametrize("m,n,k,split", [(33, 17, 70, 3), (32, 64, 64, 2), (5, 130, 600, 4)])
def test_gpu_kernel_split_along_k(rt, rng, m, n, k, split):
    """Split-K partial products plus the ordered reduction; the epilogue (beta, bias, act) applies once."""
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import CONFIGS, gemm_gpu

    for ta, tb in ((True, False), (False, True)):
        a = rng.standard_normal((k, m) if ta else (m, k))
        b = rng.standard_normal((n, k) if tb else (k, n))
        bias, c0 = rng.standard_normal(n), rng.standard_normal((m, n))
        da, db, dbias, dc = (memory.to_device(rt, x) for x in (a, b, bias, c0))
        problem = _Problem(m, n, k, 1, ta, tb, 0, 0, 0, 0.5, 2.0, True, epilogue("tanh"))
        gemm_gpu(rt, da, db, dc, dbias, problem, tiles=CONFIGS[-1], split=split)
        a, b, bias, c0 = (x.astype(rt.dtype).astype(np.float64) for x in (a, b, bias, c0))
        ref = np.tanh(0.5 * (a.T if ta else a) @ (b.T if tb else b) + 2.0 * c0 + bias)
        rtol, atol = _tol(rt, k)
        np.testing.assert_allclose(dc.get(), ref, rtol=rtol, atol=atol, err_msg=f"{ta} {tb}")


def test_gpu_tile_choice_is_timed_once_per_shape_and_kept(rt, rng, monkeypatch):
    """Products time every fitting configuration once by device time; the winner is kept and computes the
    product, and the trials never touch C."""
    from opencl import gemm_gpu as gg
    from opencl.blas import _Problem, epilogue

    candidates = (gg.Tiles(32, 32, 16, 4, 4), gg.Tiles(32, 32, 8, 4, 4))
    monkeypatch.setattr(gg, "CONFIGS", candidates)
    monkeypatch.setattr(gg, "TUNE_MIN_MACS", 0)
    monkeypatch.setattr(gg, "_chosen", {})
    timed = []
    real_seconds = gg.Plan.device_seconds

    def seconds(plan, queue, *args):
        timed.append(queue)
        return real_seconds(plan, queue, *args)

    monkeypatch.setattr(gg.Plan, "device_seconds", seconds)
    m, n, k = 40, 33, 20
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    c0 = rng.standard_normal((m, n))
    da, db, dc = memory.to_device(rt, a), memory.to_device(rt, b), memory.to_device(rt, c0)
    problem = _Problem(m, n, k, 1, False, False, 0, 0, 0, 1.0, 1.0, False, epilogue(None))
    for _ in range(2):
        gg.gemm_gpu(rt, da, db, dc, dc, problem)
    assert timed == [rt.timing_queue] * 2  # each candidate once, on the profiling queue, for both calls
    assert next(iter(gg._chosen.values())) in candidates
    a, b, c0 = (x.astype(rt.dtype).astype(np.float64) for x in (a, b, c0))
    rtol, atol = _tol(rt, k)
    np.testing.assert_allclose(dc.get(), c0 + 2 * (a @ b), rtol=rtol, atol=atol)  # trials never touched C


def test_split_k_sums_do_not_depend_on_the_timed_tiles(rt, rng):
    """The slices of K are cut the same way whatever BK the timed configuration has (70 in 3 slices: 32, 32
    and 6 for BK 8 as for BK 16) and added in slice order, so the result's bits are the same run to run and
    call to call."""
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import Tiles, _launches, gemm_gpu, slice_length

    assert slice_length(70, 3) == 32 and slice_length(256, 8) == 32 and slice_length(70, 1) == 70
    m, n, k = 33, 17, 70
    a, b = rng.standard_normal((k, m)), rng.standard_normal((k, n))
    da, db = memory.to_device(rt, a), memory.to_device(rt, b)
    problem = _Problem(m, n, k, 1, True, False, 0, 0, 0, 1.0, 0.0, False, epilogue(None))
    results = []
    for tiles in (Tiles(32, 32, 16, 4, 4), Tiles(32, 32, 8, 4, 4), Tiles(32, 32, 16, 4, 4)):
        c = memory.poison(memory.empty(rt, (m, n)))
        gemm_gpu(rt, da, db, c, c, problem, tiles=tiles, split=3)
        results.append(c.get())
    plan = _launches(rt, da, db, c, c, problem, Tiles(32, 32, 16, 4, 4), 3)
    for _ in range(3):  # one prepared product, called again
        c = memory.poison(memory.empty(rt, (m, n)))
        plan(da, db, c, c)
        results.append(c.get())
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    a, b = (x.astype(rt.dtype).astype(np.float64) for x in (a, b))
    rtol, atol = _tol(rt, k)
    np.testing.assert_allclose(results[0], a.T @ b, rtol=rtol, atol=atol)


def test_prepared_product_follows_moved_views_and_new_buffers(rt, rng):
    """A product is prepared once per operand layout; later calls on other buffers, and on views of one
    buffer at other offsets, compute their own operands (the kernels' arguments follow every call)."""
    m, n, k = 37, 21, 19
    flat = memory.to_device(rt, rng.standard_normal(4 * (m * k + n * k) + 64))
    for shift in (0, 16, 32, 16):  # 16-element shifts keep the layout (and the plan), move the views
        a = flat[shift : shift + m * k].reshape(m, k)
        b = flat[shift + m * k : shift + m * k + n * k].reshape(n, k)
        c = memory.poison(memory.empty(rt, (m, n)))
        gemm(rt, a, b, c, trans_b=True)
        ha, hb = a.get().astype(np.float64), b.get().astype(np.float64)
        rtol, atol = _tol(rt, k)
        np.testing.assert_allclose(c.get(), ha @ hb.T, rtol=rtol, atol=atol, err_msg=f"shift {shift}")


def test_a_refused_layout_is_refused_after_a_product_of_the_same_shape(rt):
    """A prepared product never serves operands of another layout: a strided view or another dtype of the
    same shape as an accepted operand is still refused, every time."""
    m, k, n = 6, 8, 5
    a, b, c = memory.empty(rt, (m, k)), memory.empty(rt, (k, n)), memory.empty(rt, (m, n))
    gemm(rt, a, b, c)
    strided = memory.empty(rt, (m, 2 * k))[:, :k]  # shape (m, k), rows 2k apart
    assert strided.shape == a.shape
    for _ in range(2):
        with pytest.raises(ShapeError, match="C-contiguous"):
            gemm(rt, strided, b, c)
        with pytest.raises(ShapeError, match="dtype"):
            gemm(rt, memory.empty(rt, (m, k), np.int32), b, c)
        with pytest.raises(ShapeError, match="inner dimension K is 0"):
            gemm(rt, memory.empty(rt, (m, 0)), memory.empty(rt, (0, n)), c)


def test_prepared_products_stay_bounded_when_a_scalar_changes_every_call(rt, rng, monkeypatch):
    """A caller varying alpha (or passing NaN, never equal to itself) on every call gets correct products
    and a bounded number of prepared ones."""
    from opencl import blas

    monkeypatch.setattr(blas, "MAX_PLANS", 3)
    monkeypatch.setattr(rt, "plans", {})
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    da, db, dc = memory.to_device(rt, a), memory.to_device(rt, b), memory.empty(rt, (4, 5))
    rtol, atol = _tol(rt, 3)
    for alpha in (0.5, 1.5, 2.5, 3.5, 4.5, float("nan"), float("nan")):
        gemm(rt, da, db, dc, alpha=alpha)
        assert len(rt.plans) <= 3
        np.testing.assert_allclose(dc.get(), alpha * (a @ b), rtol=rtol, atol=atol)
