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

import functools
import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from opencl.errors import ShapeError


@functools.lru_cache(maxsize=4096)
def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array (what pyopencl works out on every construction)."""
    out, acc = [], itemsize
    for d in reversed(shape):
        out.append(acc)
        acc *= max(1, d)
    return tuple(reversed(out))


class DeviceArray(cla.Array):
    """A ``pyopencl.array.Array`` whose ``reshape`` of a C-contiguous array is cheap.

    Layers reshape activations on every call (N-D attention inputs to 2-D products and back); pyopencl's
    general reshape re-derives strides and flags through NumPy each time, several times the cost of this
    one, which made it a large share of the host time of a small ATFNet forward pass. Other layouts take
    pyopencl's path.
    """

    def reshape(self, *shape, order: str = "C") -> cla.Array:
        if shape and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        itemsize = self.dtype.itemsize
        if order != "C" or self.strides != c_strides(self.shape, itemsize):
            return super().reshape(*shape, order=order)
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            shape = tuple(self.size // known if d == -1 and known else (0 if d == -1 else d) for d in shape)
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != self.size or any(d < 0 for d in shape):
            raise ValueError(f"cannot reshape an array of size {self.size} into shape {shape}")
        return DeviceArray(
            None,
            shape,
            self.dtype,
            allocator=self.allocator,
            data=self.base_data,
            offset=self.offset,
            strides=c_strides(shape, itemsize),
            events=self.events,
            _fast=True,
            _size=self.size,
            _context=self.context,
            _queue=self.queue,
        )


def empty(rt, shape: tuple[int, ...] | int, dtype=None) -> cla.Array:
    """Uninitialised pooled array; ``dtype`` defaults to the runtime's float type."""
    return DeviceArray(rt.queue, shape, np.dtype(dtype or rt.dtype), allocator=rt.allocator)


def scratch(rt, n: int) -> tuple[cl.MemoryObjectHolder, np.uint32]:
    """Kernel arguments (buffer, offset 0) of ``n`` uninitialised elements from the runtime's pool, for
    temporaries that only kernels touch (GEMM packing, split-K partial sums): a raw pooled buffer costs
    ~1 µs where an ``Array`` costs ~40 µs of Python. The buffer returns to the pool with its last reference;
    the in-order queue runs every later user after the kernels already enqueued on it."""
    return rt.allocator(max(n, 1) * rt.dtype.itemsize), np.uint32(0)


def fill(a: cla.Array, value: float) -> cla.Array:
    """Set every element of ``a`` to ``value`` with ``clEnqueueFillBuffer``: no kernel, so no program build
    (pyopencl's ``Array.fill`` compiles a kernel of its own, whose compiler remarks bypass
    ``opencl.program``'s quiet build). Non-contiguous arrays fall back to ``Array.fill``."""
    if not a.size:
        return a
    if not a.flags.c_contiguous:
        a.fill(value)
        return a
    pattern = np.asarray(value, dtype=a.dtype).reshape(1)
    cl.enqueue_fill_buffer(a.queue, a.base_data, pattern, a.offset, a.nbytes)
    return a


def zeros(rt, shape: tuple[int, ...] | int, dtype=None) -> cla.Array:
    return fill(empty(rt, shape, dtype), 0)


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
    return fill(a, np.nan if np.issubdtype(a.dtype, np.floating) else -1)


def aligned_size(n: int, alignment: int) -> int:
    """``n`` rounded up to a multiple of ``alignment`` (to lay out views inside one flat buffer)."""
    return int(math.ceil(n / alignment) * alignment)


def view(flat: cla.Array, offset: int, shape: tuple[int, ...], alignment: int = 1) -> cla.Array:
    """A ``shape`` view of 1-D ``flat`` from element ``offset`` (a multiple of ``alignment``).

    Built with pyopencl's fast constructor rather than slicing (an order of magnitude slower): layers create
    views of the flat parameter and gradient buffers on every bind.
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
    strides = tuple(math.prod(shape[i + 1 :]) * itemsize for i in range(len(shape)))
    return DeviceArray(
        None,
        shape,
        flat.dtype,
        data=flat.base_data,
        offset=flat.offset + offset * itemsize,
        strides=strides,
        _fast=True,
        _size=n,
        _context=flat.context,
        _queue=flat.queue,
    )


def offset_of(a: cla.Array) -> int:
    """Element offset of ``a`` inside its base buffer."""
    return a.offset // a.dtype.itemsize


def arg(a: cla.Array) -> tuple[cl.MemoryObjectHolder, np.uint32]:
    """The two kernel arguments of an array: base buffer and element offset (see the module docstring)."""
    if not a.flags.c_contiguous and a.strides != c_strides(a.shape, a.dtype.itemsize):
        raise ShapeError(f"kernels need C-contiguous arrays, got strides {a.strides} for shape {a.shape}")
    return a.base_data, np.uint32(a.offset // a.dtype.itemsize)
