"""The OpenCL runtime of neuronet: devices, kernel programs, pooled device arrays, profiling, GEMM.

Typical use (the ``nn`` OpenCL backend does this)::

    from opencl import get_runtime, kernels, memory
    rt = get_runtime()                       # argument > NEURONET_DEVICE > fastest GPU > fastest CPU
    k = kernels(rt, "activations.cl")       # built once per runtime and defines
    x = memory.to_device(rt, host_array)    # pooled pyopencl.array.Array
    rt.launch(k.tanh_forward, (n,), None, *memory.arg(x), *memory.arg(y), np.uint32(n))

Importing it registers the OpenCL drivers pip installed with the ICD loader (``opencl.vendors``), before
anything can make the first OpenCL call. This package imports nothing else of neuronet but its shared
modules (errors, the atomic writer, the cache folder).
"""

from opencl.vendors import register

register()

from opencl import memory  # noqa: E402  (after the registration above)
from opencl.choice import Choice, choose_device, get_runtime  # noqa: E402
from opencl.device import DeviceInfo, Runtime, list_devices  # noqa: E402
from opencl.errors import (  # noqa: E402
    DeviceChoiceError,
    DtypeError,
    KernelBuildError,
    NoDeviceError,
    OpenCLError,
    ShapeError,
)
from opencl.program import Kernels, kernels  # noqa: E402

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
