"""Pooled arrays, views of flat buffers, the (buffer, offset) kernel-argument convention, poison."""

from __future__ import annotations

import numpy as np
import pytest

from opencl import ShapeError, memory


def test_to_device_converts_types(rt):
    x = memory.to_device(rt, np.arange(6, dtype=np.float64).reshape(2, 3))
    assert x.dtype == rt.dtype and x.shape == (2, 3)
    i = memory.to_device(rt, np.arange(5, dtype=np.int64))
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i.get(), np.arange(5))


def test_views_share_the_flat_buffer(rt):
    a = rt.alignment
    flat = memory.zeros(rt, (4 * a,))
    v = memory.view(flat, 2 * a, (2, 3), a)
    v.set(np.arange(6, dtype=rt.dtype).reshape(2, 3))
    host = flat.get()
    np.testing.assert_array_equal(host[2 * a : 2 * a + 6], np.arange(6))
    assert host[: 2 * a].sum() == 0
    buf, off = memory.arg(v)
    assert buf is flat.base_data and off == 2 * a


def test_view_rejects_misaligned_or_out_of_range(rt):
    a = rt.alignment
    flat = memory.zeros(rt, (4 * a,))
    if a > 1:
        with pytest.raises(ShapeError, match="alignment"):
            memory.view(flat, 1, (2,), a)
    with pytest.raises(ShapeError, match="exceeds"):
        memory.view(flat, 3 * a, (2, a), a)
    with pytest.raises(ShapeError, match="1-D"):
        memory.view(flat.reshape(2, 2 * a), 0, (1,), a)


def test_poison_fills_nan(rt):
    x = memory.poison(memory.empty(rt, (5,)))
    assert np.isnan(x.get()).all()
    assert memory.aligned_size(5, 4) == 8 and memory.aligned_size(8, 4) == 8


def test_reshape_shares_data_and_matches_numpy(rt):
    host = np.arange(60, dtype=rt.dtype).reshape(3, 4, 5)
    a = memory.to_device(rt, host)
    for shape in ((12, 5), (-1, 10), (60,), (3, -1), ((5, 12),)):
        got = a.reshape(*shape)
        want = host.reshape(*shape)
        assert got.shape == want.shape and got.strides == want.strides
        np.testing.assert_array_equal(got.get(), want)
    flat = a.reshape(-1)
    memory.fill(memory.view(flat, 0, (2,)), -1.0)  # writes through a reshaped view reach the original
    assert a.get()[0, 0, :2].tolist() == [-1.0, -1.0]
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape(7, 9)


def test_reshape_of_a_strided_view_falls_back_to_pyopencl(rt):
    a = memory.to_device(rt, np.arange(24, dtype=np.float32).reshape(4, 6))
    sliced = a[:, :3]  # not contiguous: pyopencl's own reshape decides (and refuses a copy-needing one)
    with pytest.raises((ValueError, NotImplementedError)):
        sliced.reshape(12)


def test_fill_zeros_and_poison_build_no_program(rt):
    """memory.fill uses clEnqueueFillBuffer: no pyopencl kernel is compiled, so no compiler remark can
    surface as a CompilerWarning (NVIDIA prints remarks for pyopencl's own fill kernel)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = memory.zeros(rt, (2 * rt.alignment + 5,))  # alignment: 1 on PoCL, larger on GPUs
        view = memory.view(flat, rt.alignment, (5,), rt.alignment)
        memory.fill(view, 2.5)
        ints = memory.poison(memory.empty(rt, (7,), np.int32))
        floats = memory.poison(memory.empty(rt, (3, 3)))
    host = flat.get()
    a = rt.alignment
    np.testing.assert_array_equal(host[a : a + 5], 2.5)
    assert not host[:a].any() and not host[a + 5 :].any()
    np.testing.assert_array_equal(ints.get(), -1)
    assert np.isnan(floats.get()).all()
