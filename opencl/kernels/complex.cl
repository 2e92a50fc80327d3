/* Complex-valued layers: weight expansion for the real GEMM, activations, dropout, residual add, layer
 * norm. Complex dense itself runs on opencl/blas.py's real GEMM: x (M, I) complex is the real (M, 2I) and
 * the complex weight w (O, I) becomes the real block matrix Wr (2O, 2I) with 2x2 blocks
 * [[Re w, -Im w], [Im w, Re w]], so y = x Wr^T is the complex product at the same flop count.
 * Kernels guard their first global axis (the caller rounds it up to the work-group size), except the
 * per-row layer-norm kernels, which run one work-group of LG items per row.
 * LG (complex.h) is the number of items per row. */
#include "complex.h"

#define CACT_RELU 0
#define CACT_LRELU 1
#define CACT_TANH 2
#define CACT_SIGMOID 3

/* w (O, I) complex -> wr (2O, 2I) real block matrix. One item per (o, i): global (I, O). */
__kernel void complex_expand_weight(__global const REAL *w, const uint w_off, __global REAL *wr,
                                    const uint wr_off, const int O, const int I) {
    w += w_off;
    wr += wr_off;
    const int i = get_global_id(0);
    const int o = get_global_id(1);
    if (i >= I || o >= O) {
        return;
    }
    const REAL2 v = c_ld(w, (size_t)o * I + i);
    __global REAL *top = wr + (size_t)(2 * o) * (2 * I) + 2 * i;
    __global REAL *bottom = top + 2 * I;
    top[0] = v.x;
    top[1] = -v.y;
    bottom[0] = v.y;
    bottom[1] = v.x;
}

/* The gradient of Wr (2O, 2I) folded back onto the complex w (O, I): Re = G00 + G11, Im = G10 - G01
 * (equal to sum_m gy_mo conj(x_mi)). One item per (o, i): global (I, O). */
__kernel void complex_fold_weight_grad(__global const REAL *g, const uint g_off, __global REAL *gw,
                                       const uint gw_off, const int O, const int I) {
    g += g_off;
    gw += gw_off;
    const int i = get_global_id(0);
    const int o = get_global_id(1);
    if (i >= I || o >= O) {
        return;
    }
    __global const REAL *top = g + (size_t)(2 * o) * (2 * I) + 2 * i;
    __global const REAL *bottom = top + 2 * I;
    c_st(gw, (size_t)o * I + i, (REAL2)(top[0] + bottom[1], bottom[0] - top[1]));
}

/* Column sums in two stages, so that a GPU has (chunks x columns) items instead of one per column:
 * part[q, c] = sum of g[m, c] over the rows m of chunk q (`rows` rows each), then out[c] = sum_q part[q, c].
 * CPUs use one chunk (rows = M). Global (C, chunks). */
__kernel void complex_column_partial_sum(__global const REAL *g, const uint g_off, __global REAL *part,
                                         const uint part_off, const int M, const int C, const int rows) {
    const int c = get_global_id(0);
    const int q = get_global_id(1);
    if (c >= C) {
        return;
    }
    g += g_off;
    const int m1 = min(M, (q + 1) * rows);
    REAL acc = (REAL)0;
    for (int m = q * rows; m < m1; ++m) {
        acc += g[(size_t)m * C + c];
    }
    part[part_off + (size_t)q * C + c] = acc;
}

/* part[q, d] = sum over chunk q of gy[m, d] conj(h[m, d]) (complex columns): the layer-norm weight gradient.
 * Global (D, chunks). */
__kernel void complex_column_partial_conj_product(__global const REAL *gy, const uint gy_off,
                                                  __global const REAL *h, const uint h_off, __global REAL *part,
                                                  const uint part_off, const int M, const int D, const int rows) {
    const int d = get_global_id(0);
    const int q = get_global_id(1);
    if (d >= D) {
        return;
    }
    gy += gy_off;
    h += h_off;
    const int m1 = min(M, (q + 1) * rows);
    REAL2 acc = (REAL2)(0, 0);
    for (int m = q * rows; m < m1; ++m) {
        acc += c_mul_conj(c_ld(gy, (size_t)m * D + d), c_ld(h, (size_t)m * D + d));
    }
    c_st(part + part_off, (size_t)q * D + d, acc);
}

/* out[c] = sum_q part[q, c] (the second stage of both column sums, C reals). Global (C,). */
__kernel void complex_sum_chunks(__global const REAL *part, const uint part_off, __global REAL *out,
                                 const uint out_off, const int chunks, const int C) {
    const int c = get_global_id(0);
    if (c >= C) {
        return;
    }
    part += part_off;
    REAL acc = (REAL)0;
    for (int q = 0; q < chunks; ++q) {
        acc += part[(size_t)q * C + c];
    }
    out[out_off + c] = acc;
}

/* Elementwise complex activation over n complex values. Split kinds act on Re and Im separately. */
__kernel void complex_activation_forward(__global const REAL *x, const uint x_off, __global REAL *y,
                                         const uint y_off, const int n, const int kind, const REAL alpha) {
    x += x_off;
    y += y_off;
    const int k = get_global_id(0);
    if (k >= n) {
        return;
    }
    const REAL2 z = c_ld(x, k);
    REAL2 r;
    switch (kind) {
    case CACT_RELU: r = (REAL2)(fmax(z.x, (REAL)0), fmax(z.y, (REAL)0)); break;
    case CACT_LRELU:
        r = (REAL2)(z.x > (REAL)0 ? z.x : alpha * z.x, z.y > (REAL)0 ? z.y : alpha * z.y);
        break;
    case CACT_TANH: r = c_tanh(z); break;
    default: r = c_sigmoid(z); break;
    }
    c_st(y, k, r);
}

/* Split kinds: per real component. Holomorphic kinds: gx = conj(f'(z)) gy with f' from the output y. */
__kernel void complex_activation_backward(__global const REAL *x, const uint x_off, __global const REAL *y,
                                          const uint y_off, __global const REAL *gy, const uint gy_off,
                                          __global REAL *gx, const uint gx_off, const int n, const int kind,
                                          const REAL alpha) {
    x += x_off;
    y += y_off;
    gy += gy_off;
    gx += gx_off;
    const int k = get_global_id(0);
    if (k >= n) {
        return;
    }
    const REAL2 z = c_ld(x, k);
    const REAL2 g = c_ld(gy, k);
    REAL2 r;
    if (kind == CACT_RELU || kind == CACT_LRELU) {
        const REAL neg = kind == CACT_RELU ? (REAL)0 : alpha;
        r = (REAL2)(z.x > (REAL)0 ? g.x : neg * g.x, z.y > (REAL)0 ? g.y : neg * g.y);
    } else {
        const REAL2 v = c_ld(y, k);
        const REAL2 one = (REAL2)(1, 0);
        const REAL2 d = kind == CACT_TANH ? one - c_mul(v, v) : c_mul(v, one - v);
        r = c_mul_conj(g, d);
    }
    c_st(gx, k, r);
}

/* y = x * s for n complex values x and n real factors s (applies a dropout mask, forward and backward). */
__kernel void complex_scale(__global const REAL *x, const uint x_off, __global const REAL *s, const uint s_off,
                            __global REAL *y, const uint y_off, const int n) {
    x += x_off;
    s += s_off;
    y += y_off;
    const int k = get_global_id(0);
    if (k < n) {
        c_st(y, k, c_ld(x, k) * s[k]);
    }
}

/* y = a + b over n reals. */
__kernel void complex_add(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                          __global REAL *y, const uint y_off, const int n) {
    a += a_off;
    b += b_off;
    y += y_off;
    const int i = get_global_id(0);
    if (i < n) {
        y[i] = a[i] + b[i];
    }
}

/* Complex layer norm over rows of D complex values: c = z - mean, v = mean |c|^2, xhat = c / sqrt(v + eps),
 * y = w xhat + b. One work-group of LG items per row: global (LG M), local (LG). */
__kernel void complex_layernorm_forward(__global const REAL *x, const uint x_off, __global const REAL *w,
                                        const uint w_off, __global const REAL *b, const uint b_off,
                                        __global REAL *y, const uint y_off, __global REAL *xhat,
                                        const uint xhat_off, __global REAL *inv_std, const uint inv_std_off,
                                        const int M, const int D, const REAL eps) {
    __local REAL2 scratch[LG];
    const int m = get_group_id(0);
    const int lid = get_local_id(0);
    x += x_off + (size_t)m * 2 * D;
    y += y_off + (size_t)m * 2 * D;
    xhat += xhat_off + (size_t)m * 2 * D;
    w += w_off;
    b += b_off;
    REAL2 acc = (REAL2)(0, 0);
    for (int d = lid; d < D; d += LG) {
        acc += c_ld(x, d);
    }
    const REAL2 mean = group_sum2(acc, scratch) / (REAL)D;
    REAL var = (REAL)0;
    for (int d = lid; d < D; d += LG) {
        const REAL2 c = c_ld(x, d) - mean;
        var += c.x * c.x + c.y * c.y;
    }
    const REAL r = rsqrt(group_sum2((REAL2)(var, 0), scratch).x / (REAL)D + eps);
    for (int d = lid; d < D; d += LG) {
        const REAL2 h = (c_ld(x, d) - mean) * r;
        c_st(xhat, d, h);
        c_st(y, d, c_mul(c_ld(w, d), h) + c_ld(b, d));
    }
    if (lid == 0) {
        inv_std[inv_std_off + m] = r;
    }
}

/* gx = r (gh - xhat S / D - mean gh), gh = conj(w) gy, S = sum Re(conj(gh) xhat) (mean xhat = 0 by
 * construction). One work-group of LG items per row. */
__kernel void complex_layernorm_backward_input(__global const REAL *gy, const uint gy_off,
                                               __global const REAL *xhat, const uint xhat_off,
                                               __global const REAL *inv_std, const uint inv_std_off,
                                               __global const REAL *w, const uint w_off, __global REAL *gx,
                                               const uint gx_off, const int M, const int D) {
    __local REAL2 scratch[LG];
    const int m = get_group_id(0);
    const int lid = get_local_id(0);
    gy += gy_off + (size_t)m * 2 * D;
    xhat += xhat_off + (size_t)m * 2 * D;
    gx += gx_off + (size_t)m * 2 * D;
    w += w_off;
    const REAL r = inv_std[inv_std_off + m];
    REAL s = (REAL)0;
    REAL2 gh_sum = (REAL2)(0, 0);
    for (int d = lid; d < D; d += LG) {
        const REAL2 gh = c_mul_conj(c_ld(gy, d), c_ld(w, d));
        const REAL2 h = c_ld(xhat, d);
        s += gh.x * h.x + gh.y * h.y;
        gh_sum += gh;
    }
    s = group_sum2((REAL2)(s, 0), scratch).x / (REAL)D;
    const REAL2 gmean = group_sum2(gh_sum, scratch) / (REAL)D;
    for (int d = lid; d < D; d += LG) {
        const REAL2 gh = c_mul_conj(c_ld(gy, d), c_ld(w, d));
        c_st(gx, d, r * (gh - c_ld(xhat, d) * s - gmean));
    }
}
