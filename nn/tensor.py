"""The tensor type of the op layer (``nn.backend``): what every op of every family takes and returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:  # the NumPy backend must work without pyopencl installed
    import pyopencl.array as cla

Tensor: TypeAlias = "np.ndarray | cla.Array"
"""``np.ndarray`` (float64) on the NumPy backend, ``pyopencl.array.Array`` on the OpenCL backend."""
