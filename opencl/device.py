"""OpenCL platforms and devices: listing them, what neuronet needs to know of each, and the per-device
``Runtime`` (context, queue, memory pool, compiled programs).

Which device is used is decided in ``opencl.choice``; whether a device works, in ``opencl.selfcheck``. The
drivers pip installed are registered with the ICD loader (``opencl.vendors``) before platforms are listed.

``python -m opencl`` prints the list.
"""

from __future__ import annotations

import platform
import sys
import threading
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl
import pyopencl.tools

from opencl.errors import DtypeError, NoDeviceError
from opencl.profile import Profiler
from opencl.vendors import register


@dataclass(frozen=True)
class DeviceInfo:
    """What neuronet needs to know about one device (read once from the driver)."""

    index: str  # "P:D": platform index, device index
    platform: str
    platform_version: str
    name: str
    kind: str  # "gpu", "cpu", "accelerator" or "other"
    compute_units: int
    global_mem_bytes: int
    local_mem_bytes: int
    max_work_group_size: int
    fp64: bool  # cl_khr_fp64: float64 kernels are possible
    driver_version: str
    base_align_bytes: int  # CL_DEVICE_MEM_BASE_ADDR_ALIGN, converted from bits
    device: cl.Device = field(compare=False, repr=False)

    def alignment(self, dtype: np.dtype | type) -> int:
        """Element alignment of sub-buffer offsets for ``dtype`` (views of flat buffers start there)."""
        return max(1, self.base_align_bytes // np.dtype(dtype).itemsize)


def install_hint(compile_failed: bool = False) -> str:
    """How to get a working OpenCL device on this operating system.

    ``compile_failed``: devices exist but none passes the self-check. On Linux x86-64 neuronet installs two
    CPU drivers from PyPI (pip's PoCL and Intel's oneAPI CPU runtime, which compiles for any x86-64 CPU), so
    this means they were removed or cannot load; the message says how to put them back.
    """
    fallback = "; meanwhile the training commands run on the NumPy backend (--backend numpy)"
    if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64"):
        again = " (`neuronet devices --recheck` tests the devices again)" if compile_failed else ""
        return (
            "Install a CPU device with `pip install intel-opencl-rt intel-cmplr-lib-rt` (Intel's OpenCL CPU "
            "runtime, for Intel and AMD processors) or `pip install pocl-binary-distribution`, or your GPU "
            f"vendor's OpenCL driver{again}" + fallback
        )
    if sys.platform == "darwin":
        return "macOS ships OpenCL with the system; check that pyopencl was installed for this Python"
    return "Install your GPU or CPU vendor's OpenCL driver (NVIDIA, AMD or Intel)" + fallback


def _kind(device: cl.Device) -> str:
    t = device.type
    if t & cl.device_type.GPU:
        return "gpu"
    if t & cl.device_type.CPU:
        return "cpu"
    if t & cl.device_type.ACCELERATOR:
        return "accelerator"
    return "other"


def _info(p: int, d: int, plat: cl.Platform, dev: cl.Device) -> DeviceInfo:
    return DeviceInfo(
        index=f"{p}:{d}",
        platform=plat.name.strip(),
        platform_version=plat.version.strip(),
        name=dev.name.strip(),
        kind=_kind(dev),
        compute_units=int(dev.max_compute_units),
        global_mem_bytes=int(dev.global_mem_size),
        local_mem_bytes=int(dev.local_mem_size),
        max_work_group_size=int(dev.max_work_group_size),
        fp64="cl_khr_fp64" in dev.extensions.split(),
        driver_version=dev.driver_version.strip(),
        base_align_bytes=max(1, int(dev.mem_base_addr_align) // 8),
        device=dev,
    )


def list_devices() -> list[DeviceInfo]:
    """Every device of every platform, in driver order; raises ``NoDeviceError`` when there is none."""
    register()  # before the loader's first call: it reads its vendors folder once
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # the ICD loader reports "no platform" as an error, not an empty list
        raise NoDeviceError(f"no OpenCL platform found ({exc}); {install_hint()}") from None
    out = []
    for p, plat in enumerate(platforms):
        try:
            devices = plat.get_devices()
        except cl.Error:  # a platform without devices
            continue
        out.extend(_info(p, d, plat, dev) for d, dev in enumerate(devices))
    if not out:
        raise NoDeviceError(f"OpenCL platforms exist but list no device; {install_hint()}")
    return out


class Runtime:
    """One device in use: context, in-order queue, memory pool, element type, compiled programs.

    Attributes most callers need: ``queue``, ``allocator`` (pass to ``pyopencl.array`` constructors),
    ``dtype`` (float32 by default; float64 where the device has ``cl_khr_fp64``), ``real`` (the OpenCL C
    name of ``dtype``), ``alignment`` (element offsets of views must be multiples of it), ``profiler``.
    Obtain one through ``get_runtime`` so that each (device, dtype) pair has one context and one program
    cache.
    """

    def __init__(self, info: DeviceInfo, dtype: np.dtype | type | str | None = None, profiling: bool = False):
        self.info = info
        self.dtype = np.dtype(dtype if dtype is not None else np.float32)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise DtypeError(f"dtype must be float32 or float64, got {self.dtype}")
        if self.dtype == np.float64 and not info.fp64:
            raise DtypeError(f"device {info.name!r} has no cl_khr_fp64: float64 is unavailable, use float32")
        self.real = "double" if self.dtype == np.float64 else "float"
        self.alignment = info.alignment(self.dtype)
        self.context = cl.Context([info.device])
        props = cl.command_queue_properties.PROFILING_ENABLE if profiling else 0
        self.queue = cl.CommandQueue(self.context, properties=props)
        self.allocator = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(self.queue))
        self.profiler = Profiler(self.queue, enabled=profiling)
        self.programs: dict[tuple, object] = {}  # filled by opencl.program.kernels
        self.plans: dict[tuple, object] = {}  # prepared products by operand layout, filled by opencl.blas
        self.build_seconds = 0.0  # wall time spent compiling programs, added to by opencl.program.kernels
        self._timing_queue: cl.CommandQueue | None = None

    @property
    def timing_queue(self) -> cl.CommandQueue:
        """A profiling queue on this runtime's context (made on first use), for timing kernels by their
        device time: a product shorter than a launch's host cost cannot be timed by the host's clock."""
        if self._timing_queue is None:
            props = cl.command_queue_properties.PROFILING_ENABLE
            self._timing_queue = cl.CommandQueue(self.context, properties=props)
        return self._timing_queue

    @property
    def is_cpu(self) -> bool:
        return self.info.kind == "cpu"

    def launch(
        self, kernel: cl.Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, *args
    ) -> cl.Event:
        """Enqueue ``kernel`` (scalar argument dtypes already set); records its time when profiling.

        ``set_args`` + ``enqueue_nd_range_kernel`` is a few microseconds cheaper than calling the kernel.
        """
        kernel.set_args(*args)
        event = cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        if self.profiler.enabled:
            self.profiler.record(kernel.function_name, event)
        return event

    def synchronize(self) -> None:
        """Wait until every queued command has finished."""
        self.queue.finish()

    def __repr__(self) -> str:
        return f"Runtime({self.info.index} {self.info.name!r}, {self.dtype.name})"


_runtimes: dict[tuple, Runtime] = {}
_lock = threading.Lock()


def shared_runtime(
    info: DeviceInfo, dtype: np.dtype | type | str | None = None, profiling: bool = False
) -> Runtime:
    """The one ``Runtime`` of this process for (device, dtype, profiling), created on first use, so that
    each pair has one context and one program cache (``opencl.get_runtime`` chooses the device first)."""
    key = (info.index, info.name, np.dtype(dtype or np.float32).name, bool(profiling))
    with _lock:
        rt = _runtimes.get(key)
        if rt is None:
            rt = _runtimes[key] = Runtime(info, dtype, bool(profiling))
    return rt


def describe(infos: list[DeviceInfo]) -> str:
    """A plain-text table of devices (used by ``python -m opencl``)."""
    rows = [
        f"{d.index:>5}  {d.kind:<4} {d.name} | {d.platform} | CUs {d.compute_units} | "
        f"{d.global_mem_bytes / 2**30:.1f} GiB | fp64 {'yes' if d.fp64 else 'no'} | "
        f"driver {d.driver_version}"
        for d in infos
    ]
    return "\n".join(rows)
