"""Device arrays: ``pyopencl.array.Array`` allocated from the runtime's memory pool.

How kernels see views (the convention every ``.cl`` file follows): an array argument is passed as TWO kernel
arguments, the base buffer and the element offset of the view inside it::

    __kernel void k(__global REAL* restrict y, const uint y_off, ...) { y += y_off; ... }

    rt.launch(k, gsize, lsize, *arg(y), ...)      # arg(y) == (y.base_data, y.offset // itemsize)

This works for every view (``view()`` of a flat parameter buffer, row slices of a batch) without creating
OpenCL sub-buffers on each launch; ``Array.data`` refuses arrays with an offset, so never pass it. Views of
flat buffers still start at multiples of ``rt.alignment`` elements (the device's base-address alignment), so
kernels may use aligned vector loads at the start of a view and a sub-buffer could be made if ever needed.
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from opencl.errors import ShapeError


def empty(rt, shape: tuple[int, ...] | int, dtype=None) -> cla.Array:
    """Uninitialised pooled array; ``dtype`` defaults to the runtime's float type."""
    return cla.empty(rt.queue, shape, np.dtype(dtype or rt.dtype), allocator=rt.allocator)


def zeros(rt, shape: tuple[int, ...] | int, dtype=None) -> cla.Array:
    a = empty(rt, shape, dtype)
    a.fill(0)
    return a


def to_device(rt, host: np.ndarray, dtype=None) -> cla.Array:
    """Copy to the device: floats become the runtime's dtype, integers int32 (unless ``dtype``)."""
    host = np.asarray(host)
    if dtype is None:
        dtype = np.int32 if np.issubdtype(host.dtype, np.integer) or host.dtype == np.bool_ else rt.dtype
    host = np.ascontiguousarray(host, dtype=dtype)
    out = empty(rt, host.shape, host.dtype)
    out.set(host)
    return out


def poison(a: cla.Array) -> cla.Array:
    """Fill with NaN (floats) or -1 (integers) so that tests catch elements a kernel never wrote."""
    a.fill(np.nan if np.issubdtype(a.dtype, np.floating) else -1)
    return a


def aligned_size(n: int, alignment: int) -> int:
    """``n`` rounded up to a multiple of ``alignment`` (to lay out views inside one flat buffer)."""
    return int(math.ceil(n / alignment) * alignment)


def view(flat: cla.Array, offset: int, shape: tuple[int, ...], alignment: int = 1) -> cla.Array:
    """A ``shape`` view of 1-D ``flat`` from element ``offset`` (a multiple of ``alignment``).

    Built with pyopencl's fast constructor (~3 µs) rather than slicing (~50 µs): layers create views of the
    flat parameter and gradient buffers on every bind.
    """
    if flat.ndim != 1:
        raise ShapeError(f"view() needs a 1-D flat array, got shape {flat.shape}")
    shape = tuple(int(d) for d in shape)
    n = math.prod(shape)
    if offset % alignment:
        raise ShapeError(f"view offset {offset} is not a multiple of the device alignment ({alignment})")
    if offset < 0 or offset + n > flat.size:
        raise ShapeError(f"view [{offset}, {offset + n}) exceeds the flat array of {flat.size} elements")
    itemsize = flat.dtype.itemsize
    strides = tuple(math.prod(shape[i + 1:]) * itemsize for i in range(len(shape)))
    return cla.Array(None, shape, flat.dtype, data=flat.base_data, offset=flat.offset + offset * itemsize,
                     strides=strides, _fast=True, _size=n, _context=flat.context, _queue=flat.queue)


def offset_of(a: cla.Array) -> int:
    """Element offset of ``a`` inside its base buffer."""
    return a.offset // a.dtype.itemsize


def arg(a: cla.Array) -> tuple[cl.MemoryObjectHolder, np.uint32]:
    """The two kernel arguments of an array: base buffer and element offset (see the module docstring)."""
    if not a.flags.c_contiguous:
        raise ShapeError(f"kernels need C-contiguous arrays, got strides {a.strides} for shape {a.shape}")
    return a.base_data, np.uint32(a.offset // a.dtype.itemsize)
