/* Complex multi-head self-attention core (the projections run on the real GEMM, see complex.cl).
 *
 * Layouts (complex elements; each is an interleaved (Re, Im) pair):
 *   qkv  (B, N, 3, H, E)   Q, K, V blocks of the fused projection, head-major inside each block
 *   s, p (B, H, N, N)      KEY-major: element [b, h, j, i] holds s_ij = sum_e q_ie k_je (unconjugated) and
 *                          the weight p_ij. Items own a query row i, so with i fastest in memory the items of
 *                          a group read and write consecutive addresses at every step j (coalesced on GPUs).
 *   out  (B, N, H, E)      heads concatenated
 * Score modes (a kernel argument):
 *   mode 0 "modulus"      p = softmax_j |s_ij| (real weights, Im p = 0; official ATFNet code, no 1/sqrt(E))
 *   mode 1 "holomorphic"  e = exp(clamp(Re t, +-20) + i Im t), t = s / sqrt(E), p = e / sum_j e (MQL5 port)
 * causal != 0 drops j > i (p = 0 there). Dropout on the weights: the forward and grad_kv get p already
 * multiplied by the real mask m (same layout); grad_scores multiplies gp by m itself (has_mask).
 * Gradients follow nn/complex_ops_numpy.py: dL/dRe + i dL/dIm, exact for both modes (|s| and the clamp
 * are not holomorphic). */
#include "complex.h"

#define EXP_CLAMP ((REAL)20)

/* One item per query row (i, h, b): global (N, H, B). Writes s and p. */
__kernel void complex_attention_scores(__global const REAL *qkv, const uint qkv_off, __global REAL *s,
                                       const uint s_off, __global REAL *p, const uint p_off, const int N,
                                       const int H, const int E, const int mode, const int causal) {
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
    const size_t q0 = ((size_t)b * N + i) * width + (size_t)h * E;
    const int jend = causal ? i + 1 : N;
    const REAL inv_sqrt_e = rsqrt((REAL)E);
    REAL amax = (REAL)0;
    for (int j = 0; j < N; ++j) {
        const size_t k0 = ((size_t)b * N + j) * width + (size_t)(H + h) * E;
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

/* out_i = sum_j p_ij v_j. One item per (i, c = h E + e, b): global (N, H E, B). */
__kernel void complex_attention_output(__global const REAL *qkv, const uint qkv_off, __global const REAL *p,
                                       const uint p_off, __global REAL *out, const uint out_off, const int N,
                                       const int H, const int E) {
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
        acc += c_mul(c_ld(p, mat + (size_t)j * N + i), c_ld(qkv, ((size_t)b * N + j) * width + 2 * H * E + c));
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
                                            const int mode, const int causal, const int has_mask) {
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
        const size_t v0 = ((size_t)b * N + j) * width + (size_t)(2 * H + h) * E;
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
                                       const int H, const int E) {
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
        acc += c_mul_conj(c_ld(gs, mat + (size_t)j * N + i), c_ld(qkv, ((size_t)b * N + j) * width + H * E + c));
    }
    c_st(gqkv + gqkv_off, ((size_t)b * N + i) * width + c, acc);
}

/* gk_je = sum_i gs_ij conj(q_ie) and gv_je = sum_i conj(p_ij) go_ie into the K and V blocks of gqkv. One
 * work-group of LG items per (j, c = h E + e, b), the items splitting the sum over i (consecutive addresses
 * of gs and p): global (LG N, H E, B), local (LG, 1, 1). */
__kernel void complex_attention_grad_kv(__global const REAL *qkv, const uint qkv_off, __global const REAL *p,
                                        const uint p_off, __global const REAL *gs, const uint gs_off,
                                        __global const REAL *gout, const uint gout_off, __global REAL *gqkv,
                                        const uint gqkv_off, const int N, const int H, const int E) {
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
        gk += c_mul_conj(c_ld(gs, row + i), c_ld(qkv, ((size_t)b * N + i) * width + c));
        gv += c_mul_conj(c_ld(gout, ((size_t)b * N + i) * HE + c), c_ld(p, row + i));
    }
    gk = group_sum2(gk, scratch);
    gv = group_sum2(gv, scratch);
    if (lid == 0) {
        const size_t at = ((size_t)b * N + j) * width + c; /* complex index of q_jc; k and v follow */
        c_st(gqkv + gqkv_off, at + HE, gk);
        c_st(gqkv + gqkv_off, at + 2 * HE, gv);
    }
}
