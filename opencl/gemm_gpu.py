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


def gemm_gpu(rt, A, B, C, bias, p, tiles: Tiles | None = None) -> None:
    """Launch ``gemm_gpu.cl`` for a validated ``blas._Problem``; one grid layer per product."""
    t = tiles or choose_tiles(rt, p.M, p.N)
    even = p.M % t.bm == 0 and p.N % t.bn == 0 and p.K % t.bk == 0
    k = kernels(rt, "gemm_gpu.cl", BM=t.bm, BN=t.bn, BK=t.bk, TM=t.tm, TN=t.tn, TRANS_A=p.trans_a,
                TRANS_B=p.trans_b, EVEN=even)
    local = (t.bn // t.tn, t.bm // t.tm, 1)
    grid = (-(-p.N // t.bn) * local[0], -(-p.M // t.bm) * local[1], p.G)
    rt.launch(
        k.gemm_gpu, grid, local,
        *memory.arg(A), *memory.arg(B), *memory.arg(C), *memory.arg(bias),
        p.M, p.N, p.K, A.shape[-1], B.shape[-1], C.shape[-1], *p.tail,
    )
