"""Matrix products on the device: ``gemm`` (one product, fused epilogue), ``gemm_batched`` and ``gemm_pair``
(two independent products, one launch on GPUs: a dense layer's two gradients).

The three products of a dense layer ``y = act(x·wᵀ + b)`` are all one call:

    forward          gemm(rt, x, w, y, trans_b=True, bias=b, activation="tanh")   (B,I)·(O,I)ᵀ
    weight gradient  gemm(rt, dz, x, gw, trans_a=True)                              (B,O)ᵀ·(B,I)
    input gradient   gemm(rt, dz, w, gx)                                            (B,O)·(O,I)
    both gradients   gemm_pair(rt, Product(dz, x, gw, trans_a=True), Product(dz, w, gx))

Operands are C-contiguous 2-D ``pyopencl.array.Array`` of the runtime's dtype (views allowed). CPU devices
use ``gemm.cl`` (B packed into 16-wide panels, register tiles, no local memory); GPUs use ``gemm_gpu.cl``
(local-memory tiles with register blocking).

A training step repeats its products on new buffers of the same layout, so each layout's launches are
prepared once (validated, kernel variants and GPU tiles chosen, constant arguments set) and kept on the
runtime (``opencl.plan``); a later call looks its layout up and sets only the operands' buffers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import pyopencl.array as cla

from opencl import memory
from opencl.errors import ShapeError
from opencl.plan import OP_A, OP_B, OP_BIAS, OP_C, SCRATCH, Launch, Plan, operand
from opencl.program import kernels

_ACT_CODES = {"linear": 0, "sigmoid": 1, "tanh": 2, "relu": 3, "lrelu": 4}
NR = 16  # panel width of the CPU kernel (gemm.cl)
# Multiply-adds a CPU work-item should at least do: PoCL spends ~0.5 µs scheduling each work-group, so
# small tiles are merged (a 12x16 tile at K = 240 is only 46k multiply-adds, ~0.3 µs of arithmetic).
WORK_PER_ITEM = 131072
DOT_MAX_M = 128  # up to this many rows, A·Bᵀ on CPUs skips packing B (gemm_dot); set from benchmarks
# Prepared products kept per runtime; past this many (a caller varying alpha on every call, say) they are
# dropped and prepared again as used, so memory stays bounded.
MAX_PLANS = 1024


@dataclass(frozen=True)
class Epilogue:
    """Activation fused into the product: code and its two parameters (linear: a·x+b; lrelu: slope a)."""

    code: int
    a: float
    b: float


def epilogue(activation) -> Epilogue:
    """``None``, a name, or any object with ``kind``/``alpha``/``beta`` (such as ``nn.Activation``)."""
    if activation is None:
        return Epilogue(0, 1.0, 0.0)
    if isinstance(activation, str):
        kind, a, b = activation, (0.01 if activation == "lrelu" else 1.0), 0.0
    else:
        kind, a, b = activation.kind, float(activation.alpha), float(activation.beta)
    if kind not in _ACT_CODES:
        raise ShapeError(
            f"activation {kind!r} cannot be fused into a product; fusable: {', '.join(_ACT_CODES)}"
        )
    return Epilogue(_ACT_CODES[kind], a, b)


def _check(rt, name: str, a: cla.Array, ndim: int) -> None:
    if a.ndim != ndim:
        raise ShapeError(f"gemm: {name} must be {ndim}-D, got shape {a.shape}")
    if a.dtype != rt.dtype:
        raise ShapeError(f"gemm: {name} has dtype {a.dtype}, the runtime computes in {rt.dtype}")
    if not a.flags.c_contiguous:
        raise ShapeError(f"gemm: {name} must be C-contiguous (row-major), got strides {a.strides}")


@functools.cache
def _cpu_tiles(device, itemsize: int) -> tuple[int, int, int]:
    """(TM, DW, DN) of ``gemm.cl`` for a CPU device: sized so that the accumulators fill the vector register
    file without spilling. One register holds ``native_vector_width_float`` floats (8 with AVX2, 16 with
    AVX-512); AVX2 has 16 registers, AVX-512 32.

    - ``gemm_tile`` keeps TM rows of a 16-wide panel in registers: 12 accumulator registers, so TM = 12 on
      AVX-512 (float32) and 6 on AVX2, where a 12-row tile spills on every k step (Zen 3: 1024^3 at 37 vs
      113 GFLOP/s, benchmarks/RESULTS.md).
    - ``gemm_dot`` keeps a 4 x DN block of DW-wide dot-product accumulators (one register each) plus the
      4 + DN operand vectors: DN = 4 with 32 registers, 2 with 16.
    """
    vec_bytes = max(16, 4 * int(device.native_vector_width_float))
    regs_per_row = max(1, NR * itemsize // vec_bytes)
    tm = max(2, 12 // regs_per_row)
    dw = max(4, min(16, vec_bytes // itemsize))
    dn = 4 if vec_bytes >= 64 else 2
    return tm, dw, dn


def gemm(
    rt,
    A: cla.Array,
    B: cla.Array,
    C: cla.Array,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 0.0,
    bias: cla.Array | None = None,
    activation=None,
) -> None:
    """``C = act(alpha·op(A)·op(B) + beta·C + bias)``; ``op(X)`` is ``Xᵀ`` when ``trans_x``.

    Shapes: ``op(A) (M, K)``, ``op(B) (K, N)``, ``C (M, N)``, ``bias (N,)`` added to every row.
    ``C`` is not read when ``beta == 0`` (it may hold garbage). The activation must be output-derivable
    (linear, sigmoid, tanh, relu, lrelu).
    """
    _run(rt, False, A, B, C, trans_a, trans_b, alpha, beta, bias, activation)


def gemm_batched(
    rt,
    A: cla.Array,
    B: cla.Array,
    C: cla.Array,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 0.0,
    bias: cla.Array | None = None,
    activation=None,
) -> None:
    """``C[g] = act(alpha·op(A[g])·op(B[g]) + beta·C[g] + bias)`` for G independent products, one launch.

    ``A (G, ·, ·)``, ``B (G, ·, ·)``, ``C (G, M, N)``: C-contiguous 3-D arrays (views allowed), e.g.
    attention scores ``Q·Kᵀ`` for G = batch × heads; ``bias (N,)`` is shared by every product.
    """
    _run(rt, True, A, B, C, trans_a, trans_b, alpha, beta, bias, activation)


class Product(NamedTuple):
    """One product of ``gemm_pair``: ``C = act(alpha·op(A)·op(B) + beta·C + bias)`` as in ``gemm``."""

    A: cla.Array
    B: cla.Array
    C: cla.Array
    trans_a: bool = False
    trans_b: bool = False
    alpha: float = 1.0
    beta: float = 0.0
    bias: cla.Array | None = None
    activation: object = None


def gemm_pair(rt, first: Product, second: Product) -> None:
    """Two independent 2-D products, such as a dense layer's weight gradient ``dzᵀ·x`` and input gradient
    ``dz·w``: the same results as two ``gemm`` calls, in one kernel launch on a GPU (plus the reduction of
    a product split along K), where the driver's cost per launch is what a small product costs.

    Neither product may write where the other reads or writes (refused with ``ShapeError``): their
    work-groups run at the same time. On a CPU device the two products run one after the other.
    """
    _disjoint(first, second)
    if rt.is_cpu:  # both validated before either runs: a refused pair changes nothing
        one, two = (_prepared(rt, False, *p) for p in (first, second))
        one(first.A, first.B, first.C, first.C if first.bias is None else first.bias)
        two(second.A, second.B, second.C, second.C if second.bias is None else second.bias)
        return
    key = ("pair", _key(rt, False, *first), _key(rt, False, *second))
    plan = _cached(rt, key, _pair_plan, first, second)
    plan(
        first.A,
        first.B,
        first.C,
        first.C if first.bias is None else first.bias,
        second.A,
        second.B,
        second.C,
        second.C if second.bias is None else second.bias,
    )


def _pair_plan(rt, first: Product, second: Product):
    """Validate both products of a pair and prepare their launches (GPU devices)."""
    from opencl.gemm_gpu import pair_plan

    checked = []
    for p in (first, second):
        for name, arr in (("A", p.A), ("B", p.B), ("C", p.C)):
            _check(rt, name, arr, 2)
        problem = _problem(rt, p.A, p.B, p.C, 1, p.trans_a, p.trans_b, p.alpha, p.beta, p.bias, p.activation)
        checked.append((p.A, p.B, p.C, p.C if p.bias is None else p.bias, problem))
    if checked[0][4] is None or checked[1][4] is None:  # an empty product: the other alone
        return _PairOfPlans(
            *(
                _plan(
                    rt, False, *(p.A, p.B, p.C, p.trans_a, p.trans_b, p.alpha, p.beta, p.bias, p.activation)
                )
                for p in (first, second)
            )
        )
    return pair_plan(rt, checked[0], checked[1])


class _PairOfPlans(NamedTuple):
    """A pair with an empty product: each product's own plan (the empty one launches nothing)."""

    first: Plan
    second: Plan

    def __call__(self, a, b, c, bias, a2, b2, c2, bias2) -> None:
        self.first(a, b, c, bias)
        self.second(a2, b2, c2, bias2)


def _disjoint(first: Product, second: Product) -> None:
    """Refuse a pair where one product's output overlaps anything of the other's (byte ranges compared only
    for arrays in the same buffer: this runs on every call)."""
    c1, c2 = first.C.base_data, second.C.base_data
    # no None among the buffers: comparing a buffer with None is slow in pyopencl
    reads1, reads2 = (
        (p.A.base_data, p.B.base_data, (p.A if p.bias is None else p.bias).base_data) for p in (first, second)
    )
    if c1 != c2 and c1 not in reads2 and c2 not in reads1:  # the usual case: no buffer shared with an output
        return
    for out, other in ((first, second), (second, first)):
        c = out.C
        buffer = c.base_data
        for name, x in (("A", other.A), ("B", other.B), ("C", other.C), ("bias", other.bias)):
            if x is not None and x.base_data == buffer:
                start, end = c.offset, c.offset + c.nbytes
                if x.offset < end and start < x.offset + x.nbytes:
                    which = "first" if out is first else "second"
                    raise ShapeError(
                        f"gemm_pair: the {which} product's C overlaps the other product's {name}"
                    )


def _key(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation) -> tuple:
    """Every fact the validation and the kernel choice read: shapes, strides, dtypes, the operands' offsets
    modulo 128 bytes (aligned vector reads, reading B in place) and the scalars."""
    act = activation
    if act is not None and not isinstance(act, str):  # an object with kind/alpha/beta, such as nn.Activation
        act = (act.kind, act.alpha, act.beta)
    return (
        batched,
        A.shape,
        A.strides,
        A.dtype,
        A.offset & 127,
        B.shape,
        B.strides,
        B.dtype,
        B.offset & 127,
        C.shape,
        C.strides,
        C.dtype,
        None if bias is None else (bias.shape, bias.strides, bias.dtype),
        trans_a,
        trans_b,
        alpha,
        beta,
        act,
    )


def _run(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation) -> None:
    """Launch the plan of this operand layout, made (validated, tiles chosen, kernels prepared) on first use.

    The key (``_key``) holds every fact the validation and the kernel choice read. A call that fails
    validation makes no plan, so it fails the same way every time.
    """
    _prepared(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation)(
        A, B, C, C if bias is None else bias
    )


def _prepared(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation) -> Plan:
    """The kept plan of this operand layout, made on first use."""
    key = _key(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation)
    return _cached(rt, key, _plan, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation)


def _cached(rt, key: tuple, make, *args):
    """The runtime's kept plan under ``key`` (one product's layout, or a pair's two), made by ``make(rt,
    *args)`` on first use. A ``make`` that fails validation stores nothing, so the call fails the same way
    every time; past ``MAX_PLANS`` kept plans they are all dropped and made again as used, so memory stays
    bounded."""
    plans = rt.plans
    plan = plans.get(key)
    if plan is None:
        plan = make(rt, *args)
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plans[key] = plan
    return plan


def _plan(rt, batched, A, B, C, trans_a, trans_b, alpha, beta, bias, activation) -> Plan:
    """Validate one operand layout and prepare its launches (an empty plan for an empty product)."""
    ndim = 3 if batched else 2
    for name, arr in (("A", A), ("B", B), ("C", C)):
        _check(rt, name, arr, ndim)
        if batched and arr.shape[0] != C.shape[0]:
            raise ShapeError(f"gemm_batched: {name} has {arr.shape[0]} products, C has {C.shape[0]}")
    p = _problem(rt, A, B, C, C.shape[0] if batched else 1, trans_a, trans_b, alpha, beta, bias, activation)
    if p is None:
        return Plan(rt, [])
    bias_arr = C if bias is None else bias
    if rt.is_cpu:
        return _cpu_plan(rt, A, B, C, bias_arr, p)
    from opencl.gemm_gpu import gpu_plan

    return gpu_plan(rt, A, B, C, bias_arr, p)


def _problem(rt, A, B, C, G, trans_a, trans_b, alpha, beta, bias, activation) -> _Problem | None:
    """Shared validation; 2-D operands are the G = 1 case of 3-D ones. None: nothing to compute."""
    ra, ca = A.shape[-2:]
    rb, cb = B.shape[-2:]
    M, K = (ca, ra) if trans_a else (ra, ca)
    K2, N = (cb, rb) if trans_b else (rb, cb)
    if K != K2 or C.shape[-2:] != (M, N):
        raise ShapeError(
            f"gemm: op(A) {M}x{K} times op(B) {K2}x{N} does not fit C {C.shape[-2]}x{C.shape[-1]}"
        )
    if bias is not None and (bias.shape != (N,) or bias.dtype != rt.dtype):
        raise ShapeError(
            f"gemm: bias must have shape ({N},) and dtype {rt.dtype}, got {bias.shape} {bias.dtype}"
        )
    ep = epilogue(activation)
    if M == 0 or N == 0 or G == 0:
        return None
    if K == 0:
        raise ShapeError("gemm: the inner dimension K is 0")
    return _Problem(M, N, K, G, trans_a, trans_b, ra * ca, rb * cb, M * N, alpha, beta, bias is not None, ep)


class _Problem(NamedTuple):
    """One (possibly batched) product after validation; ga/gb/gc are element strides between products.

    A NamedTuple rather than a frozen dataclass: it is built on every call, and construction is ~5x cheaper.
    """

    M: int
    N: int
    K: int
    G: int
    trans_a: bool
    trans_b: bool
    ga: int
    gb: int
    gc: int
    alpha: float
    beta: float
    has_bias: bool
    ep: Epilogue

    @property
    def tail(self) -> tuple:
        """The kernels' common trailing arguments: scaling, bias flag, activation, group strides."""
        e = self.ep
        return (self.alpha, self.beta, int(self.has_bias), e.code, e.a, e.b, self.ga, self.gb, self.gc)


def _direct_b(B: cla.Array, M: int, N: int, ldb: int) -> bool:
    """Whether the CPU kernel should read a row-major op(B) in place instead of packing it.

    Packing costs one pass over B and pays back over many row tiles; reading in place is fastest when every
    16-wide panel row is a whole, aligned vector (N and the offset multiples of 16). Under PoCL in place wins
    up to M = 512 with aligned rows; packing wins for large M (4 KiB row strides alias in L1) and for
    unaligned rows (benchmarks/RESULTS.md, GEMM).
    """
    if M <= 32:
        return True
    aligned = N % NR == 0 and ldb % NR == 0 and memory.offset_of(B) % NR == 0
    return aligned and M <= 512


def _cpu_plan(rt, A, B, C, bias, p: _Problem) -> Plan:
    """``gemm.cl``'s launches for a validated problem: dot products, or B read in place or packed first."""
    tm, dw, dn = _cpu_tiles(rt.info.device, rt.dtype.itemsize)
    k = kernels(rt, "gemm.cl", TM=tm, DW=dw, DN=dn)
    M, N, K, G = p.M, p.N, p.K, p.G
    lda, ldb, ldc = A.shape[-1], B.shape[-1], C.shape[-1]
    sam, sak = (1, lda) if p.trans_a else (lda, 1)
    sbk, sbn = (1, ldb) if p.trans_b else (ldb, 1)
    a, c, b_ = operand(OP_A, A), operand(OP_C, C), operand(OP_BIAS, bias)
    if sbk == 1 and sak == 1 and M <= DOT_MAX_M:  # A·Bᵀ, both contiguous along K, few rows: dot products
        blocks = -(-N // dn)
        npi = min(blocks, -(-WORK_PER_ITEM // (4 * dn * K)))  # 4 x dn outputs of K multiply-adds per block
        dot = Launch(
            k,
            "gemm_dot",
            (-(-M // 4), -(-blocks // npi), G),
            (1, 1, 1),
            *a,
            *operand(OP_B, B),
            *c,
            *b_,
            M,
            N,
            K,
            sam,
            sbn,
            ldc,
            npi,
            *p.tail,
        )
        return Plan(rt, [dot])
    panels = -(-N // NR)
    tail = p.tail
    launches, scratch = [], 0
    if sbn == 1 and _direct_b(B, M, N, ldb):  # read B's rows in place, no packing pass
        b_args, packed, bstep = operand(OP_B, B), 0, sbk
    else:
        gp = panels * K * NR
        scratch = G * gp
        buf = (SCRATCH, 0)
        if sbk == 1:  # Bᵀ of a row-major (N, K) array: read along K, transpose 16 x 16 blocks
            launches.append(
                Launch(
                    k,
                    "gemm_pack_bt",
                    (-(-K // NR), panels, G),
                    (1, 1, 1),
                    *operand(OP_B, B),
                    *buf,
                    K,
                    N,
                    ldb,
                    p.gb,
                    gp,
                )
            )
        else:
            launches.append(
                Launch(
                    k, "gemm_pack_b", (K, panels, G), None, *operand(OP_B, B), *buf, K, N, sbk, sbn, p.gb, gp
                )
            )
        b_args, packed, bstep = buf, 1, NR
        tail = (*tail[:-2], gp, tail[-1])
    ppi = min(panels, -(-WORK_PER_ITEM // (tm * NR * K)))  # panels per work-item
    launches.append(
        Launch(
            k,
            "gemm_tile",
            (-(-M // tm), -(-panels // ppi), G),
            (1, 1, 1),
            *a,
            *b_args,
            *c,
            *b_,
            M,
            N,
            K,
            sam,
            sak,
            ldc,
            packed,
            bstep,
            ppi,
            *tail,
        )
    )
    return Plan(rt, launches, scratch)
