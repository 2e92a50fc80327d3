"""OpenCL versions of the complex-valued and spectral ops (two op families of ``OpenCLBackend``).

Same names, shapes and maths as ``nn.complex_ops_numpy`` (the float64 reference they are tested against).
Kernels live in ``opencl/kernels/complex.cl``, ``complex_attention.cl`` and ``spectral.cl``; complex
tensors are the same interleaved (Re, Im) real arrays on the device (``REAL2`` in the kernels).

Matrix products go through ``opencl.blas.gemm``: a complex dense layer is ONE real GEMM of ``(M, 2I)``
against the ``(2O, 2I)`` real block form ``[[Re w, −Im w], [Im w, Re w]]`` of its weight (built by a small
kernel each call; the same flop count as a complex GEMM, and whatever tuning the real GEMM has), and the
extended DFT and its inverse are GEMMs against constant bases.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla

from nn.complex_ops_numpy import COMPLEX_ACTIVATIONS, SCORE_MODES
from opencl import blas, memory
from opencl.launch import KernelSpec, Launcher, kernel_specs

_LG = {"cpu": 1, "gpu": 64}  # items per row of the one-group-per-row kernels (LG in the kernels)
# Work-groups are FIXED per kernel, along the first axis: PoCL compiles a specialisation per distinct local
# size, and letting the driver choose per global size recompiled on every new shape (cold test runs took
# several times longer). Kernels that loop over a whole row per item use one item per group on CPUs (PoCL
# runs groups on its threads) and 32 on GPUs; elementwise kernels 256 / 128 items; the one-group-per-row
# kernels LG items per row.
_ROW, _ELEMENT, _GROUP_ROW = ((1,), (32,)), ((256,), (128,)), ((_LG["cpu"],), (_LG["gpu"],))
KERNELS: tuple[KernelSpec, ...] = (
    *kernel_specs(
        "complex.cl",
        "complex_expand_weight complex_fold_weight_grad complex_column_partial_sum "
        "complex_column_partial_conj_product complex_sum_chunks complex_activation_forward "
        "complex_activation_backward complex_scale complex_add",
        *_ELEMENT,
    ),
    *kernel_specs(
        "complex.cl",
        "complex_layernorm_forward complex_layernorm_backward_input",
        *_GROUP_ROW,
        per_group=True,
    ),
    *kernel_specs(
        "complex_attention.cl",
        "complex_attention_scores complex_attention_grad_scores "
        "complex_attention_scores_cpu complex_attention_grad_scores_cpu",
        *_ROW,
    ),
    *kernel_specs("complex_attention.cl", "complex_attention_output complex_attention_grad_q", *_ELEMENT),
    *kernel_specs("complex_attention.cl", "complex_attention_grad_kv", *_GROUP_ROW, per_group=True),
    *kernel_specs(
        "spectral.cl",
        "spectrum_norm_forward spectrum_norm_backward spectrum_denorm_backward harmonic_weight_cpu",
        *_ROW,
    ),
    *kernel_specs("spectral.cl", "spectrum_denorm_forward", *_ELEMENT),
    *kernel_specs("spectral.cl", "harmonic_weight", *_GROUP_ROW, per_group=True),
)
_GPU_CHUNK = 64  # rows per partial column sum on GPUs
_HW_ROWS = 4  # rows per item of harmonic_weight_cpu (HW_ROWS in spectral.cl)
_CPU_ATT_ITEMS = 64  # most items of the CPU attention-score kernels (each a run of whole score matrices)


def _arg(a: cla.Array) -> tuple:
    return memory.arg(a)


class ComplexOpenCLOps:
    """The ``ComplexOps`` and ``SpectralOps`` families on the OpenCL backend's shared ``Launcher``."""

    def __init__(self, launcher: Launcher) -> None:
        self.runtime = launcher.runtime
        self.empty = launcher.empty
        self._cpu = launcher.cpu
        self._k = launcher.bind(KERNELS, LG=_LG[launcher.layout])
        self._twiddle_cache: dict[int, cla.Array] = {}

    def _chunks(self, m: int) -> tuple[int, int]:
        """(rows per chunk, chunks) of a two-stage column sum over ``m`` rows: one chunk on CPUs."""
        rows = m if self._cpu else _GPU_CHUNK
        return rows, -(-m // rows)

    def _column_sum(self, g: cla.Array, out: cla.Array) -> None:
        """``out (C,) = Σ_m g (M, C)`` (real columns), written into the caller's view ``out``."""
        m, c = g.shape
        rows, chunks = self._chunks(m)
        part = self.empty((chunks, c))
        self._k["complex_column_partial_sum"]((c, chunks), *_arg(g), *_arg(part), m, c, rows)
        self._k["complex_sum_chunks"]((c,), *_arg(part), *_arg(out), chunks, c)

    # --- complex dense -----------------------------------------------------------------------------
    def _block_weight(self, w: cla.Array) -> cla.Array:
        o, i = w.shape[0], w.shape[1]
        wr = self.empty((2 * o, 2 * i))
        self._k["complex_expand_weight"]((i, o), *_arg(w), *_arg(wr), o, i)
        return wr

    def complex_dense_forward(self, x: cla.Array, w: cla.Array, b: cla.Array | None) -> cla.Array:
        """``x (M, I, 2)``, ``w (O, I, 2)``, ``b (O, 2)`` or ``None`` -> ``(M, O, 2)``."""
        m, n_in, n_out = x.shape[0], x.shape[1], w.shape[0]
        y = self.empty((m, n_out, 2))
        bias = None if b is None else b.reshape(2 * n_out)
        blas.gemm(
            self.runtime,
            x.reshape(m, 2 * n_in),
            self._block_weight(w),
            y.reshape(m, 2 * n_out),
            trans_b=True,
            bias=bias,
        )
        return y

    def complex_dense_backward(
        self,
        x: cla.Array,
        w: cla.Array,
        gy: cla.Array,
        gw_out: cla.Array,
        gb_out: cla.Array | None,
        need_input_grad: bool,
    ) -> cla.Array | None:
        m, n_in, n_out = x.shape[0], x.shape[1], w.shape[0]
        g2 = gy.reshape(m, 2 * n_out)  # (M, 2O) real
        gwr = self.empty((2 * n_out, 2 * n_in))
        blas.gemm(self.runtime, g2, x.reshape(m, 2 * n_in), gwr, trans_a=True)
        self._k["complex_fold_weight_grad"]((n_in, n_out), *_arg(gwr), *_arg(gw_out), n_out, n_in)
        if gb_out is not None:
            self._column_sum(g2, gb_out.reshape(2 * n_out))
        if not need_input_grad:
            return None
        gx = self.empty((m, n_in, 2))
        blas.gemm(self.runtime, g2, self._block_weight(w), gx.reshape(m, 2 * n_in))
        return gx

    # --- elementwise ---------------------------------------------------------------------------------
    @staticmethod
    def _act_code(kind: str) -> int:
        if kind not in COMPLEX_ACTIVATIONS:
            raise ValueError(
                f"unknown complex activation {kind!r}: expected one of {', '.join(COMPLEX_ACTIVATIONS)}"
            )
        return COMPLEX_ACTIVATIONS.index(kind)

    def complex_activation_forward(self, x: cla.Array, kind: str, alpha: float = 0.01) -> cla.Array:
        y = self.empty(x.shape)
        n = x.size // 2
        self._k["complex_activation_forward"](
            (n,),
            *_arg(x),
            *_arg(y),
            n,
            self._act_code(kind),
            alpha,
        )
        return y

    def complex_activation_backward(
        self, x: cla.Array, y: cla.Array, gy: cla.Array, kind: str, alpha: float = 0.01
    ) -> cla.Array:
        gx = self.empty(x.shape)
        n = x.size // 2
        self._k["complex_activation_backward"](
            (n,),
            *_arg(x),
            *_arg(y),
            *_arg(gy),
            *_arg(gx),
            n,
            self._act_code(kind),
            alpha,
        )
        return gx

    def complex_add(self, a: cla.Array, b: cla.Array) -> cla.Array:
        y = self.empty(a.shape)
        self._k["complex_add"]((a.size,), *_arg(a), *_arg(b), *_arg(y), a.size)
        return y

    def complex_scale(self, x: cla.Array, s: cla.Array) -> cla.Array:
        y = self.empty(x.shape)
        self._k["complex_scale"]((s.size,), *_arg(x), *_arg(s), *_arg(y), s.size)
        return y

    # --- complex layer normalization ----------------------------------------------------------------
    def complex_layernorm_forward(
        self, x: cla.Array, w: cla.Array, b: cla.Array, eps: float
    ) -> tuple[cla.Array, cla.Array, cla.Array]:
        m, d = x.shape[0], x.shape[1]
        y, xhat, inv_std = self.empty(x.shape), self.empty(x.shape), self.empty((m,))
        self._k["complex_layernorm_forward"](
            (m,),
            *_arg(x),
            *_arg(w),
            *_arg(b),
            *_arg(y),
            *_arg(xhat),
            *_arg(inv_std),
            m,
            d,
            eps,
        )
        return y, xhat, inv_std

    def complex_layernorm_backward(
        self,
        gy: cla.Array,
        xhat: cla.Array,
        inv_std: cla.Array,
        w: cla.Array,
        gw_out: cla.Array,
        gb_out: cla.Array,
    ) -> cla.Array:
        m, d = gy.shape[0], gy.shape[1]
        self._column_sum(gy.reshape(m, 2 * d), gb_out.reshape(2 * d))
        rows, chunks = self._chunks(m)
        part = self.empty((chunks, d, 2))
        self._k["complex_column_partial_conj_product"](
            (d, chunks),
            *_arg(gy),
            *_arg(xhat),
            *_arg(part),
            m,
            d,
            rows,
        )
        self._k["complex_sum_chunks"]((2 * d,), *_arg(part), *_arg(gw_out), chunks, 2 * d)
        gx = self.empty(gy.shape)
        self._k["complex_layernorm_backward_input"](
            (m,),
            *_arg(gy),
            *_arg(xhat),
            *_arg(inv_std),
            *_arg(w),
            *_arg(gx),
            m,
            d,
        )
        return gx

    # --- complex multi-head attention core ----------------------------------------------------------
    @staticmethod
    def _mode(mode: str) -> int:
        if mode not in SCORE_MODES:
            raise ValueError(f"unknown score mode {mode!r}: expected one of {', '.join(SCORE_MODES)}")
        return SCORE_MODES.index(mode)

    @staticmethod
    def _matrix_runs(count: int) -> tuple[int, int]:
        """(items, matrices per item) of the CPU attention-score kernels over ``count`` (b, h) matrices: at
        most ``_CPU_ATT_ITEMS`` items (PoCL pays a cost per work-group; a matrix is little work)."""
        per = -(-count // _CPU_ATT_ITEMS)
        return -(-count // per), per

    @staticmethod
    def _attention_dims(qkv: cla.Array, heads: int) -> tuple[int, int, int, tuple[int, ...]]:
        """(B, N, E, the kernels' (N, H, E, token stride, block stride)) of either ``qkv`` layout: tokens
        major ``(B, N, 3·H·E, 2)``, or Q, K and V as three blocks of N tokens ``(B, 3, N, H·E, 2)`` (read in
        place: no permuted copy)."""
        if qkv.ndim == 5:
            bsz, n, he = qkv.shape[0], qkv.shape[2], qkv.shape[3]
            return bsz, n, he // heads, (n, heads, he // heads, he, n * he)
        bsz, n, width = qkv.shape[0], qkv.shape[1], qkv.shape[2]
        return bsz, n, width // (3 * heads), (n, heads, width // (3 * heads), width, width // 3)

    def complex_attention_forward(
        self, qkv: cla.Array, heads: int, mode: str, causal: bool, mask: cla.Array | None = None
    ) -> tuple[cla.Array, cla.Array, cla.Array]:
        """``qkv (B, N, 3·H·E, 2)`` or ``(B, 3, N, H·E, 2)`` -> ``(out (B, N, H·E, 2), s, p)``; s, p key-major
        (B, H, N, N, 2); ``mask (B, H, N, N)``: dropout on the weights (``p`` is returned before it)."""
        bsz, n, e_dim, dims = self._attention_dims(qkv, heads)
        s, p = self.empty((bsz, heads, n, n, 2)), self.empty((bsz, heads, n, n, 2))
        out = self.empty((bsz, n, heads * e_dim, 2))
        if self._cpu:
            items, per = self._matrix_runs(bsz * heads)
            self._k["complex_attention_scores_cpu"](
                (items,),
                *_arg(qkv),
                *_arg(s),
                *_arg(p),
                *dims,
                bsz,
                per,
                self._mode(mode),
                int(causal),
            )
        else:
            self._k["complex_attention_scores"](
                (n, heads, bsz),
                *_arg(qkv),
                *_arg(s),
                *_arg(p),
                *dims,
                self._mode(mode),
                int(causal),
            )
        m = (p, 0) if mask is None else (mask, 1)  # the mask is read only with one
        self._k["complex_attention_output"](
            (n, heads * e_dim, bsz), *_arg(qkv), *_arg(p), *_arg(m[0]), *_arg(out), *dims, m[1]
        )
        return out, s, p

    def complex_attention_backward(
        self,
        qkv: cla.Array,
        s: cla.Array,
        p: cla.Array,
        gout: cla.Array,
        heads: int,
        mode: str,
        causal: bool,
        mask: cla.Array | None = None,
    ) -> cla.Array:
        bsz, n, e_dim, dims = self._attention_dims(qkv, heads)
        gs = self.empty(s.shape)
        gqkv = self.empty(qkv.shape)
        args = (*_arg(qkv), *_arg(s), *_arg(p), *_arg(gout), *_arg(p if mask is None else mask), *_arg(gs))
        flags = (self._mode(mode), int(causal), int(mask is not None))  # the mask is read only with one
        if self._cpu:
            items, per = self._matrix_runs(bsz * heads)
            self._k["complex_attention_grad_scores_cpu"]((items,), *args, *dims, bsz, per, *flags)
        else:
            self._k["complex_attention_grad_scores"]((n, heads, bsz), *args, *dims, *flags)
        self._k["complex_attention_grad_q"](
            (n, heads * e_dim, bsz), *_arg(qkv), *_arg(gs), *_arg(gqkv), *dims
        )
        self._k["complex_attention_grad_kv"](
            (n, heads * e_dim, bsz),
            *_arg(qkv),
            *_arg(p),
            *_arg(p if mask is None else mask),
            *_arg(gs),
            *_arg(gout),
            *_arg(gqkv),
            *dims,
            int(mask is not None),
        )
        return gqkv

    # --- spectral ------------------------------------------------------------------------------------
    def spectral_forward(self, x: cla.Array, basis: cla.Array) -> cla.Array:
        """``x (M, K)`` · ``basis (K, P)`` -> ``(M, P)``."""
        y = self.empty((x.shape[0], basis.shape[1]))
        blas.gemm(self.runtime, x, basis, y)
        return y

    def spectral_backward(self, gy: cla.Array, basis: cla.Array) -> cla.Array:
        """``gy (M, P)`` · ``basisᵀ`` -> ``(M, K)``."""
        gx = self.empty((gy.shape[0], basis.shape[0]))
        blas.gemm(self.runtime, gy, basis, gx, trans_b=True)
        return gx

    def spectrum_norm_forward(
        self, x: cla.Array, eps: float, ddof: int
    ) -> tuple[cla.Array, cla.Array, cla.Array]:
        m, f = x.shape[0], x.shape[1]
        y, mean, std = self.empty(x.shape), self.empty((m, 2)), self.empty((m,))
        self._k["spectrum_norm_forward"](
            (m,),
            *_arg(x),
            *_arg(y),
            *_arg(mean),
            *_arg(std),
            m,
            f,
            eps,
            ddof,
        )
        return y, mean, std

    def spectrum_norm_backward(
        self,
        x: cla.Array,
        y: cla.Array,
        std: cla.Array,
        gy: cla.Array,
        ddof: int,
        g_mean: cla.Array | None = None,
        g_std: cla.Array | None = None,
    ) -> cla.Array:
        m, f = x.shape[0], x.shape[1]
        gx = self.empty(x.shape)
        has_stats = g_mean is not None and g_std is not None
        self._k["spectrum_norm_backward"](
            (m,),
            *_arg(x),
            *_arg(y),
            *_arg(std),
            *_arg(gy),
            *_arg(g_mean if has_stats else std),  # the kernel reads them only with has_stats
            *_arg(g_std if has_stats else std),
            *_arg(gx),
            m,
            f,
            ddof,
            int(has_stats),
        )
        return gx

    def spectrum_denorm_forward(self, y: cla.Array, mean: cla.Array, std: cla.Array) -> cla.Array:
        m, f = y.shape[0], y.shape[1]
        out = self.empty(y.shape)
        self._k["spectrum_denorm_forward"](
            (f, m),
            *_arg(y),
            *_arg(mean),
            *_arg(std),
            *_arg(out),
            m,
            f,
        )
        return out

    def spectrum_denorm_backward(
        self, gy: cla.Array, y: cla.Array, std: cla.Array
    ) -> tuple[cla.Array, cla.Array, cla.Array]:
        m, f = gy.shape[0], gy.shape[1]
        gx, g_mean, g_std = self.empty(gy.shape), self.empty((m, 2)), self.empty((m,))
        self._k["spectrum_denorm_backward"](
            (m,),
            *_arg(gy),
            *_arg(y),
            *_arg(std),
            *_arg(gx),
            *_arg(g_mean),
            *_arg(g_std),
            m,
            f,
        )
        return gx, g_mean, g_std

    def harmonic_weight(self, x: cla.Array) -> cla.Array:
        """``x (M, L)`` -> ``(M,)``; see ``ComplexNumpyOps.harmonic_weight``."""
        m, length = x.shape
        w = self.empty((m,))
        if self._cpu:  # 4 rows per item, 8 bins per vector, angles from a float64 twiddle table
            tw = self._twiddles(length)
            items = -(-m // _HW_ROWS)
            args = (*_arg(x), *_arg(tw), *_arg(w), m, length)
            self._k["harmonic_weight_cpu"]((items,), *args)
            return w
        self._k["harmonic_weight"]((m,), *_arg(x), *_arg(w), m, length)
        return w

    def _twiddles(self, length: int) -> cla.Array:
        """``(cos, sin)(2π t / L)`` for ``t < L`` as an ``(L, 2)`` device array, computed in float64 once per
        ``L`` and kept on the backend."""
        cache = self._twiddle_cache
        tw = cache.get(length)
        if tw is None:
            ang = 2.0 * np.pi * np.arange(length) / length
            tw = cache[length] = memory.to_device(self.runtime, np.stack([np.cos(ang), np.sin(ang)], axis=1))
        return tw
