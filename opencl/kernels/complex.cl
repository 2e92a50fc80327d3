/* Complex-valued layers: weight expansion for the real GEMM, activations, dropout, residual add, layer
 * norm. Complex dense itself runs on opencl/blas.py's real GEMM: x (M, I) complex is the real (M, 2I) and
 * the complex weight w (O, I) becomes the real block matrix Wr (2O, 2I) with 2x2 blocks
 * [[Re w, -Im w], [Im w, Re w]], so y = x Wr^T is the complex product at the same flop count.
 * Every 1-D kernel has a bounds guard (global sizes are not rounded by the caller, but may be). */
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

/* out[c] = sum_m g[m, c] for g (M, C) real: the bias gradient (C = 2O interleaved). One item per column. */
__kernel void complex_column_sum(__global const REAL *g, const uint g_off, __global REAL *out,
                                 const uint out_off, const int M, const int C) {
    g += g_off;
    out += out_off;
    const int c = get_global_id(0);
    if (c >= C) {
        return;
    }
    REAL acc = (REAL)0;
    for (int m = 0; m < M; ++m) {
        acc += g[(size_t)m * C + c];
    }
    out[c] = acc;
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

/* Inverted-dropout mask with one draw per complex element: dropped when the 24 random bits of
 * nn.random.uniform01(seed, counter, k) are below `threshold` = ceil(rate 2^24), else `scale`. */
__kernel void complex_dropout_mask(__global REAL *mask, const uint mask_off, const int n, const uint seed,
                                   const uint counter, const uint threshold, const REAL scale) {
    mask += mask_off;
    const int k = get_global_id(0);
    if (k < n) {
        mask[k] = nn_uniform_bits(seed, counter, (uint)k) < threshold ? (REAL)0 : scale;
    }
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
 * y = w xhat + b. One item per row. */
__kernel void complex_layernorm_forward(__global const REAL *x, const uint x_off, __global const REAL *w,
                                        const uint w_off, __global const REAL *b, const uint b_off,
                                        __global REAL *y, const uint y_off, __global REAL *xhat,
                                        const uint xhat_off, __global REAL *inv_std, const uint inv_std_off,
                                        const int M, const int D, const REAL eps) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    x += x_off + (size_t)m * 2 * D;
    y += y_off + (size_t)m * 2 * D;
    xhat += xhat_off + (size_t)m * 2 * D;
    w += w_off;
    b += b_off;
    REAL2 mean = (REAL2)(0, 0);
    for (int d = 0; d < D; ++d) {
        mean += c_ld(x, d);
    }
    mean /= (REAL)D;
    REAL var = (REAL)0;
    for (int d = 0; d < D; ++d) {
        const REAL2 c = c_ld(x, d) - mean;
        var += c.x * c.x + c.y * c.y;
    }
    const REAL r = rsqrt(var / (REAL)D + eps);
    for (int d = 0; d < D; ++d) {
        const REAL2 h = (c_ld(x, d) - mean) * r;
        c_st(xhat, d, h);
        c_st(y, d, c_mul(c_ld(w, d), h) + c_ld(b, d));
    }
    inv_std[inv_std_off + m] = r;
}

/* gx = r (gh - xhat S / D) minus its row mean, gh = conj(w) gy, S = sum Re(conj(gh) xhat). One item per row. */
__kernel void complex_layernorm_backward_input(__global const REAL *gy, const uint gy_off,
                                               __global const REAL *xhat, const uint xhat_off,
                                               __global const REAL *inv_std, const uint inv_std_off,
                                               __global const REAL *w, const uint w_off, __global REAL *gx,
                                               const uint gx_off, const int M, const int D) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    gy += gy_off + (size_t)m * 2 * D;
    xhat += xhat_off + (size_t)m * 2 * D;
    gx += gx_off + (size_t)m * 2 * D;
    w += w_off;
    const REAL r = inv_std[inv_std_off + m];
    REAL s = (REAL)0;
    REAL2 gh_sum = (REAL2)(0, 0);
    for (int d = 0; d < D; ++d) {
        const REAL2 gh = c_mul_conj(c_ld(gy, d), c_ld(w, d));
        const REAL2 h = c_ld(xhat, d);
        s += gh.x * h.x + gh.y * h.y;
        gh_sum += gh;
    }
    s /= (REAL)D;
    /* mean over d of (gh - h s) = gh_sum / D - mean(h) s, and mean(h) = 0 by construction */
    const REAL2 gmean = gh_sum / (REAL)D;
    for (int d = 0; d < D; ++d) {
        const REAL2 gh = c_mul_conj(c_ld(gy, d), c_ld(w, d));
        c_st(gx, d, r * (gh - c_ld(xhat, d) * s - gmean));
    }
}

/* gw[d] = sum_m gy conj(xhat), gb[d] = sum_m gy. One item per column d. */
__kernel void complex_layernorm_backward_params(__global const REAL *gy, const uint gy_off,
                                                __global const REAL *xhat, const uint xhat_off,
                                                __global REAL *gw, const uint gw_off, __global REAL *gb,
                                                const uint gb_off, const int M, const int D) {
    const int d = get_global_id(0);
    if (d >= D) {
        return;
    }
    gy += gy_off;
    xhat += xhat_off;
    REAL2 aw = (REAL2)(0, 0);
    REAL2 ab = (REAL2)(0, 0);
    for (int m = 0; m < M; ++m) {
        const REAL2 g = c_ld(gy, (size_t)m * D + d);
        aw += c_mul_conj(g, c_ld(xhat, (size_t)m * D + d));
        ab += g;
    }
    c_st(gw + gw_off, d, aw);
    c_st(gb + gb_off, d, ab);
}
