"""Errors of the OpenCL runtime.

All derive from ``neuronet.errors.NeuronetError`` (a user-fixable error: the command line prints it as one
line instead of a traceback) and from ``OSError`` (the environment lacks something: no platform, no usable
device) or ``ValueError`` (the caller asked for something impossible: an unknown device, float64 without
``cl_khr_fp64``).
"""

from __future__ import annotations

from neuronet.errors import NeuronetError


class OpenCLError(NeuronetError):
    """Base class of every error raised by ``opencl``."""


class NoDeviceError(OpenCLError, OSError):
    """No OpenCL platform or no usable device is installed."""


class DeviceChoiceError(OpenCLError, ValueError):
    """A device specification (argument or ``NEURONET_DEVICE``) matches no device."""


class DtypeError(OpenCLError, ValueError):
    """An element type the device cannot compute in (float64 without ``cl_khr_fp64``)."""


class KernelBuildError(OpenCLError, OSError):
    """A kernel file failed to compile; the message holds the file, the options and the compiler log."""


class ShapeError(OpenCLError, ValueError):
    """Operands of a device operation have incompatible shapes, dtypes or alignments."""
