"""The OpenCL runtime of neuronet: devices, kernel programs, pooled device arrays, profiling, GEMM.

Typical use (the ``nn`` OpenCL backend does this)::

    from opencl import get_runtime, kernels, memory
    rt = get_runtime()                       # argument > NEURONET_DEVICE > first GPU > first CPU
    k = kernels(rt, "activations.cl")       # built once per runtime and defines
    x = memory.to_device(rt, host_array)    # pooled pyopencl.array.Array
    rt.launch(k.tanh_forward, (n,), None, *memory.arg(x), *memory.arg(y), np.uint32(n))

This package imports nothing else of neuronet.
"""

from opencl import memory
from opencl.device import Choice, DeviceInfo, Runtime, choose_device, get_runtime, list_devices
from opencl.errors import (
    DeviceChoiceError,
    DtypeError,
    KernelBuildError,
    NoDeviceError,
    OpenCLError,
    ShapeError,
)
from opencl.program import Kernels, kernels

__all__ = [
    "Choice",
    "DeviceChoiceError",
    "DeviceInfo",
    "DtypeError",
    "KernelBuildError",
    "Kernels",
    "NoDeviceError",
    "OpenCLError",
    "Runtime",
    "ShapeError",
    "choose_device",
    "get_runtime",
    "kernels",
    "list_devices",
    "memory",
]
