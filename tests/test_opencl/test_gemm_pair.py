"""Two products in one launch (``gemm_pair``, ``gemm_gpu_pair.cl``): float64 references, the bits of the two
products launched alone, splits along K, and overlapping outputs refused."""

from __future__ import annotations

import numpy as np
import pytest

from opencl import ShapeError, memory
from opencl.blas import Product, gemm_pair


def _tol(rt, k: int) -> tuple[float, float]:
    if rt.dtype == np.float64:
        return 1e-12, 1e-13 * k
    return 1e-5, 2e-6 * k


def _operands(rt, rng, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k))
    b = rng.standard_normal((n, k) if tb else (k, n))
    return a, b, memory.to_device(rt, a), memory.to_device(rt, b)


def _ref(rt, a, b, ta, tb):
    a, b = (x.astype(rt.dtype).astype(np.float64) for x in (a, b))
    return (a.T if ta else a) @ (b.T if tb else b)


# (M, N, K) of each product, and the K slices of each: a dense layer's gradients (TN split, NN whole),
# tails in every dimension, both products split, the first product's grid smaller and larger than the second's
CASES = [
    ((62, 125, 256), (256, 125, 62), 8, 1),
    ((3, 62, 70), (70, 62, 3), 3, 1),
    ((33, 17, 70), (130, 5, 96), 3, 2),
    ((130, 130, 5), (1, 1, 1), 1, 1),
]


@pytest.mark.parametrize("shapes", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_pair_kernel_gives_the_bits_of_the_products_alone(rt, rng, shapes):
    """Each product of a pair launch, with its epilogue, in every layout pair, equals bit for bit the same
    product launched alone with the same tiles and K split, and its float64 reference."""
    from opencl.blas import _Problem, epilogue
    from opencl.gemm_gpu import CONFIGS, _launches, _pair_launches

    (m1, n1, k1), (m2, n2, k2), s1, s2 = shapes
    # every layout in both places of the pair on GPUs (each pair a kernel build); two pairs on CPUs
    layouts = [((True, False), (False, False)), ((False, True), (True, True))]
    if not rt.is_cpu:
        layouts += [((False, False), (True, False)), ((True, True), (False, True))]
    tiles = CONFIGS[-1] if rt.is_cpu else CONFIGS[-4]
    for (ta1, tb1), (ta2, tb2) in layouts:
        a1, b1, da1, db1 = _operands(rt, rng, m1, n1, k1, ta1, tb1)
        a2, b2, da2, db2 = _operands(rt, rng, m2, n2, k2, ta2, tb2)
        bias2 = rng.standard_normal(n2)
        dbias2 = memory.to_device(rt, bias2)
        p1 = _Problem(m1, n1, k1, 1, ta1, tb1, 0, 0, 0, 0.5, 0.0, False, epilogue(None))
        p2 = _Problem(m2, n2, k2, 1, ta2, tb2, 0, 0, 0, 1.0, 0.0, True, epilogue("tanh"))
        c1, c2 = (memory.poison(memory.empty(rt, s)) for s in ((m1, n1), (m2, n2)))
        plan = _pair_launches(rt, (da1, db1, c1, c1, p1), (da2, db2, c2, dbias2, p2), tiles, s1, s2)
        plan(da1, db1, c1, c1, da2, db2, c2, dbias2)
        alone1, alone2 = (memory.poison(memory.empty(rt, s)) for s in ((m1, n1), (m2, n2)))
        _launches(rt, da1, db1, alone1, alone1, p1, tiles, s1)(da1, db1, alone1, alone1)
        _launches(rt, da2, db2, alone2, dbias2, p2, tiles, s2)(da2, db2, alone2, dbias2)
        msg = f"{ta1}{tb1} {ta2}{tb2}"
        np.testing.assert_array_equal(c1.get(), alone1.get(), err_msg=msg)
        np.testing.assert_array_equal(c2.get(), alone2.get(), err_msg=msg)
        rtol, atol = _tol(rt, max(k1, k2))
        ref1 = 0.5 * _ref(rt, a1, b1, ta1, tb1)
        np.testing.assert_allclose(c1.get(), ref1, rtol=rtol, atol=atol, err_msg=msg)
        ref2 = np.tanh(_ref(rt, a2, b2, ta2, tb2) + bias2.astype(rt.dtype).astype(np.float64))
        np.testing.assert_allclose(c2.get(), ref2, rtol=rtol, atol=atol, err_msg=msg)


def test_dense_gradients_as_one_pair_on_views_called_again(rt, rng):
    """The public call on a dense layer's gradients (views into one flat buffer, called twice with new
    values and moved views): the same results as two ``gemm`` calls."""
    from opencl.blas import gemm

    batch, outputs, inputs = 70, 33, 45
    for shift in (0, 16):
        flat = memory.to_device(
            rt, rng.standard_normal(shift + batch * outputs + batch * inputs + outputs * inputs)
        )
        dz = flat[shift : shift + batch * outputs].reshape(batch, outputs)
        x = flat[shift + batch * outputs : shift + batch * (outputs + inputs)].reshape(batch, inputs)
        w = flat[shift + batch * (outputs + inputs) :].reshape(outputs, inputs)
        gw = memory.poison(memory.empty(rt, (outputs, inputs)))
        gx = memory.poison(memory.empty(rt, (batch, inputs)))
        gemm_pair(rt, Product(dz, x, gw, trans_a=True), Product(dz, w, gx))
        gw1, gx1 = memory.empty(rt, (outputs, inputs)), memory.empty(rt, (batch, inputs))
        gemm(rt, dz, x, gw1, trans_a=True)
        gemm(rt, dz, w, gx1)
        np.testing.assert_array_equal(gw.get(), gw1.get())
        np.testing.assert_array_equal(gx.get(), gx1.get())
        hdz, hx, hw = (v.get().astype(np.float64) for v in (dz, x, w))
        rtol, atol = _tol(rt, batch)
        np.testing.assert_allclose(gw.get(), hdz.T @ hx, rtol=rtol, atol=atol)
        np.testing.assert_allclose(gx.get(), hdz @ hw, rtol=rtol, atol=atol)


def test_overlapping_outputs_and_bad_operands_are_refused(rt):
    """A pair whose output overlaps the other product's operands or output is refused (both run at once);
    a bad operand is refused as by ``gemm``; an empty product leaves the other computed."""
    flat = memory.empty(rt, (200,))
    a, b = flat[:12].reshape(3, 4), flat[12:32].reshape(4, 5)
    c = flat[40:55].reshape(3, 5)
    with pytest.raises(ShapeError, match="first product's C overlaps the other product's A"):
        gemm_pair(rt, Product(a, b, flat[:15].reshape(3, 5)), Product(a, b, c))
    with pytest.raises(ShapeError, match="first product's C overlaps the other product's C"):
        gemm_pair(rt, Product(a, b, c), Product(a, b, flat[50:65].reshape(3, 5)))
    x, y = flat[100:112].reshape(3, 4), flat[112:132].reshape(4, 5)
    with pytest.raises(ShapeError, match="second product's C overlaps the other product's B"):
        gemm_pair(rt, Product(a, b, c), Product(x, y, flat[12:27].reshape(3, 5)))
    before = memory.to_device(rt, np.full((3, 5), 7.0))
    with pytest.raises(ShapeError, match="does not fit"):  # refused whole: the valid first product not run
        gemm_pair(rt, Product(a, b, before), Product(a, a, flat[60:75].reshape(3, 5)))
    np.testing.assert_array_equal(before.get(), np.full((3, 5), 7.0))
    ha = np.arange(12.0).reshape(3, 4)
    da, db = memory.to_device(rt, ha), memory.to_device(rt, np.ones((4, 5)))
    out = memory.empty(rt, (3, 5))
    gemm_pair(rt, Product(da, db, out), Product(da, memory.empty(rt, (4, 0)), memory.empty(rt, (3, 0))))
    np.testing.assert_allclose(out.get(), ha @ np.ones((4, 5)))
