"""Matrix products on the device: ``gemm`` (one product, fused epilogue) and ``gemm_batched``.

The three products of a dense layer ``y = act(x·wᵀ + b)`` are all one call:

    forward          gemm(rt, x, w, y, trans_b=True, bias=b, activation="tanh")   (B,I)·(O,I)ᵀ
    weight gradient  gemm(rt, dz, x, gw, trans_a=True)                              (B,O)ᵀ·(B,I)
    input gradient   gemm(rt, dz, w, gx)                                            (B,O)·(O,I)

Operands are C-contiguous 2-D ``pyopencl.array.Array`` of the runtime's dtype (views allowed). CPU devices
use ``gemm.cl`` (B packed into 16-wide panels, register tiles, no local memory); GPUs use ``gemm_gpu.cl``
(local-memory tiles with register blocking).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl.array as cla

from opencl import memory
from opencl.errors import ShapeError
from opencl.program import kernels

_ACT_CODES = {"linear": 0, "sigmoid": 1, "tanh": 2, "relu": 3, "lrelu": 4}
NR = 16  # panel width of the CPU kernel (gemm.cl)


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


def _check(rt, name: str, a: cla.Array) -> None:
    if a.ndim != 2:
        raise ShapeError(f"gemm: {name} must be 2-D, got shape {a.shape}")
    if a.dtype != rt.dtype:
        raise ShapeError(f"gemm: {name} has dtype {a.dtype}, the runtime computes in {rt.dtype}")
    if not a.flags.c_contiguous:
        raise ShapeError(f"gemm: {name} must be C-contiguous (row-major), got strides {a.strides}")


def _cpu_tm(rt) -> int:
    return 4 if rt.dtype == np.float64 else 6


def gemm(rt, A: cla.Array, B: cla.Array, C: cla.Array, *, trans_a: bool = False, trans_b: bool = False,
         alpha: float = 1.0, beta: float = 0.0, bias: cla.Array | None = None, activation=None) -> None:
    """``C = act(alpha·op(A)·op(B) + beta·C + bias)``; ``op(X)`` is ``Xᵀ`` when ``trans_x``.

    Shapes: ``op(A) (M, K)``, ``op(B) (K, N)``, ``C (M, N)``, ``bias (N,)`` added to every row.
    ``C`` is not read when ``beta == 0`` (it may hold garbage). The activation must be output-derivable
    (linear, sigmoid, tanh, relu, lrelu).
    """
    for name, arr in (("A", A), ("B", B), ("C", C)):
        _check(rt, name, arr)
    M, K = (A.shape[1], A.shape[0]) if trans_a else A.shape
    K2, N = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if K != K2 or C.shape != (M, N):
        raise ShapeError(
            f"gemm: op(A) {M}x{K} times op(B) {K2}x{N} does not fit C {C.shape[0]}x{C.shape[1]}"
        )
    if bias is not None and (bias.shape != (N,) or bias.dtype != rt.dtype):
        raise ShapeError(
            f"gemm: bias must have shape ({N},) and dtype {rt.dtype}, got {bias.shape} {bias.dtype}"
        )
    ep = epilogue(activation)
    if M == 0 or N == 0:
        return
    if K == 0:  # empty sum: C = act(beta·C + bias)
        raise ShapeError("gemm: the inner dimension K is 0")
    sam, sak = (1, A.shape[1]) if trans_a else (A.shape[1], 1)
    sbk, sbn = (1, B.shape[1]) if trans_b else (B.shape[1], 1)
    bias_arr = C if bias is None else bias
    if rt.is_cpu:
        _gemm_cpu(rt, A, B, C, bias_arr, bias is not None, M, N, K, sam, sak, sbk, sbn, alpha, beta, ep)
    else:
        from opencl.gemm_gpu import gemm_gpu

        gemm_gpu(rt, A, B, C, bias_arr, bias is not None, M, N, K, trans_a, trans_b, alpha, beta, ep)


def _gemm_cpu(rt, A, B, C, bias, has_bias, M, N, K, sam, sak, sbk, sbn, alpha, beta, ep) -> None:
    tm = _cpu_tm(rt)
    k = kernels(rt, "gemm.cl", TM=tm)
    panels = -(-N // NR)
    if sbn == 1:  # row-major op(B): the product kernel reads B's rows directly
        b_args, packed, bstep = memory.arg(B), 0, sbk
    else:
        buf = memory.empty(rt, (panels * K * NR,))
        rt.launch(k.gemm_pack_b, (K, panels), None, *memory.arg(B), *memory.arg(buf), K, N, sbk, sbn)
        b_args, packed, bstep = memory.arg(buf), 1, NR
    rt.launch(
        k.gemm_tile, (-(-M // tm), panels), (1, 1),
        *memory.arg(A), *b_args, *memory.arg(C), *memory.arg(bias),
        M, N, K, sam, sak, C.shape[1], packed, bstep, alpha, beta, int(has_bias), ep.code, ep.a, ep.b,
    )


def gemm_batched(rt, A: cla.Array, B: cla.Array, C: cla.Array, *, trans_a: bool = False,
                 trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0) -> None:
    """``C[g] = alpha·op(A[g])·op(B[g]) + beta·C[g]`` for G independent products (e.g. attention heads).

    ``A (G, ·, ·)``, ``B (G, ·, ·)``, ``C (G, M, N)``, C-contiguous 3-D arrays; each ``[g]`` is a view.
    """
    for name, arr in (("A", A), ("B", B), ("C", C)):
        if arr.ndim != 3 or arr.shape[0] != C.shape[0]:
            raise ShapeError(f"gemm_batched: {name} must be 3-D with {C.shape[0]} groups, got {arr.shape}")
    for g in range(C.shape[0]):
        gemm(rt, A[g], B[g], C[g], trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta)
