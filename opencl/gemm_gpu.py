"""GPU path of ``blas.gemm``: picks a tile configuration for the problem and launches ``gemm_gpu.cl``.

Big products use 128x128 blocks with 8x8 per item (256 items); when that leaves most compute units idle
(the small matrices of a dense layer at batch 256) smaller blocks give more work-groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from opencl import memory
from opencl.program import kernels


@dataclass(frozen=True)
class Tiles:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def items(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


# Measured on an H200 at 4096^3 (benchmarks/RESULTS.md): 128x128x16 with 8x8 per item was the fastest.
CONFIGS = (Tiles(128, 128, 16, 8, 8), Tiles(64, 64, 16, 4, 4), Tiles(32, 32, 16, 4, 4))


def choose_tiles(rt, M: int, N: int) -> Tiles:
    """The largest configuration that still gives every compute unit a work-group (and fits the device)."""
    fitting = [t for t in CONFIGS if t.items <= rt.info.max_work_group_size
               and 2 * t.bk * (max(t.bm, t.bn) + 4) * rt.dtype.itemsize <= rt.info.local_mem_bytes]
    if not fitting:
        fitting = [CONFIGS[-1]]
    for t in fitting:
        if -(-M // t.bm) * -(-N // t.bn) >= rt.info.compute_units:
            return t
    return fitting[-1]


def gemm_gpu(rt, A, B, C, bias, has_bias, M, N, K, trans_a, trans_b, alpha, beta, ep, tiles=None) -> None:
    t = tiles or choose_tiles(rt, M, N)
    even = M % t.bm == 0 and N % t.bn == 0 and K % t.bk == 0
    k = kernels(rt, "gemm_gpu.cl", BM=t.bm, BN=t.bn, BK=t.bk, TM=t.tm, TN=t.tn, TRANS_A=trans_a,
                TRANS_B=trans_b, EVEN=even)
    local = (t.bn // t.tn, t.bm // t.tm)
    grid = (-(-N // t.bn) * local[0], -(-M // t.bm) * local[1])
    rt.launch(
        k.gemm_gpu, grid, local,
        *memory.arg(A), *memory.arg(B), *memory.arg(C), *memory.arg(bias),
        M, N, K, A.shape[1], B.shape[1], C.shape[1], alpha, beta, int(has_bias), ep.code, ep.a, ep.b,
    )
