"""GPU path of ``blas.gemm``: chooses a tile configuration and a K split, then launches ``gemm_gpu.cl``.

Which tile configuration is fastest depends on the transposition and the shape more than on anything a
rule can see: on an H200 double-buffering 128x128 blocks pays with BK 8 for x·wᵀ and costs 1.3x with BK
16 for x·w, and a batch-256 product of a few hundred columns runs fastest in 64x32 or 32x64 blocks
(benchmarks/RESULTS.md). So every product but the tiniest is tuned once per shape, the way BLAS autotuners
do it: every configuration that fits the device is run on the real operands (into a scratch output) on a
profiling queue, several times back to back as a training step runs it, timed by its kernels' events (the
host's clock would add the host's own work), and the fastest is kept for the rest of the process. All
configurations add the products along K in the same order, so the choice never changes a result.

Products whose M x N has too few blocks to occupy the device are split along K: each slice of K gets its
own grid layer writing a partial sum, and a second launch adds them in a fixed order. A weight gradient
over 20,000 samples (K = 20,000, M x N = 512 x 16) needs it to fill the device at all; a batch-256 one
(K = 256, 62 x 125) needs it because a work-group walking a long K with a small tile spends each step
waiting on memory (an H200: 20.8 µs whole, 17.9 µs in 8 slices). The number of slices and their length
depend only on the shape and the device, never on the timed tile choice, so runs stay reproducible.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

from opencl import memory
from opencl.plan import (
    OP_A,
    OP_A2,
    OP_B,
    OP_B2,
    OP_BIAS,
    OP_BIAS2,
    OP_C,
    OP_C2,
    SCRATCH,
    Launch,
    Plan,
    operand,
)
from opencl.program import kernels

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tiles:
    """A block configuration of ``gemm_gpu.cl``: BM x BN blocks of C, BK steps along K, TM x TN per item, and
    1 or 2 stages of local tiles (two: the next tile is stored while the current one is multiplied)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    stages: int = 2

    @property
    def items(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def blocks(self, M: int, N: int, G: int) -> int:
        return -(-M // self.bm) * -(-N // self.bn) * G


# The block shapes measured on an H200 (benchmarks/RESULTS.md), largest blocks first; each double-buffered
# first, then single-buffered (which needs half the local memory). Every BK divides SLICE_K_STEP.
_BLOCKS = (
    (128, 128, 16, 8, 8),
    (128, 128, 8, 8, 8),
    (128, 64, 16, 8, 4),
    (128, 64, 8, 8, 4),
    (64, 64, 16, 4, 4),
    (64, 64, 8, 4, 4),
    (64, 32, 16, 4, 4),
    (32, 64, 16, 4, 4),
    (32, 32, 16, 4, 4),
)
CONFIGS = tuple(Tiles(*b, stages=s) for b in _BLOCKS for s in (2, 1))
# Below this many multiply-adds a product takes about a launch's fixed cost on the device whichever
# configuration runs it: not worth timing, any configuration that fills the device does.
TUNE_MIN_MACS = 1 << 20
TUNE_REPS = 8  # back-to-back runs timed per configuration, after an untimed one
MAX_SPLIT = 16
SPLIT_MIN_K = 256  # products with a shorter K are not split: the reduction's launch costs more than it saves
MIN_SLICE_K = 32  # each slice of K keeps at least this many steps
SLICE_K_STEP = 16  # slice lengths are multiples of this, whatever BK the timed configuration has

_chosen: dict[tuple, Tiles] = {}


def fitting(rt) -> list[Tiles]:
    """The configurations the device can run (work-group size, local memory)."""
    out = [
        t
        for t in CONFIGS
        if t.items <= rt.info.max_work_group_size
        and 2 * t.stages * t.bk * (max(t.bm, t.bn) + 4) * rt.dtype.itemsize <= rt.info.local_mem_bytes
    ]
    return out or [CONFIGS[-1]]


def choose_tiles(rt, M: int, N: int, G: int = 1) -> Tiles:
    """The largest fitting configuration that still gives every compute unit a work-group."""
    configs = fitting(rt)
    for t in configs:
        if t.blocks(M, N, G) >= rt.info.compute_units:
            return t
    return configs[-1]


def split_k(rt, M: int, N: int, K: int, G: int) -> int:
    """Slices of K for a product whose 64x64 blocks number fewer than the compute units (1: no split).

    Aims at about two work-groups per compute unit, each slice at least ``MIN_SLICE_K`` long; a K under
    ``SPLIT_MIN_K`` is not split.
    """
    blocks = -(-M // 64) * -(-N // 64)
    units = rt.info.compute_units
    if G != 1 or blocks >= units or K < SPLIT_MIN_K:
        return 1
    return max(1, min(MAX_SPLIT, (2 * units) // blocks, K // MIN_SLICE_K))


def slice_length(K: int, slices: int) -> int:
    """The K steps of each slice (the last may be shorter): a multiple of ``SLICE_K_STEP``, so that every
    configuration adds the same partial sums."""
    if slices <= 1:
        return K
    per_slice = -(-K // slices)
    return -(-per_slice // SLICE_K_STEP) * SLICE_K_STEP


def gemm_gpu(rt, A, B, C, bias, p, tiles: Tiles | None = None, split: int | None = None) -> None:
    """Launch ``gemm_gpu.cl`` once for a validated ``blas._Problem`` (tiles and split chosen unless given).

    ``blas.gemm`` keeps the launches of each operand layout instead (``gpu_plan``); this one-off form is
    for explicit tiles (tuning, tests)."""
    slices = split_k(rt, p.M, p.N, p.K, p.G) if split is None else split
    if tiles is None:
        tiles = _tuned(rt, A, B, C, bias, p, slices)
    _enqueue(rt, A, B, C, bias, p, tiles, slices)


def gpu_plan(rt, A, B, C, bias, p) -> Plan:
    """The prepared launches of a validated product: its K split, its tuned tiles (timed now if large)."""
    slices = split_k(rt, p.M, p.N, p.K, p.G)
    return _launches(rt, A, B, C, bias, p, _tuned(rt, A, B, C, bias, p, slices), slices)


def _tuned(rt, A, B, C, bias, p, slices: int) -> Tiles:
    key = (rt.info.index, rt.info.name, rt.dtype.str, p.M, p.N, p.K, p.G, p.trans_a, p.trans_b, slices)
    tiles = _chosen.get(key)
    if tiles is not None:
        return tiles
    if p.M * p.N * p.K * p.G < TUNE_MIN_MACS:
        tiles = choose_tiles(rt, p.M, p.N, p.G * slices)
    else:
        scratch = memory.empty(rt, C.shape)
        trial = p._replace(beta=0.0)  # the scratch output is never read
        rt.synchronize()  # the operands are written on the runtime's queue; the trials run on another
        queue = rt.timing_queue
        seconds = {
            t: _launches(rt, A, B, scratch, bias, trial, t, slices).device_seconds(
                queue, A, B, scratch, bias, TUNE_REPS
            )
            for t in fitting(rt)
        }
        tiles = min(seconds, key=seconds.get)
        log.debug(
            "gemm %dx%dx%d (G %d, %s%s, %d slices): %s, %.1f us",
            p.M,
            p.N,
            p.K,
            p.G,
            "T" if p.trans_a else "N",
            "T" if p.trans_b else "N",
            slices,
            tiles,
            seconds[tiles] * 1e6,
        )
    _chosen[key] = tiles
    return tiles


def _enqueue(rt, A, B, C, bias, p, t: Tiles, slices: int) -> None:
    _launches(rt, A, B, C, bias, p, t, slices)(A, B, C, bias)


class _Part(NamedTuple):
    """One product's share of a launch: its defines, its 24 kernel arguments, its grid of blocks and
    layers, and its split-K reduction's arguments (None unsplit) and partial sums (elements)."""

    defines: dict
    args: tuple
    n_blocks: int
    m_blocks: int
    layers: int
    reduce: tuple | None
    scratch: int


def _part(A, B, C, bias, p, t: Tiles, slices: int, slots: tuple, scratch_at: int) -> _Part:
    """``p``'s arguments with its operands in ``slots`` (A, B, C, bias) and its partial sums, if split, at
    element ``scratch_at`` of the plan's scratch."""
    kc = slice_length(p.K, slices)
    slices = -(-p.K // kc)
    even = p.M % t.bm == 0 and p.N % t.bn == 0 and p.K % t.bk == 0 and p.K % kc == 0
    a_arg, b_arg = operand(slots[0], A), operand(slots[1], B)
    bias_arg = operand(slots[3], bias)
    defines = dict(
        TRANS_A=p.trans_a,
        TRANS_B=p.trans_b,
        SPLIT=slices > 1,
        EVEN=even,
        VEC_A=even and _aligned(A, a_arg[1], p.ga, t.bm * t.bk // t.items),
        VEC_B=even and _aligned(B, b_arg[1], p.gb, t.bk * t.bn // t.items),
    )
    blocks = (-(-p.N // t.bn), -(-p.M // t.bm))
    if slices == 1:
        args = (
            *a_arg,
            *b_arg,
            *operand(slots[2], C),
            *bias_arg,
            p.M,
            p.N,
            p.K,
            A.shape[-1],
            B.shape[-1],
            C.shape[-1],
            *p.tail,
            kc,
        )
        return _Part(defines, args, *blocks, p.G, None, 0)
    partial = (SCRATCH, scratch_at)
    e = p.ep
    args = (
        *a_arg,
        *b_arg,
        *partial,
        *bias_arg,
        p.M,
        p.N,
        p.K,
        A.shape[-1],
        B.shape[-1],
        p.N,
        1.0,
        0.0,
        0,
        0,
        1.0,
        0.0,
        0,
        0,
        p.M * p.N,
        kc,
    )
    reduce = (
        *partial,
        *operand(slots[2], C),
        *bias_arg,
        p.M,
        p.N,
        C.shape[-1],
        slices,
        p.alpha,
        p.beta,
        int(p.has_bias),
        e.code,
        e.a,
        e.b,
    )
    return _Part(defines, args, *blocks, slices, reduce, slices * p.M * p.N)


def _reductions(k, parts, ps) -> list[Launch]:
    return [
        Launch(k, "gemm_splitk_reduce", (p.N, p.M), None, *part.reduce)
        for part, p in zip(parts, ps, strict=True)
        if part.reduce is not None
    ]


def _launches(rt, A, B, C, bias, p, t: Tiles, slices: int) -> Plan:
    part = _part(A, B, C, bias, p, t, slices, (OP_A, OP_B, OP_C, OP_BIAS), 0)
    k = kernels(
        rt, "gemm_gpu.cl", BM=t.bm, BN=t.bn, BK=t.bk, TM=t.tm, TN=t.tn, STAGES=t.stages, **part.defines
    )
    local = (t.bn // t.tn, t.bm // t.tm, 1)
    grid = (part.n_blocks * local[0], part.m_blocks * local[1], part.layers)
    return Plan(
        rt, [Launch(k, "gemm_gpu", grid, local, *part.args), *_reductions(k, [part], [p])], part.scratch
    )


def pair_plan(rt, first: tuple, second: tuple) -> Plan:
    """The prepared launch of two validated 2-D products ``(A, B, C, bias, problem)``: one ``gemm_gpu_pair``
    launch over both products' blocks, then the reduction of each product split along K. Each product keeps
    the K split it has alone, so the pair gives the bits of the two products launched alone with the same
    tiles; the shared tiles are timed once per pair of shapes like a single product's."""
    p1, p2 = first[4], second[4]
    s1, s2 = (split_k(rt, p.M, p.N, p.K, p.G) for p in (p1, p2))
    key = (
        "pair",
        rt.info.index,
        rt.info.name,
        rt.dtype.str,
        *((p.M, p.N, p.K, p.trans_a, p.trans_b) for p in (p1, p2)),
        s1,
        s2,
    )
    tiles = _chosen.get(key)
    if tiles is None:
        if p1.M * p1.N * p1.K + p2.M * p2.N * p2.K < TUNE_MIN_MACS:
            # the smaller blocks of the two choices, so both products fill the device
            tiles = max((choose_tiles(rt, p.M, p.N, s) for p, s in ((p1, s1), (p2, s2))), key=CONFIGS.index)
        else:
            c1, c2 = memory.empty(rt, first[2].shape), memory.empty(rt, second[2].shape)
            trial1, trial2 = (
                (*first[:2], c1, first[3], p1._replace(beta=0.0)),
                (*second[:2], c2, second[3], p2._replace(beta=0.0)),
            )
            rt.synchronize()  # the operands are written on the runtime's queue; the trials run on another
            seconds = {
                t: _pair_launches(rt, trial1, trial2, t, s1, s2).device_seconds(
                    rt.timing_queue, *trial1[:4], TUNE_REPS, second=trial2[:4]
                )
                for t in fitting(rt)
            }
            tiles = min(seconds, key=seconds.get)
        _chosen[key] = tiles
    return _pair_launches(rt, first, second, tiles, s1, s2)


def _pair_launches(rt, first: tuple, second: tuple, t: Tiles, s1: int, s2: int) -> Plan:
    one = _part(*first, t, s1, (OP_A, OP_B, OP_C, OP_BIAS), 0)
    two = _part(*second, t, s2, (OP_A2, OP_B2, OP_C2, OP_BIAS2), one.scratch)
    k = kernels(
        rt,
        "gemm_gpu_pair.cl",
        BM=t.bm,
        BN=t.bn,
        BK=t.bk,
        TM=t.tm,
        TN=t.tn,
        STAGES=t.stages,
        **{f"{name}1": v for name, v in one.defines.items()},
        **{f"{name}2": v for name, v in two.defines.items()},
    )
    local = (t.bn // t.tn, t.bm // t.tm, 1)
    grid = (
        max(one.n_blocks, two.n_blocks) * local[0],
        max(one.m_blocks, two.m_blocks) * local[1],
        one.layers + two.layers,
    )
    pair = Launch(k, "gemm_gpu_pair", grid, local, *one.args, *two.args, one.layers)
    return Plan(rt, [pair, *_reductions(k, [one, two], [first[4], second[4]])], one.scratch + two.scratch)


def _aligned(X, offset: int, group_stride: int, per_item: int) -> bool:
    """Whether an operand's tiles can be read as 4-element vectors: every row, the operand's offset and the
    stride between batched products keep each vector on a 4-element boundary, and each item copies whole
    vectors."""
    return X.shape[-1] % 4 == 0 and offset % 4 == 0 and group_stride % 4 == 0 and per_item % 4 == 0
