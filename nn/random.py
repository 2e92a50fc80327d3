"""Counter-based random numbers that the host and every device draw identically.

A dropout mask must not need a host RNG inside the training loop, and the NumPy reference must be able to
reproduce the OpenCL mask bit for bit. A stateless hash of ``(seed, counter, index)`` gives both: the
OpenCL kernels compute the same ``hash32`` (``opencl/kernels/common.h``) on ``uint`` arithmetic.

``hash32`` is Chris Wellons' "lowbias32" integer finaliser (two multiply-xorshift rounds), which passes
avalanche tests and costs a handful of integer instructions.
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint32(0x7FEB352D)
_M2 = np.uint32(0x846CA68B)


def hash32(x: np.ndarray) -> np.ndarray:
    """Bijective 32-bit mix of ``x`` (uint32 in, uint32 out, wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint32).copy()
    x ^= x >> np.uint32(16)
    x *= _M1
    x ^= x >> np.uint32(15)
    x *= _M2
    x ^= x >> np.uint32(16)
    return x


def uniform01(seed: int, counter: int, index: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1) with 24 random bits: ``hash32(hash32(hash32(index) ^ counter) ^ seed)``."""
    h = hash32(hash32(hash32(index) ^ np.uint32(counter & 0xFFFFFFFF)) ^ np.uint32(seed & 0xFFFFFFFF))
    return (h >> np.uint32(8)).astype(np.float64) * (1.0 / (1 << 24))
