"""OpenCL versions of the attention/ATFNet ops, tested against ``AttentionNumpyOps`` (the reference).

``AttentionOpenCLOps`` is a mixin for ``OpenCLBackend``: it uses the backend's ``runtime``, ``kernels``,
``empty`` and ``arg`` helpers. Kernels live in ``opencl/kernels/attention.cl`` and ``layernorm.cl``; every
op is one or two launches on device-resident tensors (no host transfers). N-D linear maps reshape to 2-D
and run through ``opencl.blas.gemm``; batched attention products use one strided kernel over all heads
(one launch instead of one GEMM per head).
"""

from __future__ import annotations

import pyopencl as cl

from opencl.blas import gemm

_GROUP = 64  # work-group size of the 1-D launches (kernels guard the rounded-up tail)
_LN_GROUP = 64  # items per row of the layer-norm kernels on GPUs
_CPU_BMM_ITEMS = 64  # most items of bmm_strided_cpu (PoCL pays per work-group; each item a run of matrices)


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


class AttentionOpenCLOps:
    """Mixin of attention/ATFNet primitives for the OpenCL backend."""

    def _attn_kernel(self, filename: str, name: str) -> cl.Kernel:
        return self.kernels(filename)[name]

    def _attn_launch(self, filename: str, name: str, n: int, *args) -> None:
        """One work item per index in ``[0, n)`` (rounded up to the group size)."""
        if n > 0:
            size = -(-n // _GROUP) * _GROUP
            self.runtime.launch(self._attn_kernel(filename, name), (size,), (_GROUP,), *args)

    def _attn_chunks(self, rows: int) -> int:
        """Row slices of the column reductions: 1 on CPUs (one item per column is best there), up to 64 on
        GPUs so that a few hundred columns still fill the device."""
        return 1 if self._cpu else max(1, min(64, rows // 64))

    def _attn_column_sum(self, g2, out) -> None:
        """``out (cols,) = Σ_rows g2 (rows, cols)``, in two stages on GPUs."""
        rows, cols = g2.shape
        chunks = self._attn_chunks(rows)
        if chunks == 1:
            self._attn_launch(
                "attention.cl", "column_sum", cols, *self.arg(g2), *self.arg(out), rows, cols, 1
            )
            return
        part = self.empty((chunks, cols))
        self._attn_launch(
            "attention.cl", "column_sum", cols * chunks, *self.arg(g2), *self.arg(part), rows, cols, chunks
        )
        self._attn_launch(
            "attention.cl", "column_sum", cols, *self.arg(part), *self.arg(out), chunks, cols, 1
        )

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
            self._attn_column_sum(g2, gb_out)
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
                kernel = self._attn_kernel("attention.cl", "bmm_strided_cpu")
                self.runtime.launch(kernel, (items,), (1,), *args, per)
            return c
        self._attn_launch("attention.cl", "bmm_strided", g * m * n, *args)
        return c

    def softmax_last_forward(self, x, causal=False):
        s = x.shape[-1]
        rows = x.size // s
        q = x.shape[-2] if causal else 1
        y = self.empty(x.shape)
        self._attn_launch(
            "attention.cl", "softmax_rows_forward", rows, *self.arg(x), *self.arg(y), rows, s, q, int(causal)
        )
        return y

    def softmax_last_backward(self, y, gy):
        s = y.shape[-1]
        rows = y.size // s
        gx = self.empty(y.shape)
        self._attn_launch(
            "attention.cl", "softmax_rows_backward", rows, *self.arg(y), *self.arg(gy), *self.arg(gx), rows, s
        )
        return gx

    # --- layer normalisation ----------------------------------------------------------------------
    def _ln_launch(self, name: str, rows: int, *args) -> None:
        """A ``layernorm.cl`` kernel with one work-group per row: 1 item on CPUs, ``_LN_GROUP`` on GPUs."""
        if rows > 0:
            lg = 1 if self._cpu else _LN_GROUP
            self.runtime.launch(self.kernels("layernorm.cl", LG=lg)[name], (lg * rows,), (lg,), *args)

    def layernorm_forward(self, x, gamma, beta, eps):
        d = x.shape[-1]
        rows = x.size // d
        y, xhat, inv = self.empty(x.shape), self.empty(x.shape), self.empty(x.shape[:-1])
        self._ln_launch(
            "layernorm_forward",
            rows,
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
        chunks = self._attn_chunks(rows)
        gg, gb = (
            (ggamma_out, gbeta_out) if chunks == 1 else (self.empty((chunks, d)), self.empty((chunks, d)))
        )
        size = -(-d * chunks // _GROUP) * _GROUP
        self.runtime.launch(
            self.kernels("layernorm.cl", LG=1 if self._cpu else _LN_GROUP)["layernorm_backward_params"],
            (size,),
            (_GROUP,),
            *self.arg(gy),
            *self.arg(xhat),
            *self.arg(gg),
            *self.arg(gb),
            rows,
            d,
            chunks,
        )
        if chunks > 1:
            self._attn_column_sum(gg, ggamma_out)
            self._attn_column_sum(gb, gbeta_out)
        self._ln_launch(
            "layernorm_backward_input",
            rows,
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
            self._attn_launch(
                "attention.cl", "permute6_rows", rows, *self.arg(x), *self.arg(y), rows, *dims[1:], *steps[:5]
            )
        else:
            self._attn_launch(
                "attention.cl", "permute6", x.size, *self.arg(x), *self.arg(y), x.size, *dims[1:], *steps
            )
        return y

    def _attn_axpby(self, a, b, period: int, alpha: float, beta: float):
        out = self.empty(a.shape)
        self._attn_launch(
            "attention.cl",
            "axpby",
            a.size,
            *self.arg(a),
            *self.arg(b),
            *self.arg(out),
            a.size,
            max(period, 1),
            alpha,
            beta,
        )
        return out

    def add(self, a, b):
        return self._attn_axpby(a, b, a.size, 1.0, 1.0)

    def scale(self, x, alpha):
        return self._attn_axpby(x, x, x.size, alpha, 0.0)

    def add_broadcast(self, x, p):
        return self._attn_axpby(x, p, p.size, 1.0, 1.0)

    def sum_batch(self, g, out):
        self._attn_column_sum(g.reshape(g.shape[0], -1), out.reshape(-1))

    def mix_forward(self, a, b, w):
        out = self.empty(a.shape)
        _, t, c = a.shape
        self._attn_launch(
            "attention.cl",
            "atfnet_mix",
            a.size,
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
        self._attn_launch(
            "attention.cl",
            "atfnet_mix",
            gy.size,
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
        self._attn_launch(
            "attention.cl",
            "patch_forward",
            y.size,
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
        self._attn_launch(
            "attention.cl",
            "patch_backward",
            gx.size,
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
        self._attn_launch(
            "attention.cl",
            "revin_stats",
            rows,
            *self.arg(x),
            *self.arg(mean),
            *self.arg(std),
            rows,
            length,
            eps,
        )
        return mean, std

    def _attn_row_affine(self, x, shift, scale, mode: int):
        y = self.empty(x.shape)
        self._attn_launch(
            "attention.cl",
            "row_affine",
            x.size,
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
        return self._attn_row_affine(x, mean, std, 0)

    def revin_denormalize(self, y, mean, std):
        return self._attn_row_affine(y, mean, std, 1)

    def revin_denorm_backward(self, gy, h, std):
        rows, t = gy.shape
        gh, g_mean, g_std = self.empty(gy.shape), self.empty((rows,)), self.empty((rows,))
        self._attn_launch(
            "attention.cl",
            "revin_denorm_backward",
            rows,
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
        self._attn_launch(
            "attention.cl",
            "revin_norm_backward",
            rows,
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
        self._attn_launch(
            "attention.cl",
            "channel_affine_forward",
            x.size,
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
        self._attn_launch(
            "attention.cl",
            "channel_affine_backward_params",
            c,
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
        self._attn_launch(
            "attention.cl",
            "channel_affine_backward_input",
            gy.size,
            *self.arg(gy),
            *self.arg(gamma),
            *self.arg(gx),
            gy.size,
            c,
            length,
            int(inverse),
        )
        return gx
