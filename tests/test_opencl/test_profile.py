"""Per-kernel device time from OpenCL events."""

from __future__ import annotations

import numpy as np

from opencl import get_runtime, memory
from opencl.blas import gemm


def test_profiling_aggregates_by_kernel_name(rt32):
    prt = get_runtime(rt32.info, profile=True)
    assert prt.profiler.enabled
    prt.profiler.reset()
    a = memory.to_device(prt, np.ones((40, 30)))
    b = memory.to_device(prt, np.ones((30, 20)))
    c = memory.empty(prt, (40, 20))
    for _ in range(3):
        gemm(prt, a, b, c)
    seconds = prt.profiler.device_seconds()
    stats = prt.profiler.stats()
    products = [s for s in stats if s.name.startswith("gemm") and "pack" not in s.name]
    assert sum(s.calls for s in products) == 3
    assert seconds > 0
    assert "gemm" in prt.profiler.table()


def test_disabled_profiler_reports_none(rt32):
    plain = get_runtime(rt32.info, profile=False)
    assert plain.profiler.device_seconds() is None
