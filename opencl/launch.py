"""The one way a kernel of ours is launched: a ``KernelSpec`` declares its work-group, ``Launcher`` runs it.

Every op family of the ``nn`` OpenCL backend declares its kernels as a table of ``KernelSpec`` next to the
code that launches them: the ``.cl`` file, the kernel name and the work-group shape for each layout
(``cpu``: PoCL, where local-memory barriers are slow and a work-group function is compiled per distinct
local size; ``gpu``). ``Launcher.bind`` turns a table into ``BoundKernel`` objects (the ``cl.Kernel`` is
built on first use and kept), and a call ``bound(items, *args)`` rounds each axis of ``items`` up to the
work-group (kernels guard their tail) and enqueues through ``Runtime.launch`` (``set_args`` +
``enqueue_nd_range_kernel``, the kernel's device time recorded when the runtime profiles). ``opencl.blas``
launches its GEMM kernels through prepared ``opencl.plan.Plan`` objects instead, whose constant arguments
are set once per operand layout.

The launcher also owns what every family shares: the runtime, the layout, and pooled arrays (``empty``:
pyopencl's fast constructor with the shape metadata worked out once per shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from opencl.device import Runtime
from opencl.memory import DeviceArray
from opencl.program import kernels as build_kernels

LAYOUTS = ("cpu", "gpu")


@dataclass(frozen=True)
class KernelSpec:
    """One kernel and its work-group: ``cpu``/``gpu`` are the local sizes per layout (missing trailing axes
    are 1). With ``per_group`` the first axis of a launch counts work-groups (one group per row), else
    work items."""

    file: str
    name: str
    cpu: tuple[int, ...]
    gpu: tuple[int, ...]
    per_group: bool = False


def kernel_specs(
    file: str, names: str, cpu: tuple[int, ...], gpu: tuple[int, ...], per_group: bool = False
) -> tuple[KernelSpec, ...]:
    """The same work-group declared for several kernels of ``file`` (``names`` separated by spaces)."""
    return tuple(KernelSpec(file, name, cpu, gpu, per_group) for name in names.split())


class BoundKernel:
    """A ``KernelSpec`` bound to a launcher and build defines; calling it launches the kernel."""

    __slots__ = (
        "_defines",
        "_enqueue",
        "_group",
        "_kernel",
        "_launcher",
        "_local1",
        "local",
        "per_group",
        "spec",
    )

    def __init__(self, launcher: Launcher, spec: KernelSpec, defines: dict[str, object]) -> None:
        self._launcher, self.spec, self._defines = launcher, spec, defines
        self.local = spec.cpu if launcher.cpu else spec.gpu
        self.per_group = spec.per_group
        self._group = self.local[0]
        self._local1 = (self._group,)  # the work-group of a one-axis launch
        self._enqueue = launcher.enqueue
        self._kernel: cl.Kernel | None = None

    @property
    def kernel(self) -> cl.Kernel:
        """The kept ``cl.Kernel`` (its program is built on first use, once per runtime and defines)."""
        if self._kernel is None:
            programs = build_kernels(self._launcher.runtime, self.spec.file, **self._defines)
            self._kernel = programs[self.spec.name]
        return self._kernel

    def __call__(self, items: tuple[int, ...], *args) -> None:
        """Launch over ``items`` (work items per axis, or work-groups on axis 0 with ``per_group``);
        nothing is enqueued when an axis is empty."""
        if len(items) == 1:  # the hot path: one axis
            n = items[0]
            if n <= 0:
                return
            g = self._group
            size = (n * g,) if self.per_group else ((n + g - 1) // g * g,)
            self._enqueue(self._kernel or self.kernel, size, self._local1, *args)
            return
        if min(items) <= 0:
            return
        local = self.local + (1,) * (len(items) - len(self.local))
        size = tuple((n + g - 1) // g * g for n, g in zip(items, local, strict=True))
        if self.per_group:
            size = (items[0] * local[0], *size[1:])
        self._enqueue(self._kernel or self.kernel, size, local, *args)


class Launcher:
    """The shared runtime of the backend's op families: layout, pooled arrays, and the one enqueue."""

    def __init__(self, runtime: Runtime, layout: str | None = None) -> None:
        """``layout`` ("cpu" or "gpu") overrides the one chosen from the device kind, so the GPU kernels
        can be tested on a CPU."""
        layout = layout or ("cpu" if runtime.is_cpu else "gpu")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be 'cpu' or 'gpu', got {layout!r}")
        self.runtime = runtime
        self.layout = layout
        self.cpu = layout == "cpu"
        self.dtype = runtime.dtype
        self._queue = runtime.queue
        self._context = runtime.context
        self._allocator = runtime.allocator
        # The enqueue of every bound kernel (set_args + enqueue_nd_range_kernel, profiled when the runtime
        # profiles).
        self.enqueue = runtime.launch
        self._meta: dict[tuple, tuple] = {}  # (shape, dtype) -> (shape, dtype, strides, size) for empty()
        self.core: dict[str, BoundKernel] = {}  # the backend's core kernels (``bind_core``), by name
        self._fast_arrays = True
        try:
            self.empty((1,))
        except TypeError:  # a pyopencl without the fast constructor: use the public one
            self._fast_arrays = False

    def bind(self, specs: tuple[KernelSpec, ...], **defines: object) -> dict[str, BoundKernel]:
        """Bound kernels by name, built with ``defines`` (``-D`` options) when first launched."""
        return {spec.name: BoundKernel(self, spec, dict(defines)) for spec in specs}

    def bind_core(self, specs: tuple[KernelSpec, ...], **defines: object) -> dict[str, BoundKernel]:
        """``bind`` for the backend's core kernels, kept as ``core``: an op family that needs one of them
        (attention's dropout product is the core ``mul``) launches that kernel, from the program built with
        the backend's defines, instead of a copy in its own file."""
        self.core = self.bind(specs, **defines)
        return self.core

    @staticmethod
    def arg(t: cla.Array) -> tuple:
        """(base buffer, element offset): how every kernel of ours receives an array."""
        return t.base_data, t.offset // t.dtype.itemsize

    def empty(self, shape: tuple[int, ...], dtype=None) -> cla.Array:
        """An uninitialised pooled array. Uses pyopencl's fast constructor (several times cheaper than the
        public one) with the shape, strides and size worked out once per (shape, dtype)."""
        try:
            meta = self._meta.get((shape, dtype))
        except TypeError:  # an unhashable shape (a list)
            shape, meta = tuple(shape), None
        if meta is None:
            meta = self.describe(shape, dtype)
        shape, dt, strides, size = meta
        if not self._fast_arrays:
            return DeviceArray(self._queue, shape, dt, allocator=self._allocator)
        return DeviceArray(
            None,
            shape,
            dt,
            allocator=self._allocator,
            strides=strides,
            _fast=True,
            _size=size,
            _context=self._context,
            _queue=self._queue,
        )

    def describe(self, shape, dtype) -> tuple:
        """(shape, dtype, strides, size) of a C-contiguous array, memoised for ``empty`` and views."""
        meta = self._meta.get((shape, dtype))
        if meta is not None:
            return meta
        dims = tuple(int(d) for d in shape)
        dt = self.dtype if dtype is None else np.dtype(dtype)
        strides = cla.empty(self._queue, dims, dt, allocator=self._allocator).strides
        meta = (dims, dt, strides, math.prod(dims))
        self._meta[(shape, dtype)] = meta
        return meta

    @property
    def fast_arrays(self) -> bool:
        """Whether this pyopencl has the fast array constructor ``empty`` and views use."""
        return self._fast_arrays

    def view_of(self, flat: cla.Array, offset: int, meta: tuple) -> cla.Array:
        """A view of ``flat`` at element ``offset`` with ``describe``'s ``meta`` (callers check bounds)."""
        shape, dt, strides, size = meta
        return DeviceArray(
            None,
            shape,
            dt,
            data=flat.base_data,
            offset=flat.offset + offset * dt.itemsize,
            strides=strides,
            _fast=True,
            _size=size,
            _context=self._context,
            _queue=self._queue,
        )
