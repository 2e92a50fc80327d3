/* Elementwise helpers of the network library: fill, accumulate, product, row gather, and the fused
 * pieces around the dense GEMMs (bias + activation epilogue, activation derivative + bias gradient).
 * Every 1-D kernel is launched on a global size rounded up to the work-group size, hence the guards. */
#include "nn_common.h"

__kernel void fill(__global REAL *x, const uint x_off, const REAL value, const int n) {
    x += x_off;
    const int i = get_global_id(0);
    if (i < n) {
        x[i] = value;
    }
}

/* dst += src */
__kernel void add_inplace(__global REAL *dst, const uint dst_off, __global const REAL *src,
                          const uint src_off, const int n) {
    dst += dst_off;
    src += src_off;
    const int i = get_global_id(0);
    if (i < n) {
        dst[i] += src[i];
    }
}

/* out = a * b */
__kernel void mul(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                  __global REAL *out, const uint out_off, const int n) {
    a += a_off;
    b += b_off;
    out += out_off;
    const int i = get_global_id(0);
    if (i < n) {
        out[i] = a[i] * b[i];
    }
}

/* out (B, F) = src[rows] with src (N, F), rows (B,): the shuffled mini-batch, built on the device.
 * One item per output element (n = B * F). */
__kernel void gather_rows(__global const REAL *src, const uint src_off, __global const int *rows,
                          const uint rows_off, __global REAL *out, const uint out_off, const int F,
                          const int n) {
    src += src_off;
    rows += rows_off;
    out += out_off;
    const int i = get_global_id(0);
    if (i < n) {
        const int b = i / F;
        out[i] = src[(size_t)rows[b] * F + (i - b * F)];
    }
}

/* y (B, O) = act(y + bias): the dense epilogue when the GEMM runs without one. n = B * O items. */
__kernel void bias_act(__global REAL *y, const uint y_off, __global const REAL *bias, const uint bias_off,
                       const int O, const int n, const int act, const REAL alpha, const REAL beta) {
    y += y_off;
    bias += bias_off;
    const int i = get_global_id(0);
    if (i < n) {
        y[i] = nn_act(act, y[i] + bias[i % O], alpha, beta);
    }
}

/* Dense backward, first half: dz (B, O) = gy * act'(y) and the bias gradient gb (O,) = sum over the batch
 * of dz, in one pass. Column kernel: 2-D range (roundup(O, CG), RG), work-group (CG, RG). */
__kernel void dense_dz_bias(__global const REAL *gy, const uint gy_off, __global const REAL *y,
                            const uint y_off, __global REAL *dz, const uint dz_off, __global REAL *gb,
                            const uint gb_off, const int O, const int B, const int act, const REAL alpha) {
    __local REAL scratch[CG * RG];
    gy += gy_off;
    y += y_off;
    dz += dz_off;
    gb += gb_off;
    const int o = get_global_id(0);
    const int lane = get_local_id(1);
    REAL sum = (REAL)0;
    if (o < O) {
        for (int b = lane; b < B; b += RG) {
            const size_t k = (size_t)b * O + o;
            const REAL d = gy[k] * nn_act_grad(act, (REAL)0, y[k], alpha);
            dz[k] = d;
            sum += d;
        }
    }
    sum = nn_col_sum(sum, scratch);
    if (o < O && lane == 0) {
        gb[o] = sum;
    }
}

/* CPU variant of dense_dz_bias: one item per 8 adjacent columns with explicit vectors (PoCL cannot
 * vectorise across items whose body is a loop), rows in a loop. Range: ceil(O / 8) items. */
__kernel void dense_dz_bias8(__global const REAL *gy, const uint gy_off, __global const REAL *y,
                             const uint y_off, __global REAL *dz, const uint dz_off, __global REAL *gb,
                             const uint gb_off, const int O, const int B, const int act, const REAL alpha) {
    gy += gy_off;
    y += y_off;
    dz += dz_off;
    gb += gb_off;
    const int o0 = get_global_id(0) * 8;
    if (o0 + 8 <= O) {
        REAL8 sum = (REAL8)(0);
        for (int b = 0; b < B; ++b) {
            const size_t k = (size_t)b * O + o0;
            const REAL8 d = LOAD8(gy + k) *
                            nn_act_grad8(act, (REAL8)(0), LOAD8(y + k), alpha);
            STORE8(d, dz + k);
            sum += d;
        }
        STORE8(sum, gb + o0);
    } else {
        for (int o = o0; o < O; ++o) {
            REAL sum = (REAL)0;
            for (int b = 0; b < B; ++b) {
                const size_t k = (size_t)b * O + o;
                const REAL d = gy[k] * nn_act_grad(act, (REAL)0, y[k], alpha);
                dz[k] = d;
                sum += d;
            }
            gb[o] = sum;
        }
    }
}

/* CPU variant of gather_rows: one item per output row, copied in 8-wide pieces. Range: B items. */
__kernel void gather_rows8(__global const REAL *src, const uint src_off, __global const int *rows,
                           const uint rows_off, __global REAL *out, const uint out_off, const int F,
                           const int B) {
    src += src_off;
    rows += rows_off;
    out += out_off;
    const int b = get_global_id(0);
    if (b >= B) {
        return;
    }
    __global const REAL *s = src + (size_t)rows[b] * F;
    __global REAL *d = out + (size_t)b * F;
    int f = 0;
    for (; f + 8 <= F; f += 8) {
        STORE8(LOAD8(s + f), d + f);
    }
    for (; f < F; ++f) {
        d[f] = s[f];
    }
}
