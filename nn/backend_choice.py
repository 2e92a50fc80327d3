"""Which backend a model trains on: ``get_backend`` by name, and the name check that runs before any work.

A module of its own so that ``Sequential`` and the model files can ask for a backend without importing the
package that imports them.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from neuronet.errors import NeuronetError
from nn.backend import Backend
from nn.errors import NNConfigError, NNTypeError

log = logging.getLogger("nn")


class BackendUnavailableError(NeuronetError, OSError):
    """The requested backend cannot run here (e.g. no OpenCL platform); the message says what to do."""


def get_backend(
    name: str | Backend = "auto",
    device: Any = None,
    dtype: Any = None,
    *,
    profile: bool = False,
    fused_online: bool = True,
) -> Backend:
    """A backend by name: ``"numpy"`` (float64 reference), ``"opencl"`` (``device``/``dtype`` optional) or
    ``"auto"`` (the default everywhere: the best usable OpenCL device, else NumPy with a logged warning).

    OpenCL options, passed explicitly: ``profile`` records per-kernel device time (off unless asked for;
    ``backtests.Backtest(profile=True)`` asks for it on an EA's behalf); ``fused_online=False``
    trains batch 1 step by step where the fused epoch would apply. A ``Backend`` instance is returned
    unchanged. The OpenCL backend is imported only when asked for, so
    the NumPy backend works on machines without any OpenCL runtime.
    """
    if not isinstance(name, str):
        if isinstance(name, Backend):
            return name
        raise NNTypeError(f"backend must be 'numpy', 'opencl' or a Backend object, got {name!r}")
    key = check_backend_name(name)
    if key == "auto":
        try:
            return get_backend("opencl", device, dtype, profile=profile, fused_online=fused_online)
        except (OSError, ValueError) as exc:
            log.warning("training on the NumPy backend: %s", exc)
            return get_backend("numpy")
    if key == "numpy":
        if device is not None or (dtype is not None and np.dtype(dtype) != np.float64):
            raise NNConfigError(
                "the numpy backend is the float64 reference: it takes no device and no other dtype"
            )
        from nn.ops_numpy import NumpyBackend

        return NumpyBackend()
    # "opencl" or "opencl:<device>": check_backend_name lets nothing else through
    try:
        from nn.ops_opencl import OpenCLBackend
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the OpenCL backend cannot be imported ({exc}); install pyopencl and an OpenCL driver "
            "(on Linux x86-64: pip install pocl-binary-distribution), or use backend='numpy'"
        ) from None
    if device is None and key.startswith("opencl:"):
        device = name.split(":", 1)[1]
    try:
        return OpenCLBackend(device=device, dtype=dtype, profile=profile, fused_online=fused_online)
    except (ValueError, OSError):
        raise  # already a one-line user error from the OpenCL layer
    except Exception as exc:  # a raw pyopencl/driver error: say which backend failed and the fallback
        raise BackendUnavailableError(
            f"no usable OpenCL device ({type(exc).__name__}: {exc}); use backend='numpy' instead"
        ) from None


def check_backend_name(name: str, *, device: bool = False) -> str:
    """``name`` as ``get_backend`` reads it ("auto", "numpy", "opencl" or "opencl:<device>"), lower-cased,
    checked without starting a backend, so a caller can refuse a bad name before any work (the command
    line before it reads data, an expert advisor when its parameters are set). With ``device=True`` the
    device of "opencl:<device>" must also match one that is there (``opencl.device.choose_device``)."""
    key = str(name).strip().lower()
    kind, sep, wanted = key.partition(":")
    if kind not in ("auto", "numpy", "opencl") or (sep and (kind != "opencl" or not wanted.strip())):
        raise NNConfigError(f"unknown backend {name!r}: expected auto, numpy, opencl or opencl:<device>")
    if device and wanted.strip():
        try:
            from opencl.device import choose_device
        except ImportError as exc:
            raise BackendUnavailableError(
                f"backend {name!r}: the OpenCL backend cannot be imported ({exc})"
            ) from None
        choose_device(str(name).strip().partition(":")[2].strip())
    return key
