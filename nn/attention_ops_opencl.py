"""OpenCL versions of the attention/ATFNet ops, tested against ``AttentionNumpyOps`` (the reference).

``AttentionOpenCLOps`` is the ``AttentionOps`` family of ``OpenCLBackend``, built on its shared
``opencl.launch.Launcher``; its kernels and their work-groups are declared in ``KERNELS``.
Kernels live in ``opencl/kernels/attention.cl`` and ``layernorm.cl`` (the dropout product is the core
``mul`` of ``elementwise.cl``, reached through ``Launcher.core``); every op is one or two launches on
device-resident tensors (no host transfers). N-D linear maps reshape to 2-D and run through
``opencl.blas.gemm``; batched attention products use one strided kernel over all heads (one launch
instead of one GEMM per head). Self-attention on GPUs runs fused, one work-group per (sample,
head) (``nn.self_attention_opencl``), and composed from these ops elsewhere.
"""

from __future__ import annotations

import pyopencl as cl

from nn.self_attention_opencl import FusedSelfAttention
from opencl.blas import gemm
from opencl.launch import KernelSpec, Launcher, kernel_specs

_GROUP = 64  # work-group size of the 1-D launches (kernels guard the rounded-up tail)
_CPU_BMM_ITEMS = 64  # most items of bmm_strided_cpu (PoCL pays per work-group; each item a run of matrices)


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


_LG = {"cpu": 1, "gpu": 64}  # items per row of the layer-norm kernels (LG in layernorm.cl)
_ROWS = ((1,), (_LG["gpu"],))  # one work-group per row
KERNELS: tuple[KernelSpec, ...] = (
    *kernel_specs(
        "attention.cl",
        "bmm_strided softmax_rows_forward softmax_rows_backward permute6 permute6_rows column_sum "
        "atfnet_mix patch_forward patch_backward revin_stats row_affine revin_denorm_backward "
        "revin_norm_backward channel_affine_forward channel_affine_backward_input "
        "channel_affine_backward_params",
        (_GROUP,),
        (_GROUP,),
    ),
    KernelSpec("attention.cl", "bmm_strided_cpu", (1,), (1,)),
    KernelSpec("attention.cl", "axpby", (_GROUP,), (256,)),  # elementwise: 256 items on GPUs as ``mul``
    KernelSpec("layernorm.cl", "layernorm_forward", *_ROWS, per_group=True),
    KernelSpec("layernorm.cl", "layernorm_backward_input", *_ROWS, per_group=True),
    KernelSpec("layernorm.cl", "layernorm_backward_params", (_GROUP,), (_GROUP,)),
)


class AttentionOpenCLOps:
    """The ``AttentionOps`` family on the OpenCL backend's shared ``Launcher``."""

    def __init__(self, launcher: Launcher) -> None:
        self.runtime = launcher.runtime
        self.empty, self.arg = launcher.empty, launcher.arg
        self._cpu = launcher.cpu
        attention = tuple(k for k in KERNELS if k.file == "attention.cl")
        layernorm = tuple(k for k in KERNELS if k.file == "layernorm.cl")
        self._k = launcher.bind(attention) | launcher.bind(layernorm, LG=_LG[launcher.layout])
        self._fused = FusedSelfAttention(launcher)
        self._times = launcher.core["mul"]  # the backend's elementwise product, one kernel for both

    def _chunks(self, rows: int) -> int:
        """Row slices of the column reductions: 1 on CPUs (one item per column is best there), up to 64 on
        GPUs so that a few hundred columns still fill the device."""
        return 1 if self._cpu else max(1, min(64, rows // 64))

    def _column_sum(self, g2, out) -> None:
        """``out (cols,) = Σ_rows g2 (rows, cols)``, in two stages on GPUs."""
        rows, cols = g2.shape
        chunks = self._chunks(rows)
        if chunks == 1:
            self._k["column_sum"]((cols,), *self.arg(g2), *self.arg(out), rows, cols, 1)
            return
        part = self.empty((chunks, cols))
        self._k["column_sum"]((cols * chunks,), *self.arg(g2), *self.arg(part), rows, cols, chunks)
        self._k["column_sum"]((cols,), *self.arg(part), *self.arg(out), chunks, cols, 1)

    # --- linear maps over the last axis -----------------------------------------------------------
    def linear_forward(self, x, w, b):
        o, i = w.shape
        rows = x.size // i
        y = self.empty((rows, o))
        gemm(self.runtime, x.reshape(rows, i), w, y, trans_b=True, bias=b)  # (M, I)·(O, I)ᵀ -> (M, O)
        return y.reshape(*x.shape[:-1], o)

    def linear_backward(self, x, w, gy, gw_out, gb_out, need_input_grad):
        o, i = w.shape
        rows = x.size // i
        g2, x2 = gy.reshape(rows, o), x.reshape(rows, i)
        gemm(self.runtime, g2, x2, gw_out, trans_a=True)  # (M, O)ᵀ·(M, I) -> (O, I)
        if gb_out is not None:
            self._column_sum(g2, gb_out)
        if not need_input_grad:
            return None
        gx = self.empty((rows, i))
        gemm(self.runtime, g2, w, gx)  # (M, O)·(O, I) -> (M, I)
        return gx.reshape(x.shape)

    # --- batched products and softmax -------------------------------------------------------------
    def bmm(self, a, b, *, trans_a=False, trans_b=False, alpha=1.0):
        g, ra, ca = a.shape
        _, rb, cb = b.shape
        m, k = (ca, ra) if trans_a else (ra, ca)
        n = rb if trans_b else cb
        sam, sak = (1, ca) if trans_a else (ca, 1)
        sbk, sbn = (1, cb) if trans_b else (cb, 1)
        c = self.empty((g, m, n))
        args = (*self.arg(a), *self.arg(b), *self.arg(c), g, m, n, k)
        args += (ra * ca, sam, sak, rb * cb, sbk, sbn, alpha)
        if self._cpu:  # one item per run of whole matrices, 8-wide vectors along the rows of C
            if g > 0:
                per = -(-g // _CPU_BMM_ITEMS)
                items = -(-g // per)
                self._k["bmm_strided_cpu"]((items,), *args, per)
            return c
        self._k["bmm_strided"]((g * m * n,), *args)
        return c

    # --- self-attention: fused on GPUs, composed elsewhere ------------------------------------------
    def self_attention_forward(self, qkv, heads, scale, causal, mask):
        fused = self._fused.forward(qkv, heads, scale, causal, mask)
        if fused is not None:
            return fused
        return self._composed_attention_forward(qkv, heads, scale, causal, mask)

    def self_attention_backward(self, qkv, a, mask, go, heads, scale):
        fused = self._fused.backward(qkv, a, mask, go, heads, scale)
        if fused is not None:
            return fused
        return self._composed_attention_backward(qkv, a, mask, go, heads, scale)

    def _composed_attention_forward(self, qkv, heads, scale, causal, mask):
        """``self_attention_forward`` as permuted copies, batched products and a row softmax."""
        b, s, width = qkv.shape
        d = width // 3
        e = d // heads
        qkv = self.permute(qkv.reshape(b, s, 3, heads, e), (2, 0, 3, 1, 4))  # (3, B, H, S, E)
        q, k, v = (qkv[i].reshape(b * heads, s, e) for i in range(3))
        a = self.softmax_last_forward(self.bmm(q, k, trans_b=True, alpha=scale), causal)  # (BH, S, S)
        o = self.bmm(a if mask is None else self._mul(a, mask), v)  # (BH, S, E)
        return self.permute(o.reshape(b, heads, s, e), (0, 2, 1, 3)).reshape(b, s, d), a

    def _composed_attention_backward(self, qkv, a, mask, go, heads, scale):
        b, s, width = qkv.shape
        d = width // 3
        e = d // heads
        qkv = self.permute(qkv.reshape(b, s, 3, heads, e), (2, 0, 3, 1, 4))  # (3, B, H, S, E)
        q, k, v = (qkv[i].reshape(b * heads, s, e) for i in range(3))
        go = self.permute(go.reshape(b, s, heads, e), (0, 2, 1, 3)).reshape(b * heads, s, e)
        gv = self.bmm(a if mask is None else self._mul(a, mask), go, trans_a=True)  # (BH, S, E)
        ga = self.bmm(go, v, trans_b=True)  # (BH, S, S)
        gs = self.softmax_last_backward(a, ga if mask is None else self._mul(ga, mask))
        gq = self.bmm(gs, k, alpha=scale)
        gk = self.bmm(gs, q, trans_a=True, alpha=scale)
        gqkv = self.stack([gq, gk, gv]).reshape(3, b, heads, s, e)
        return self.permute(gqkv, (1, 3, 0, 2, 4)).reshape(b, s, width)  # (B, S, 3D)

    def softmax_last_forward(self, x, causal=False):
        s = x.shape[-1]
        rows = x.size // s
        q = x.shape[-2] if causal else 1
        y = self.empty(x.shape)
        self._k["softmax_rows_forward"]((rows,), *self.arg(x), *self.arg(y), rows, s, q, int(causal))
        return y

    def softmax_last_backward(self, y, gy):
        s = y.shape[-1]
        rows = y.size // s
        gx = self.empty(y.shape)
        self._k["softmax_rows_backward"]((rows,), *self.arg(y), *self.arg(gy), *self.arg(gx), rows, s)
        return gx

    # --- layer normalisation ----------------------------------------------------------------------
    def layernorm_forward(self, x, gamma, beta, eps):
        d = x.shape[-1]
        rows = x.size // d
        y, xhat, inv = self.empty(x.shape), self.empty(x.shape), self.empty(x.shape[:-1])
        self._k["layernorm_forward"](
            (rows,),
            *self.arg(x),
            *self.arg(gamma),
            *self.arg(beta),
            *self.arg(y),
            *self.arg(xhat),
            *self.arg(inv),
            rows,
            d,
            eps,
        )
        return y, xhat, inv

    def layernorm_backward(self, gy, xhat, inv_std, gamma, ggamma_out, gbeta_out):
        d = gy.shape[-1]
        rows = gy.size // d
        gx = self.empty(gy.shape)
        chunks = self._chunks(rows)
        gg, gb = (
            (ggamma_out, gbeta_out) if chunks == 1 else (self.empty((chunks, d)), self.empty((chunks, d)))
        )
        self._k["layernorm_backward_params"](
            (d * chunks,),
            *self.arg(gy),
            *self.arg(xhat),
            *self.arg(gg),
            *self.arg(gb),
            rows,
            d,
            chunks,
        )
        if chunks > 1:
            self._column_sum(gg, ggamma_out)
            self._column_sum(gb, gbeta_out)
        self._k["layernorm_backward_input"](
            (rows,),
            *self.arg(gy),
            *self.arg(xhat),
            *self.arg(inv_std),
            *self.arg(gamma),
            *self.arg(gx),
            rows,
            d,
        )
        return gx

    # --- elementwise helpers ----------------------------------------------------------------------
    def permute(self, x, axes):
        if len(axes) > 6:
            raise ValueError(f"permute supports up to 6 axes, got {len(axes)}")
        out_shape = tuple(x.shape[a] for a in axes)
        strides = _c_strides(tuple(x.shape))
        dims = [1] * (6 - len(axes)) + list(out_shape)
        steps = [0] * (6 - len(axes)) + [strides[a] for a in axes]
        y = self.empty(out_shape)
        if x.size and axes[-1] == len(axes) - 1 and self._cpu:  # CPU: copy a whole row per item
            rows = x.size // dims[5]
            self._k["permute6_rows"]((rows,), *self.arg(x), *self.arg(y), rows, *dims[1:], *steps[:5])
        else:
            self._k["permute6"]((x.size,), *self.arg(x), *self.arg(y), x.size, *dims[1:], *steps)
        return y

    def _axpby(self, a, b, period: int, alpha: float, beta: float):
        out = self.empty(a.shape)
        self._k["axpby"](
            (a.size,),
            *self.arg(a),
            *self.arg(b),
            *self.arg(out),
            a.size,
            max(period, 1),
            alpha,
            beta,
        )
        return out

    def _mul(self, a, b):
        """``a ⊙ b`` (attention weights or their gradient times the dropout mask)."""
        out = self.empty(a.shape)
        self._times((a.size,), *self.arg(a), *self.arg(b), *self.arg(out), a.size)
        return out

    def add(self, a, b):
        return self._axpby(a, b, a.size, 1.0, 1.0)

    def scale(self, x, alpha):
        return self._axpby(x, x, x.size, alpha, 0.0)

    def add_broadcast(self, x, p):
        return self._axpby(x, p, p.size, 1.0, 1.0)

    def sum_batch(self, g, out):
        self._column_sum(g.reshape(g.shape[0], -1), out.reshape(-1))

    def mix_forward(self, a, b, w):
        out = self.empty(a.shape)
        _, t, c = a.shape
        self._k["atfnet_mix"](
            (a.size,),
            *self.arg(a),
            *self.arg(b),
            *self.arg(w),
            *self.arg(out),
            *self.arg(out),
            a.size,
            t,
            c,
            0,
        )
        return out

    def mix_backward(self, gy, w):
        ga, gb = self.empty(gy.shape), self.empty(gy.shape)
        _, t, c = gy.shape
        self._k["atfnet_mix"](
            (gy.size,),
            *self.arg(gy),
            *self.arg(gy),
            *self.arg(w),
            *self.arg(ga),
            *self.arg(gb),
            gy.size,
            t,
            c,
            1,
        )
        return ga, gb

    def stack(self, parts):
        out = self.empty((len(parts), *parts[0].shape))
        nbytes = parts[0].nbytes
        for i, part in enumerate(parts):
            if nbytes:
                cl.enqueue_copy(
                    self.runtime.queue,
                    out.base_data,
                    part.base_data,
                    byte_count=nbytes,
                    src_offset=part.offset,
                    dst_offset=out.offset + i * nbytes,
                )
        return out

    # --- PatchTST patching ------------------------------------------------------------------------
    def patch_forward(self, x, patch_len, stride, pad):
        rows, length = x.shape
        n_patches = (length + pad - patch_len) // stride + 1
        y = self.empty((rows, n_patches, patch_len))
        self._k["patch_forward"](
            (y.size,),
            *self.arg(x),
            *self.arg(y),
            y.size,
            length,
            n_patches,
            patch_len,
            stride,
        )
        return y

    def patch_backward(self, gy, length, stride):
        rows, n_patches, patch_len = gy.shape
        gx = self.empty((rows, length))
        self._k["patch_backward"](
            (gx.size,),
            *self.arg(gy),
            *self.arg(gx),
            gx.size,
            length,
            n_patches,
            patch_len,
            stride,
        )
        return gx

    # --- RevIN ----------------------------------------------------------------------------------------
    def revin_stats(self, x, eps):
        rows, length = x.shape
        mean, std = self.empty((rows,)), self.empty((rows,))
        self._k["revin_stats"](
            (rows,),
            *self.arg(x),
            *self.arg(mean),
            *self.arg(std),
            rows,
            length,
            eps,
        )
        return mean, std

    def _row_affine(self, x, shift, scale, mode: int):
        y = self.empty(x.shape)
        self._k["row_affine"](
            (x.size,),
            *self.arg(x),
            *self.arg(shift),
            *self.arg(scale),
            *self.arg(y),
            x.size,
            x.shape[1],
            mode,
        )
        return y

    def revin_normalize(self, x, mean, std):
        return self._row_affine(x, mean, std, 0)

    def revin_denormalize(self, y, mean, std):
        return self._row_affine(y, mean, std, 1)

    def revin_denorm_backward(self, gy, h, std):
        rows, t = gy.shape
        gh, g_mean, g_std = self.empty(gy.shape), self.empty((rows,)), self.empty((rows,))
        self._k["revin_denorm_backward"](
            (rows,),
            *self.arg(gy),
            *self.arg(h),
            *self.arg(std),
            *self.arg(gh),
            *self.arg(g_mean),
            *self.arg(g_std),
            rows,
            t,
        )
        return gh, g_mean, g_std

    def revin_norm_backward(self, gxn, xn, std, g_mean, g_std):
        rows, length = gxn.shape
        gx = self.empty(gxn.shape)
        self._k["revin_norm_backward"](
            (rows,),
            *self.arg(gxn),
            *self.arg(xn),
            *self.arg(std),
            *self.arg(g_mean),
            *self.arg(g_std),
            *self.arg(gx),
            rows,
            length,
        )
        return gx

    def channel_affine_forward(self, x, gamma, beta, inverse):
        _, c, length = x.shape
        y = self.empty(x.shape)
        self._k["channel_affine_forward"](
            (x.size,),
            *self.arg(x),
            *self.arg(gamma),
            *self.arg(beta),
            *self.arg(y),
            x.size,
            c,
            length,
            int(inverse),
        )
        return y

    def channel_affine_backward(self, gy, x, y, gamma, inverse, ggamma_out, gbeta_out):
        b, c, length = gy.shape
        self._k["channel_affine_backward_params"](
            (c,),
            *self.arg(gy),
            *self.arg(x),
            *self.arg(y),
            *self.arg(gamma),
            *self.arg(ggamma_out),
            *self.arg(gbeta_out),
            b,
            c,
            length,
            int(inverse),
        )
        gx = self.empty(gy.shape)
        self._k["channel_affine_backward_input"](
            (gy.size,),
            *self.arg(gy),
            *self.arg(gamma),
            *self.arg(gx),
            gy.size,
            c,
            length,
            int(inverse),
        )
        return gx
