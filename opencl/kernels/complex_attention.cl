/* Complex multi-head self-attention core (the projections run on the real GEMM, see complex.cl).
 *
 * Layouts (complex elements; each is an interleaved (Re, Im) pair):
 *   qkv  Q, K, V of the fused projection, head-major inside each (H, E) block: q of token i, head h, element
 *        e of sample b at b N 3HE + i ts + h E + e, k at + bs, v at + 2 bs. (ts, bs) = (3HE, HE) for the
 *        token-major layout (B, N, 3, H, E) and (HE, N HE) for three blocks of N tokens (B, 3, N, H, E).
 *   s, p (B, H, N, N)      KEY-major: element [b, h, j, i] holds s_ij = sum_e q_ie k_je (unconjugated) and
 *                          the weight p_ij. Items own a query row i, so with i fastest in memory the items of
 *                          a group read and write consecutive addresses at every step j (coalesced on GPUs).
 *   out  (B, N, H, E)      heads concatenated
 * Score modes (a kernel argument):
 *   mode 0 "modulus"      p = softmax_j |s_ij| (real weights, Im p = 0; official ATFNet code, no 1/sqrt(E))
 *   mode 1 "holomorphic"  e = exp(clamp(Re t, +-20) + i Im t), t = s / sqrt(E), p = e / sum_j e (MQL5 port)
 * causal != 0 drops j > i (p = 0 there). Dropout on the weights: the output, grad_scores and grad_kv
 * multiply by the real mask m (same layout as p) themselves when has_mask (p itself stays undropped).
 * Gradients follow nn/complex_ops_numpy.py: dL/dRe + i dL/dIm, exact for both modes (|s| and the clamp
 * are not holomorphic). */
#include "complex.h"

#define EXP_CLAMP ((REAL)20)

/* One item per query row (i, h, b): global (N, H, B). Writes s and p. */
__kernel void complex_attention_scores(__global const REAL *qkv, const uint qkv_off, __global REAL *s,
                                       const uint s_off, __global REAL *p, const uint p_off, const int N,
                                       const int H, const int E, const int ts, const int bs, const int mode,
                                       const int causal) {
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= N) {
        return;
    }
    qkv += qkv_off;
    const size_t mat = (size_t)(b * H + h) * N * N;
    s += s_off;
    p += p_off;
    const int width = 3 * H * E;
    const size_t q0 = (size_t)b * N * width + (size_t)i * ts + (size_t)h * E;
    const int jend = causal ? i + 1 : N;
    const REAL inv_sqrt_e = rsqrt((REAL)E);
    REAL amax = (REAL)0;
    for (int j = 0; j < N; ++j) {
        const size_t k0 = (size_t)b * N * width + (size_t)j * ts + bs + (size_t)h * E;
        REAL2 acc = (REAL2)(0, 0);
        for (int e = 0; e < E; ++e) {
            acc += c_mul(c_ld(qkv, q0 + e), c_ld(qkv, k0 + e));
        }
        c_st(s, mat + (size_t)j * N + i, acc);
        if (j < jend) {
            amax = fmax(amax, c_abs(acc));
        }
    }
    /* unnormalised weights into p, and their sum */
    REAL2 sum = (REAL2)(0, 0);
    for (int j = 0; j < N; ++j) {
        REAL2 e = (REAL2)(0, 0);
        if (j < jend) {
            const REAL2 sj = c_ld(s, mat + (size_t)j * N + i);
            e = mode == 0 ? (REAL2)(exp(c_abs(sj) - amax), 0) : c_exp_clamped(sj * inv_sqrt_e, EXP_CLAMP);
        }
        c_st(p, mat + (size_t)j * N + i, e);
        sum += e;
    }
    for (int j = 0; j < jend; ++j) {
        const size_t at = mat + (size_t)j * N + i;
        c_st(p, at, mode == 0 ? c_ld(p, at) / sum.x : c_div(c_ld(p, at), sum));
    }
}

/* out_i = sum_j (p_ij m_ij) v_j (m = 1 without mask). One item per (i, c = h E + e, b): global (N, H E, B). */
__kernel void complex_attention_output(__global const REAL *qkv, const uint qkv_off, __global const REAL *p,
                                       const uint p_off, __global const REAL *mask, const uint mask_off,
                                       __global REAL *out, const uint out_off, const int N, const int H,
                                       const int E, const int ts, const int bs, const int has_mask) {
    const int i = get_global_id(0);
    const int c = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= N) {
        return;
    }
    qkv += qkv_off;
    p += p_off;
    out += out_off;
    const int width = 3 * H * E;
    const size_t mat = (size_t)(b * H + c / E) * N * N;
    REAL2 acc = (REAL2)(0, 0);
    for (int j = 0; j < N; ++j) {
        const size_t at = mat + (size_t)j * N + i;
        const REAL2 pj = has_mask ? c_ld(p, at) * mask[mask_off + at] : c_ld(p, at);
        acc += c_mul(pj, c_ld(qkv, (size_t)b * N * width + (size_t)j * ts + 2 * bs + c));
    }
    c_st(out, ((size_t)b * N + i) * H * E + c, acc);
}

/* Gradient of the scores, gs (same layout as s): gp_ij = m_ij sum_e go_ie conj(v_je) (m = 1 without mask);
 * then
 *   modulus:      ga = p (Re gp - sum_j p Re gp),  gs = ga s / |s|
 *   holomorphic:  ge = conj(1/Z) (gp - sum_j conj(p) gp), w = conj(ge) e,
 *                 gs = (c' Re w - i Im w) / sqrt(E) with c' = 1 where |Re t| < 20, else 0.
 * One item per (i, h, b): global (N, H, B). */
__kernel void complex_attention_grad_scores(__global const REAL *qkv, const uint qkv_off,
                                            __global const REAL *s, const uint s_off, __global const REAL *p,
                                            const uint p_off, __global const REAL *gout, const uint gout_off,
                                            __global const REAL *mask, const uint mask_off, __global REAL *gs,
                                            const uint gs_off, const int N, const int H, const int E,
                                            const int ts, const int bs, const int mode, const int causal,
                                            const int has_mask) {
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= N) {
        return;
    }
    qkv += qkv_off;
    s += s_off;
    p += p_off;
    gout += gout_off;
    gs += gs_off;
    const int width = 3 * H * E;
    const size_t mat = (size_t)(b * H + h) * N * N;
    const size_t go0 = ((size_t)b * N + i) * H * E + (size_t)h * E;
    const int jend = causal ? i + 1 : N;
    /* pass 1: gp into gs, and the row sum needed by the softmax backward */
    REAL2 dot = (REAL2)(0, 0);
    for (int j = 0; j < N; ++j) {
        const size_t v0 = (size_t)b * N * width + (size_t)j * ts + 2 * bs + (size_t)h * E;
        REAL2 gp = (REAL2)(0, 0);
        for (int e = 0; e < E; ++e) {
            gp += c_mul_conj(c_ld(gout, go0 + e), c_ld(qkv, v0 + e));
        }
        const size_t at = mat + (size_t)j * N + i;
        if (has_mask) {
            gp *= mask[mask_off + at];
        }
        c_st(gs, at, gp);
        const REAL2 pj = c_ld(p, at);
        dot += mode == 0 ? (REAL2)(pj.x * gp.x, 0) : c_mul_conj(gp, pj);
    }
    const REAL inv_sqrt_e = rsqrt((REAL)E);
    REAL2 zsum = (REAL2)(0, 0);
    if (mode != 0) {
        for (int j = 0; j < jend; ++j) {
            zsum += c_exp_clamped(c_ld(s, mat + (size_t)j * N + i) * inv_sqrt_e, EXP_CLAMP);
        }
    }
    /* pass 2: gp -> gs in place */
    for (int j = 0; j < N; ++j) {
        const size_t at = mat + (size_t)j * N + i;
        REAL2 g = (REAL2)(0, 0);
        if (j < jend) {
            const REAL2 gp = c_ld(gs, at);
            const REAL2 sj = c_ld(s, at);
            if (mode == 0) {
                const REAL mag = c_abs(sj);
                const REAL ga = c_ld(p, at).x * (gp.x - dot.x);
                g = mag > (REAL)0 ? sj * (ga / mag) : (REAL2)(0, 0);
            } else {
                const REAL2 t = sj * inv_sqrt_e;
                const REAL2 ge = c_mul(c_conj(c_div((REAL2)(1, 0), zsum)), gp - dot);
                const REAL2 wv = c_mul(c_conj(ge), c_exp_clamped(t, EXP_CLAMP));
                const REAL slope = fabs(t.x) < EXP_CLAMP ? (REAL)1 : (REAL)0;
                g = (REAL2)(slope * wv.x, -wv.y) * inv_sqrt_e;
            }
        }
        c_st(gs, at, g);
    }
}

/* gq_ie = sum_j gs_ij conj(k_je) into the Q block of gqkv (B, N, 3, H, E). One item per (i, c = h E + e, b):
 * global (N, H E, B). */
__kernel void complex_attention_grad_q(__global const REAL *qkv, const uint qkv_off, __global const REAL *gs,
                                       const uint gs_off, __global REAL *gqkv, const uint gqkv_off, const int N,
                                       const int H, const int E, const int ts, const int bs) {
    const int i = get_global_id(0);
    const int c = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= N) {
        return;
    }
    qkv += qkv_off;
    gs += gs_off;
    const int width = 3 * H * E;
    const size_t mat = (size_t)(b * H + c / E) * N * N;
    REAL2 acc = (REAL2)(0, 0);
    for (int j = 0; j < N; ++j) {
        acc += c_mul_conj(c_ld(gs, mat + (size_t)j * N + i), c_ld(qkv, (size_t)b * N * width + (size_t)j * ts + bs + c));
    }
    c_st(gqkv + gqkv_off, (size_t)b * N * width + (size_t)i * ts + c, acc);
}

/* gk_je = sum_i gs_ij conj(q_ie) and gv_je = sum_i conj(p_ij m_ij) go_ie into the K and V blocks of gqkv. One
 * work-group of LG items per (j, c = h E + e, b), the items splitting the sum over i (consecutive addresses
 * of gs and p): global (LG N, H E, B), local (LG, 1, 1). */
__kernel void complex_attention_grad_kv(__global const REAL *qkv, const uint qkv_off, __global const REAL *p,
                                        const uint p_off, __global const REAL *mask, const uint mask_off,
                                        __global const REAL *gs, const uint gs_off, __global const REAL *gout,
                                        const uint gout_off, __global REAL *gqkv, const uint gqkv_off,
                                        const int N, const int H, const int E, const int ts, const int bs,
                                        const int has_mask) {
    __local REAL2 scratch[LG];
    const int j = get_group_id(0);
    const int lid = get_local_id(0);
    const int c = get_global_id(1);
    const int b = get_global_id(2);
    qkv += qkv_off;
    p += p_off;
    gs += gs_off;
    gout += gout_off;
    const int HE = H * E;
    const int width = 3 * HE;
    const size_t row = (size_t)(b * H + c / E) * N * N + (size_t)j * N;
    REAL2 gk = (REAL2)(0, 0);
    REAL2 gv = (REAL2)(0, 0);
    for (int i = lid; i < N; i += LG) {
        gk += c_mul_conj(c_ld(gs, row + i), c_ld(qkv, (size_t)b * N * width + (size_t)i * ts + c));
        const REAL2 pi = has_mask ? c_ld(p, row + i) * mask[mask_off + row + i] : c_ld(p, row + i);
        gv += c_mul_conj(c_ld(gout, ((size_t)b * N + i) * HE + c), pi);
    }
    gk = group_sum2(gk, scratch);
    gv = group_sum2(gv, scratch);
    if (lid == 0) {
        const size_t at = (size_t)b * N * width + (size_t)j * ts + c; /* complex index of q_jc */
        c_st(gqkv + gqkv_off, at + bs, gk);
        c_st(gqkv + gqkv_off, at + 2 * bs, gv);
    }
}

/* ---- CPU layout ----------------------------------------------------------------------------------------
 * PoCL runs each work-group of one item as a plain loop and does not vectorise across items, and a
 * launch of one group per query row pays its per-group cost N H B times. On CPUs one item loops over a run
 * of whole (b, h) score matrices; inside a matrix, 8 query rows i at a time are the lanes of explicit 8-wide
 * vectors (planar Re / Im), so every access of s, p, gs and the mask is a contiguous piece of a key row j
 * (the key-major layout keeps i fastest). Same maths and per-row order of summation as the kernels above. */

typedef struct {
    REAL8 re;
    REAL8 im;
} C8;

/* n (<= 8) complex elements at p as planar vectors; lanes past n are 0. */
inline C8 c8_ld(__global const REAL *p, const int n) {
    REAL16 v;
    if (n >= 8) {
        v = *(__global const REAL16_u *)p;
    } else {
        v = (REAL16)(0);
        REAL *t = (REAL *)&v;
        for (int l = 0; l < 2 * n; ++l) {
            t[l] = p[l];
        }
    }
    C8 z = {v.even, v.odd};
    return z;
}

inline void c8_st(__global REAL *p, const int n, const C8 z) {
    REAL16 v;
    v.even = z.re;
    v.odd = z.im;
    if (n >= 8) {
        *(__global REAL16_u *)p = v;
    } else {
        const REAL *t = (const REAL *)&v;
        for (int l = 0; l < 2 * n; ++l) {
            p[l] = t[l];
        }
    }
}

/* n (<= 8) reals at p; lanes past n are 0. */
inline REAL8 r8_ld(__global const REAL *p, const int n) {
    if (n >= 8) {
        return *(__global const REAL8_u *)p;
    }
    REAL8 v = (REAL8)(0);
    REAL *t = (REAL *)&v;
    for (int l = 0; l < n; ++l) {
        t[l] = p[l];
    }
    return v;
}

/* Complex element `at + l stride` (l < n; 0 past n) of every lane: a gather of 8 strided elements. */
inline C8 c8_gather(__global const REAL *p, const size_t at, const size_t stride, const int n) {
    REAL16 v = (REAL16)(0);
    REAL *t = (REAL *)&v;
    for (int l = 0; l < n; ++l) {
        t[2 * l] = p[2 * (at + l * stride)];
        t[2 * l + 1] = p[2 * (at + l * stride) + 1];
    }
    C8 z = {v.even, v.odd};
    return z;
}

inline C8 c8_mul(const C8 a, const REAL2 b) {
    C8 z = {a.re * b.x - a.im * b.y, a.re * b.y + a.im * b.x};
    return z;
}

inline C8 c8_mul_conj(const C8 a, const REAL2 b) {
    C8 z = {a.re * b.x + a.im * b.y, a.im * b.x - a.re * b.y};
    return z;
}

inline C8 c8_exp_clamped(const C8 z, const REAL lim) {
    const REAL8 m = exp(clamp(z.re, -lim, lim));
    C8 e = {m * cos(z.im), m * sin(z.im)};
    return e;
}

/* |z| lane by lane, as hypot computes it: max(|Re|, |Im|) sqrt(1 + r^2), r = min / max, so that nothing
 * overflows or underflows (0 stays 0, inf stays inf, NaN propagates). PoCL's vector hypot runs lane by
 * lane through a libm-style call, twice the cost of the whole kernel without it. */
inline REAL8 c8_abs(const REAL8 re, const REAL8 im) {
    const REAL8 a = fabs(re);
    const REAL8 b = fabs(im);
    const REAL8 hi = select(b, a, a > b);
    const REAL8 lo = select(a, b, a > b);
    const REAL8 r = lo / hi;
    return select(hi * sqrt((REAL)1 + r * r), hi, hi == (REAL)0 || isinf(hi));
}

/* The lanes (query rows i0 + l) that key j may attend to: all, or j <= i when causal. Returned as the value
 * a comparison of REAL8 gives (true = all bits set). */
#define KEEP(j, ilast) ((REAL8)((REAL)(j)) <= (ilast))

/* complex_attention_scores on CPUs: item g takes matrices [g per, (g + 1) per) of the B H, groups of one
 * item: global (ceil(B H / per)). */
__kernel void complex_attention_scores_cpu(__global const REAL *qkv, const uint qkv_off, __global REAL *s,
                                           const uint s_off, __global REAL *p, const uint p_off, const int N,
                                           const int H, const int E, const int ts, const int bs, const int B,
                                           const int per, const int mode, const int causal) {
    const int first = get_global_id(0) * per;
    const int last = min(first + per, B * H);
    qkv += qkv_off;
    s += s_off;
    p += p_off;
    const int width = 3 * H * E;
    const REAL inv_sqrt_e = rsqrt((REAL)E);
    const REAL8 lane = (REAL8)(0, 1, 2, 3, 4, 5, 6, 7);
    for (int bh = first; bh < last; ++bh) {
        const int b = bh / H;
        const int h = bh - b * H;
        const size_t mat = (size_t)bh * N * N;
        for (int i0 = 0; i0 < N; i0 += 8) {
            const int n = min(8, N - i0);
            /* lane l: the last key row i0 + l may attend to (N - 1 without causality) */
            const REAL8 ilast = causal ? (REAL8)((REAL)i0) + lane : (REAL8)((REAL)(N - 1));
            const size_t q0 = (size_t)b * N * width + (size_t)i0 * ts + (size_t)h * E;
            /* s_ij = sum_e q_ie k_je, accumulated over e in s itself (one pass when E = 1); the last pass
             * starts the softmax: mode 0 keeps |s| in Re p and the row maxima, mode 1 writes the exponentials
             * into p and sums them. */
            REAL8 amax = (REAL8)(0);
            C8 sum = {(REAL8)(0), (REAL8)(0)};
            for (int e = 0; e < E; ++e) {
                const C8 q = c8_gather(qkv, q0 + e, ts, n);
                for (int j = 0; j < N; ++j) {
                    const size_t at = 2 * (mat + (size_t)j * N + i0);
                    const REAL2 k = c_ld(qkv, (size_t)b * N * width + (size_t)j * ts + bs + (size_t)h * E + e);
                    C8 acc = c8_mul(q, k);
                    if (e > 0) {
                        const C8 prev = c8_ld(s + at, n);
                        acc.re = prev.re + acc.re;
                        acc.im = prev.im + acc.im;
                    }
                    c8_st(s + at, n, acc);
                    if (e == E - 1) {
                        C8 ex;
                        if (mode == 0) {
                            const REAL8 mag = c8_abs(acc.re, acc.im);
                            amax = select(amax, fmax(amax, mag), KEEP(j, ilast));
                            ex.re = mag;
                            ex.im = (REAL8)(0);
                        } else {
                            acc.re *= inv_sqrt_e;
                            acc.im *= inv_sqrt_e;
                            ex = c8_exp_clamped(acc, EXP_CLAMP);
                            ex.re = select((REAL8)(0), ex.re, KEEP(j, ilast));
                            ex.im = select((REAL8)(0), ex.im, KEEP(j, ilast));
                            sum.re += ex.re;
                            sum.im += ex.im;
                        }
                        c8_st(p + at, n, ex);
                    }
                }
            }
            if (mode == 0) {
                for (int j = 0; j < N; ++j) {
                    const size_t at = 2 * (mat + (size_t)j * N + i0);
                    C8 ex = c8_ld(p + at, n);
                    ex.re = select((REAL8)(0), exp(ex.re - amax), KEEP(j, ilast));
                    sum.re += ex.re;
                    c8_st(p + at, n, ex);
                }
            }
            const REAL8 d = sum.re * sum.re + sum.im * sum.im;
            for (int j = 0; j < N; ++j) {
                const size_t at = 2 * (mat + (size_t)j * N + i0);
                C8 z = c8_ld(p + at, n);
                if (mode == 0) {
                    z.re = z.re / sum.re;
                } else {
                    const C8 c = {(z.re * sum.re + z.im * sum.im) / d, (z.im * sum.re - z.re * sum.im) / d};
                    z.re = select((REAL8)(0), c.re, KEEP(j, ilast));
                    z.im = select((REAL8)(0), c.im, KEEP(j, ilast));
                }
                c8_st(p + at, n, z);
            }
        }
    }
}

/* complex_attention_grad_scores on CPUs: the layout of complex_attention_scores_cpu. */
__kernel void complex_attention_grad_scores_cpu(__global const REAL *qkv, const uint qkv_off,
                                                __global const REAL *s, const uint s_off,
                                                __global const REAL *p, const uint p_off,
                                                __global const REAL *gout, const uint gout_off,
                                                __global const REAL *mask, const uint mask_off,
                                                __global REAL *gs, const uint gs_off, const int N, const int H,
                                                const int E, const int ts, const int bs, const int B,
                                                const int per, const int mode, const int causal,
                                                const int has_mask) {
    const int first = get_global_id(0) * per;
    const int last = min(first + per, B * H);
    qkv += qkv_off;
    s += s_off;
    p += p_off;
    gout += gout_off;
    mask += mask_off;
    gs += gs_off;
    const int width = 3 * H * E;
    const REAL inv_sqrt_e = rsqrt((REAL)E);
    const REAL8 lane = (REAL8)(0, 1, 2, 3, 4, 5, 6, 7);
    for (int bh = first; bh < last; ++bh) {
        const int b = bh / H;
        const int h = bh - b * H;
        const size_t mat = (size_t)bh * N * N;
        for (int i0 = 0; i0 < N; i0 += 8) {
            const int n = min(8, N - i0);
            const REAL8 ilast = causal ? (REAL8)((REAL)i0) + lane : (REAL8)((REAL)(N - 1));
            const size_t go0 = ((size_t)b * N + i0) * H * E + (size_t)h * E;
            /* pass 1: gp_ij = m_ij sum_e go_ie conj(v_je) into gs (accumulated over e), and the row sums of
             * the softmax backward */
            C8 dot = {(REAL8)(0), (REAL8)(0)};
            for (int e = 0; e < E; ++e) {
                const C8 go = c8_gather(gout, go0 + e, (size_t)H * E, n);
                for (int j = 0; j < N; ++j) {
                    const size_t at = mat + (size_t)j * N + i0;
                    const REAL2 v = c_ld(qkv, (size_t)b * N * width + (size_t)j * ts + 2 * bs + (size_t)h * E + e);
                    C8 gp = c8_mul_conj(go, v);
                    if (e > 0) {
                        const C8 prev = c8_ld(gs + 2 * at, n);
                        gp.re = prev.re + gp.re;
                        gp.im = prev.im + gp.im;
                    }
                    if (e == E - 1) {
                        if (has_mask) {
                            const REAL8 mj = r8_ld(mask + at, n);
                            gp.re *= mj;
                            gp.im *= mj;
                        }
                        const C8 pj = c8_ld(p + 2 * at, n);
                        if (mode == 0) {
                            dot.re += pj.re * gp.re;
                        } else {
                            dot.re += gp.re * pj.re + gp.im * pj.im;
                            dot.im += gp.im * pj.re - gp.re * pj.im;
                        }
                    }
                    c8_st(gs + 2 * at, n, gp);
                }
            }
            /* conj(1 / Z) of the holomorphic softmax, Z = sum_j exp(t_ij) over the kept keys */
            C8 iz = {(REAL8)(0), (REAL8)(0)};
            if (mode != 0) {
                C8 z = {(REAL8)(0), (REAL8)(0)};
                for (int j = 0; j < N; ++j) {
                    C8 t = c8_ld(s + 2 * (mat + (size_t)j * N + i0), n);
                    t.re *= inv_sqrt_e;
                    t.im *= inv_sqrt_e;
                    const C8 ex = c8_exp_clamped(t, EXP_CLAMP);
                    z.re += select((REAL8)(0), ex.re, KEEP(j, ilast));
                    z.im += select((REAL8)(0), ex.im, KEEP(j, ilast));
                }
                const REAL8 d = z.re * z.re + z.im * z.im;
                iz.re = (z.re + (REAL)0 * z.im) / d; /* c_div((1, 0), Z), conjugated */
                iz.im = -(((REAL)0 * z.re - z.im) / d);
            }
            /* pass 2: gp -> gs in place */
            for (int j = 0; j < N; ++j) {
                const size_t at = 2 * (mat + (size_t)j * N + i0);
                const C8 gp = c8_ld(gs + at, n);
                const C8 sj = c8_ld(s + at, n);
                C8 g;
                if (mode == 0) {
                    const REAL8 mag = c8_abs(sj.re, sj.im);
                    const REAL8 ga = c8_ld(p + at, n).re * (gp.re - dot.re);
                    const REAL8 r = ga / mag;
                    g.re = select((REAL8)(0), sj.re * r, mag > (REAL)0);
                    g.im = select((REAL8)(0), sj.im * r, mag > (REAL)0);
                } else {
                    C8 t = {sj.re * inv_sqrt_e, sj.im * inv_sqrt_e};
                    const REAL8 dr = gp.re - dot.re;
                    const REAL8 di = gp.im - dot.im;
                    const C8 ge = {iz.re * dr - iz.im * di, iz.re * di + iz.im * dr};
                    const C8 ex = c8_exp_clamped(t, EXP_CLAMP);
                    /* w = conj(ge) e */
                    const REAL8 wr = ge.re * ex.re + ge.im * ex.im;
                    const REAL8 wi = ge.re * ex.im - ge.im * ex.re;
                    const REAL8 slope = select((REAL8)(0), (REAL8)(1), fabs(t.re) < EXP_CLAMP);
                    g.re = slope * wr * inv_sqrt_e;
                    g.im = -wi * inv_sqrt_e;
                }
                g.re = select((REAL8)(0), g.re, KEEP(j, ilast));
                g.im = select((REAL8)(0), g.im, KEEP(j, ilast));
                c8_st(gs + at, n, g);
            }
        }
    }
}
