/* Real-valued attention and PatchTST/ATFNet helpers: strided batched products, masked row softmax,
 * axis permutation, broadcasts and column sums, PatchTST patching, RevIN statistics and maps, the ATFNet
 * mix. Simple one-item-per-output (or per-row/column) kernels: every 1-D launch is rounded up to the
 * work-group size, hence the `n` guards. Reference: nn/attention_ops_numpy.py. */
#include "common.h"
#include "softmax_row.h"

/* C[g] = alpha op(A[g]) op(B[g]); element (m, k) of op(A[g]) is A[g*sag + m*sam + k*sak], likewise B.
 * One item per element of C (G, M, N). */
__kernel void bmm_strided(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                          __global REAL *c, const uint c_off, const int G, const int M, const int N,
                          const int K, const int sag, const int sam, const int sak, const int sbg,
                          const int sbk, const int sbn, const REAL alpha) {
    a += a_off;
    b += b_off;
    c += c_off;
    const int i = get_global_id(0);
    if (i >= G * M * N) {
        return;
    }
    const int g = i / (M * N);
    const int m = (i / N) % M;
    const int n = i % N;
    __global const REAL *pa = a + (size_t)g * sag + (size_t)m * sam;
    __global const REAL *pb = b + (size_t)g * sbg + (size_t)n * sbn;
    REAL acc = (REAL)0;
    for (int k = 0; k < K; ++k) {
        acc += pa[k * sak] * pb[k * sbk];
    }
    c[i] = alpha * acc;
}

/* bmm_strided on CPUs, where PoCL pays a cost per work-group (one group per 64 elements of C spent more
 * on group overhead than on arithmetic) and does not vectorise these strided loops across items: one item per run of `per`
 * matrices, groups of one item. Inside a matrix, BMM_ROWS rows m by 8 consecutive columns n (the lanes of
 * an 8-wide vector) at a time: B's 8 columns at one k are one contiguous load when sbn == 1 (a gather
 * otherwise) and serve the BMM_ROWS rows; C is written in contiguous 8-wide pieces. Every element is the
 * same sum in the same order of k. global (ceil(G / per)). */
#define BMM_ROWS 4
__kernel void bmm_strided_cpu(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                              __global REAL *c, const uint c_off, const int G, const int M, const int N,
                              const int K, const int sag, const int sam, const int sak, const int sbg,
                              const int sbk, const int sbn, const REAL alpha, const int per) {
    a += a_off;
    b += b_off;
    c += c_off;
    const int first = get_global_id(0) * per;
    const int last = min(first + per, G);
    for (int g = first; g < last; ++g) {
        __global const REAL *ag = a + (size_t)g * sag;
        __global const REAL *bg = b + (size_t)g * sbg;
        __global REAL *cg = c + (size_t)g * M * N;
        for (int n0 = 0; n0 < N; n0 += 8) {
            const int nl = min(8, N - n0);
            for (int m0 = 0; m0 < M; m0 += BMM_ROWS) {
                __global const REAL *pa[BMM_ROWS];
                REAL8 acc[BMM_ROWS];
                #pragma unroll
                for (int r = 0; r < BMM_ROWS; ++r) {
                    pa[r] = ag + (size_t)min(m0 + r, M - 1) * sam; /* rows past M repeat the last, unstored */
                    acc[r] = (REAL8)(0);
                }
                __global const REAL *pb = bg + (size_t)n0 * sbn;
                if (sbn == 1 && nl == 8) {
                    for (int k = 0; k < K; ++k) {
                        const REAL8 bv = *(__global const REAL8_u *)(pb + (size_t)k * sbk);
                        #pragma unroll
                        for (int r = 0; r < BMM_ROWS; ++r) {
                            acc[r] += pa[r][(size_t)k * sak] * bv;
                        }
                    }
                } else {
                    /* lanes past N repeat the last column (in bounds; not stored) */
                    const size_t o1 = (size_t)min(1, nl - 1) * sbn, o2 = (size_t)min(2, nl - 1) * sbn;
                    const size_t o3 = (size_t)min(3, nl - 1) * sbn, o4 = (size_t)min(4, nl - 1) * sbn;
                    const size_t o5 = (size_t)min(5, nl - 1) * sbn, o6 = (size_t)min(6, nl - 1) * sbn;
                    const size_t o7 = (size_t)min(7, nl - 1) * sbn;
                    for (int k = 0; k < K; ++k) {
                        __global const REAL *bk = pb + (size_t)k * sbk;
                        const REAL8 bv = (REAL8)(bk[0], bk[o1], bk[o2], bk[o3], bk[o4], bk[o5], bk[o6], bk[o7]);
                        #pragma unroll
                        for (int r = 0; r < BMM_ROWS; ++r) {
                            acc[r] += pa[r][(size_t)k * sak] * bv;
                        }
                    }
                }
                for (int r = 0; r < BMM_ROWS && m0 + r < M; ++r) {
                    const REAL8 v = alpha * acc[r];
                    __global REAL *pc = cg + (size_t)(m0 + r) * N + n0;
                    if (nl == 8) {
                        *(__global REAL8_u *)pc = v;
                    } else {
                        const REAL *t = (const REAL *)&v;
                        for (int l = 0; l < nl; ++l) {
                            pc[l] = t[l];
                        }
                    }
                }
            }
        }
    }
}

/* Row softmax over the last axis of (rows, S) (softmax_row.h). With `causal`, row r is query q = r % Q and
 * columns j > q get probability 0. One item per row. */
__kernel void softmax_rows_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                                   const int rows, const int S, const int Q, const int causal) {
    const int r = get_global_id(0);
    if (r < rows) {
        softmax_row_global(x + x_off + (size_t)r * S, y + y_off + (size_t)r * S, S, r % Q, causal);
    }
}

/* gx = y (gy - sum(gy y)) per row (softmax_row.h). One item per row. */
__kernel void softmax_rows_backward(__global const REAL *y, const uint y_off, __global const REAL *gy,
                                    const uint gy_off, __global REAL *gx, const uint gx_off, const int rows,
                                    const int S) {
    const int r = get_global_id(0);
    if (r < rows) {
        const size_t o = (size_t)r * S;
        softmax_row_backward_global(y + y_off + o, gy + gy_off + o, gx + gx_off + o, S);
    }
}

/* out = in with axes permuted (up to 6 axes): d0..d5 are the OUTPUT extents, s0..s5 the input strides
 * (elements) of the input axis that lands at each output position. One item per element. */
__kernel void permute6(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                       const int n, const int d1, const int d2, const int d3, const int d4, const int d5,
                       const int s0, const int s1, const int s2, const int s3, const int s4, const int s5) {
    x += x_off;
    y += y_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    int rest = i;
    const int i5 = rest % d5; rest /= d5;
    const int i4 = rest % d4; rest /= d4;
    const int i3 = rest % d3; rest /= d3;
    const int i2 = rest % d2; rest /= d2;
    const int i1 = rest % d1; rest /= d1;
    const size_t src = (size_t)rest * s0 + (size_t)i1 * s1 + (size_t)i2 * s2 + (size_t)i3 * s3 +
                       (size_t)i4 * s4 + (size_t)i5 * s5;
    y[i] = x[src];
}

/* permute6 for the common case that the last axis stays last (attention heads): one item copies one
 * contiguous row of d5 elements, so the index arithmetic is paid once per row. rows = n / d5. */
__kernel void permute6_rows(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                            const int rows, const int d1, const int d2, const int d3, const int d4, const int d5,
                            const int s0, const int s1, const int s2, const int s3, const int s4) {
    x += x_off;
    y += y_off;
    const int r = get_global_id(0);
    if (r >= rows) {
        return;
    }
    int rest = r;
    const int i4 = rest % d4; rest /= d4;
    const int i3 = rest % d3; rest /= d3;
    const int i2 = rest % d2; rest /= d2;
    const int i1 = rest % d1; rest /= d1;
    __global const REAL *src = x + (size_t)rest * s0 + (size_t)i1 * s1 + (size_t)i2 * s2 + (size_t)i3 * s3 +
                               (size_t)i4 * s4;
    __global REAL *dst = y + (size_t)r * d5;
    for (int j = 0; j < d5; ++j) {
        dst[j] = src[j];
    }
}

/* out = alpha a + beta b[i % period]: residual adds (period n, beta 1), scaling (beta 0, b = a) and
 * broadcast adds of a (S, D) table to every sample (period S*D). Without a broadcast (period n) no
 * remainder is taken: an integer division per element made the residual adds of a transformer three times
 * slower than a plain elementwise product on a GPU. */
__kernel void axpby(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                    __global REAL *out, const uint out_off, const int n, const int period, const REAL alpha,
                    const REAL beta) {
    a += a_off;
    b += b_off;
    out += out_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    if (period == n) {
        out[i] = alpha * a[i] + beta * b[i];
    } else {
        out[i] = alpha * a[i] + beta * b[i % period];
    }
}

/* Column sums of g (rows, cols) in `chunks` slices of rows: out (chunks, cols)[k, c] = sum of g[r, c] over
 * slice k. One item per (slice, column); with chunks = 1 this is the final sum, otherwise a second call
 * with chunks = 1 adds the slices (GPUs need the row-parallel first stage to fill the device). */
__kernel void column_sum(__global const REAL *g, const uint g_off, __global REAL *out, const uint out_off,
                         const int rows, const int cols, const int chunks) {
    g += g_off;
    out += out_off;
    const int i = get_global_id(0);
    if (i >= cols * chunks) {
        return;
    }
    const int c = i % cols;
    const int k = i / cols;
    const int per = (rows + chunks - 1) / chunks;
    const int end = min(rows, (k + 1) * per);
    REAL acc = (REAL)0;
    for (int r = k * per; r < end; ++r) {
        acc += g[(size_t)r * cols + c];
    }
    out[i] = acc;
}

/* ATFNet's mix over (B, T, C) with w (B, C): forward out = w a + (1 - w) b; backward ga = w g, gb = (1-w) g
 * (`backward` = 1: a is the incoming gradient, out and out2 receive ga and gb). */
__kernel void atfnet_mix(__global const REAL *a, const uint a_off, __global const REAL *b, const uint b_off,
                  __global const REAL *w, const uint w_off, __global REAL *out, const uint out_off,
                  __global REAL *out2, const uint out2_off, const int n, const int T, const int C,
                  const int backward) {
    a += a_off;
    b += b_off;
    w += w_off;
    out += out_off;
    out2 += out2_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int c = i % C;
    const int s = i / (T * C);
    const REAL wi = w[s * C + c];
    if (backward) {
        out[i] = wi * a[i];
        out2[i] = ((REAL)1 - wi) * a[i];
    } else {
        out[i] = wi * a[i] + ((REAL)1 - wi) * b[i];
    }
}

/* PatchTST patches: out (N, P, PL)[r, p, k] = x (N, L)[r, min(p*stride + k, L-1)]. One item per output. */
__kernel void patch_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                            const int n, const int L, const int P, const int PL, const int stride) {
    x += x_off;
    y += y_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int k = i % PL;
    const int p = (i / PL) % P;
    const int r = i / (PL * P);
    y[i] = x[(size_t)r * L + min(p * stride + k, L - 1)];
}

/* Gradient of patch_forward, gathered (no atomics): gx[r, l] = sum of gy over patch slots reading l.
 * One item per input element (N * L). */
__kernel void patch_backward(__global const REAL *gy, const uint gy_off, __global REAL *gx, const uint gx_off,
                             const int n, const int L, const int P, const int PL, const int stride) {
    gy += gy_off;
    gx += gx_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int l = i % L;
    const int r = i / L;
    __global const REAL *g = gy + (size_t)r * P * PL;
    REAL acc = (REAL)0;
    for (int p = 0; p < P; ++p) {
        for (int k = 0; k < PL; ++k) {
            if (min(p * stride + k, L - 1) == l) {
                acc += g[p * PL + k];
            }
        }
    }
    gx[i] = acc;
}

/* RevIN statistics of each row of x (rows, L): mean and sqrt(biased var + eps). One item per row. */
__kernel void revin_stats(__global const REAL *x, const uint x_off, __global REAL *mean, const uint mean_off,
                          __global REAL *std, const uint std_off, const int rows, const int L, const REAL eps) {
    const int r = get_global_id(0);
    if (r >= rows) {
        return;
    }
    x += x_off + (size_t)r * L;
    REAL mu = (REAL)0;
    for (int j = 0; j < L; ++j) {
        mu += x[j];
    }
    mu /= (REAL)L;
    REAL var = (REAL)0;
    for (int j = 0; j < L; ++j) {
        const REAL d = x[j] - mu;
        var += d * d;
    }
    mean[mean_off + r] = mu;
    std[std_off + r] = sqrt(var / (REAL)L + eps);
}

/* Row maps of (rows, L) by per-row shift and scale: mode 0 (x - shift)/scale, 1 x*scale + shift. */
__kernel void row_affine(__global const REAL *x, const uint x_off, __global const REAL *shift,
                         const uint shift_off, __global const REAL *scale, const uint scale_off,
                         __global REAL *y, const uint y_off, const int n, const int L, const int mode) {
    x += x_off;
    shift += shift_off;
    scale += scale_off;
    y += y_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int r = i / L;
    const REAL v = x[i];
    const REAL s = scale[r];
    y[i] = mode == 0 ? (v - shift[r]) / s : v * s + shift[r];
}

/* Backward of RevIN's y = h std + mean per row of (rows, T): gh = gy std and the gradients reaching the
 * statistics, g_mean = sum_t gy, g_std = sum_t gy h. One item per row. */
__kernel void revin_denorm_backward(__global const REAL *gy, const uint gy_off, __global const REAL *h,
                                    const uint h_off, __global const REAL *std, const uint std_off,
                                    __global REAL *gh, const uint gh_off, __global REAL *g_mean,
                                    const uint g_mean_off, __global REAL *g_std, const uint g_std_off,
                                    const int rows, const int T) {
    const int r = get_global_id(0);
    if (r >= rows) {
        return;
    }
    gy += gy_off + (size_t)r * T;
    h += h_off + (size_t)r * T;
    gh += gh_off + (size_t)r * T;
    const REAL s = std[std_off + r];
    REAL sum = (REAL)0;
    REAL dot = (REAL)0;
    for (int t = 0; t < T; ++t) {
        const REAL g = gy[t];
        gh[t] = g * s;
        sum += g;
        dot += g * h[t];
    }
    g_mean[g_mean_off + r] = sum;
    g_std[g_std_off + r] = dot;
}

/* Exact input gradient of RevIN per row of (rows, L), xn = (x - mean)/std:
 * gx = gxn/std + (G_mean + G_std xn)/L, G_mean = g_mean - sum gxn/std, G_std = g_std - sum gxn xn/std.
 * One item per row. */
__kernel void revin_norm_backward(__global const REAL *gxn, const uint gxn_off, __global const REAL *xn,
                                  const uint xn_off, __global const REAL *std, const uint std_off,
                                  __global const REAL *g_mean, const uint g_mean_off,
                                  __global const REAL *g_std, const uint g_std_off, __global REAL *gx,
                                  const uint gx_off, const int rows, const int L) {
    const int r = get_global_id(0);
    if (r >= rows) {
        return;
    }
    gxn += gxn_off + (size_t)r * L;
    xn += xn_off + (size_t)r * L;
    gx += gx_off + (size_t)r * L;
    const REAL s = std[std_off + r];
    REAL sum = (REAL)0;
    REAL dot = (REAL)0;
    for (int l = 0; l < L; ++l) {
        sum += gxn[l];
        dot += gxn[l] * xn[l];
    }
    const REAL gm = (g_mean[g_mean_off + r] - sum / s) / (REAL)L;
    const REAL gs = (g_std[g_std_off + r] - dot / s) / (REAL)L;
    for (int l = 0; l < L; ++l) {
        gx[l] = gxn[l] / s + gm + gs * xn[l];
    }
}

/* RevIN's channel affine on (B, C, L): gamma x + beta, or (inverse) (x - beta)/gamma. */
__kernel void channel_affine_forward(__global const REAL *x, const uint x_off, __global const REAL *gamma,
                                     const uint gamma_off, __global const REAL *beta, const uint beta_off,
                                     __global REAL *y, const uint y_off, const int n, const int C, const int L,
                                     const int inverse) {
    x += x_off;
    gamma += gamma_off;
    beta += beta_off;
    y += y_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int c = (i / L) % C;
    y[i] = inverse ? (x[i] - beta[c]) / gamma[c] : gamma[c] * x[i] + beta[c];
}

/* Input gradient of channel_affine_forward: gamma gy or gy / gamma. */
__kernel void channel_affine_backward_input(__global const REAL *gy, const uint gy_off,
                                            __global const REAL *gamma, const uint gamma_off, __global REAL *gx,
                                            const uint gx_off, const int n, const int C, const int L,
                                            const int inverse) {
    gy += gy_off;
    gamma += gamma_off;
    gx += gx_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int c = (i / L) % C;
    gx[i] = inverse ? gy[i] / gamma[c] : gamma[c] * gy[i];
}

/* Parameter gradients of channel_affine_forward, one item per channel, summing over (B, L):
 * forward ggamma = sum gy x, gbeta = sum gy; inverse ggamma = -sum gy y / gamma, gbeta = -sum gy / gamma. */
__kernel void channel_affine_backward_params(__global const REAL *gy, const uint gy_off, __global const REAL *x,
                                             const uint x_off, __global const REAL *y, const uint y_off,
                                             __global const REAL *gamma, const uint gamma_off,
                                             __global REAL *ggamma, const uint ggamma_off, __global REAL *gbeta,
                                             const uint gbeta_off, const int B, const int C, const int L,
                                             const int inverse) {
    gy += gy_off;
    x += x_off;
    y += y_off;
    const int c = get_global_id(0);
    if (c >= C) {
        return;
    }
    REAL sg = (REAL)0, sx = (REAL)0;
    for (int b = 0; b < B; ++b) {
        const size_t base = ((size_t)b * C + c) * L;
        for (int l = 0; l < L; ++l) {
            sg += gy[base + l];
            sx += gy[base + l] * (inverse ? y[base + l] : x[base + l]);
        }
    }
    const REAL g = gamma[gamma_off + c];
    ggamma[ggamma_off + c] = inverse ? -sx / g : sx;
    gbeta[gbeta_off + c] = inverse ? -sg / g : sg;
}
