"""Errors of the OpenCL runtime.

They subclass ``OSError`` (the environment lacks something: no platform, no usable device) or ``ValueError``
(the caller asked for something impossible: an unknown device, float64 without ``cl_khr_fp64``), so the
command line prints them as one line instead of a traceback.
"""

from __future__ import annotations


class OpenCLError(Exception):
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
