"""OpenCL platforms and devices: listing, choosing one, and the per-device ``Runtime``.

Choice order (first that applies): an explicit ``device`` argument, the ``NEURONET_DEVICE`` environment
variable, the first GPU, the first CPU. A specification is ``"gpu"``, ``"cpu"``, ``"P:D"`` (platform index,
device index, as ``neuronet devices`` lists them) or a case-insensitive substring of the device or platform
name. Automatic choices skip devices whose compiler cannot build a trivial kernel (some packaged PoCL builds
ship an LLVM that does not know the host CPU); an explicit choice is never second-guessed.

``python -m opencl`` prints the list.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import pyopencl as cl
import pyopencl.tools

from opencl.errors import DeviceChoiceError, DtypeError, NoDeviceError
from opencl.profile import Profiler
from opencl.program import build_quietly

log = logging.getLogger(__name__)

ENV_DEVICE = "NEURONET_DEVICE"


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


@dataclass(frozen=True)
class Choice:
    """The chosen device and why it was chosen (shown by ``neuronet devices``)."""

    info: DeviceInfo
    reason: str


def install_hint(compile_failed: bool = False) -> str:
    """How to get a working OpenCL device on this operating system.

    ``compile_failed``: devices exist but none compiles, typically pip's PoCL 3.0 (LLVM 14) on a CPU newer
    than its LLVM knows; reinstalling the same package would not help, the distribution's PoCL does.
    """
    fallback = "; meanwhile the training commands run on the NumPy backend (--backend numpy)"
    if compile_failed and sys.platform.startswith("linux"):
        return (
            "Install your distribution's PoCL (Debian/Ubuntu: `sudo apt-get install pocl-opencl-icd`), "
            "which compiles for recent CPUs, or your GPU vendor's OpenCL driver" + fallback
        )
    if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64"):
        return (
            "Install a CPU device with `pip install pocl-binary-distribution` (or your distribution's "
            "PoCL: `sudo apt-get install pocl-opencl-icd`), or your GPU vendor's OpenCL driver" + fallback
        )
    if sys.platform == "darwin":
        return "macOS ships OpenCL with the system; check that pyopencl was installed for this Python"
    return "Install your GPU or CPU vendor's OpenCL driver (NVIDIA, AMD or Intel)"


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


_probe_results: dict[str, str | None] = {}


def probe(info: DeviceInfo) -> str | None:
    """Build a trivial kernel on ``info``: ``None`` if it works, else the reason (memoised per device)."""
    if info.index not in _probe_results:
        source = resources.files("opencl").joinpath("kernels", "probe.cl").read_text()
        try:
            ctx = cl.Context([info.device])
            build_quietly(ctx, source, [], "probe.cl")
            _probe_results[info.index] = None
        except cl.Error as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if "error" in ln.lower()]
            _probe_results[info.index] = lines[-1] if lines else str(exc).splitlines()[0]
    return _probe_results[info.index]


def _match(spec: str, devices: list[DeviceInfo]) -> list[DeviceInfo]:
    s = spec.strip().lower()
    if s in ("gpu", "cpu", "accelerator"):
        return [d for d in devices if d.kind == s]
    if ":" in s and all(part.strip().isdigit() for part in s.split(":", 1)):
        p, d = (int(part) for part in s.split(":", 1))
        return [x for x in devices if x.index == f"{p}:{d}"]
    return [d for d in devices if s in d.name.lower() or s in d.platform.lower()]


def choose_device(device: str | DeviceInfo | None = None) -> Choice:
    """Pick the device by argument > ``NEURONET_DEVICE`` > first usable GPU > first usable CPU."""
    if isinstance(device, DeviceInfo):
        return Choice(device, "given as an argument")
    devices = list_devices()
    env = os.environ.get(ENV_DEVICE, "").strip()
    for spec, origin in ((device, "the device argument"), (env or None, f"{ENV_DEVICE}={env}")):
        if spec is None:
            continue
        found = _match(str(spec), devices)
        if not found:
            listing = ", ".join(f"{d.index} {d.name} ({d.kind})" for d in devices)
            raise DeviceChoiceError(
                f"no OpenCL device matches {spec!r} (from {origin}); available: {listing}. "
                "Use 'gpu', 'cpu', 'P:D' or part of a device name"
            )
        usable = [d for d in found if probe(d) is None]
        return Choice((usable or found)[0], f"chosen by {origin}")
    skipped = []
    for kind in ("gpu", "cpu", "accelerator", "other"):
        for d in devices:
            if d.kind != kind:
                continue
            problem = probe(d)
            if problem is None:
                note = f" (skipped: {'; '.join(skipped)})" if skipped else ""
                return Choice(d, f"default: first usable {kind.upper()}{note}")
            skipped.append(f"{d.index} {d.name}: {problem}")
    raise NoDeviceError(
        "no OpenCL device can compile kernels: " + "; ".join(skipped) + f". {install_hint(True)}"
    )


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
        self.build_seconds = 0.0  # wall time spent compiling programs, added to by opencl.program.kernels

    @property
    def is_cpu(self) -> bool:
        return self.info.kind == "cpu"

    def launch(self, kernel: cl.Kernel, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               *args) -> cl.Event:
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


def get_runtime(device: str | DeviceInfo | None = None, dtype: np.dtype | type | str | None = None,
                profile: bool = False) -> Runtime:
    """The shared ``Runtime`` for the chosen device and dtype (created on first use).

    ``profile=True`` gives a profiling runtime, a separate one (its queue
    records event times, which costs a little per launch).
    """
    choice = choose_device(device)
    profiling = bool(profile)
    key = (choice.info.index, choice.info.name, np.dtype(dtype or np.float32).name, profiling)
    with _lock:
        rt = _runtimes.get(key)
        if rt is None:
            rt = Runtime(choice.info, dtype, profiling)
            log.info("OpenCL runtime on %s %s (%s), %s", choice.info.index, choice.info.name, choice.reason,
                     rt.dtype.name)
            _runtimes[key] = rt
    return rt


def describe(infos: list[DeviceInfo]) -> str:
    """A plain-text table of devices (used by ``python -m opencl``)."""
    rows = [f"{d.index:>5}  {d.kind:<4} {d.name} | {d.platform} | CUs {d.compute_units} | "
            f"{d.global_mem_bytes / 2**30:.1f} GiB | fp64 {'yes' if d.fp64 else 'no'} | "
            f"driver {d.driver_version}" for d in infos]
    return "\n".join(rows)

