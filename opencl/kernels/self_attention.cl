/* Scaled dot-product self-attention of one (sample, head) per work-group, forward and backward, reading
 * q, k and v straight out of the fused projection (B, S, 3D) and writing the heads' output straight into
 * (B, S, D) (and the gradient into (B, S, 3D)): no permuted copies of q/k/v, no separate score, softmax,
 * dropout and value products. The head's q, k, v (and output gradient) and its S x S weights sit in local
 * memory: the host uses these kernels only when 4·S·(E+1) + 3·S·S elements fit ATT_LOCAL.
 *
 * Every element is the same sum in the same order as the composed path (bmm_strided over k, the row
 * softmax of softmax_row.h that attention.cl runs too, then the weights times the dropout mask).
 * Reference: nn/attention_ops_numpy.py (self_attention_forward / self_attention_backward). Layout: D = H·E;
 * q of token s, head h, element e is qkv[(b·S + s)·3D + h·E + e], k at +D, v at +2D. The weights a are
 * (B·H, S, S), before dropout. */
#include "common.h"
#include "softmax_row.h"

#ifndef ATT_LOCAL
#define ATT_LOCAL 4096
#endif

/* the head's S x E operands into local rows of E+1 (padded: a column walk does not hit one bank) */
inline void att_load(__local REAL *dst, __global const REAL *src, const int S, const int E, const int row_step,
                     const int lid, const int ls) {
    for (int idx = lid; idx < S * E; idx += ls) {
        const int s = idx / E, e = idx % E;
        dst[s * (E + 1) + e] = src[(size_t)s * row_step + e];
    }
}

__kernel void self_attention_forward(__global const REAL *qkv, const uint qkv_off, __global const REAL *mask,
                                     const uint mask_off, __global REAL *a, const uint a_off, __global REAL *o,
                                     const uint o_off, const int S, const int H, const int E, const REAL scale,
                                     const int causal, const int has_mask) {
    __local REAL sh[ATT_LOCAL];
    const int g = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    const int b = g / H, h = g % H, D = H * E, EP = E + 1;
    __local REAL *lq = sh, *lk = sh + S * EP, *lv = sh + 2 * S * EP, *lp = sh + 3 * S * EP;
    __global const REAL *src = qkv + qkv_off + (size_t)b * S * 3 * D + (size_t)h * E;
    att_load(lq, src, S, E, 3 * D, lid, ls);
    att_load(lk, src + D, S, E, 3 * D, lid, ls);
    att_load(lv, src + 2 * D, S, E, 3 * D, lid, ls);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int idx = lid; idx < S * S; idx += ls) {
        const int i = idx / S, j = idx % S;
        REAL acc = (REAL)0;
        for (int e = 0; e < E; ++e) {
            acc += lq[i * EP + e] * lk[j * EP + e];
        }
        lp[idx] = scale * acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    a += a_off + (size_t)g * S * S;
    mask += mask_off + (size_t)g * S * S;
    for (int i = lid; i < S; i += ls) { /* the row softmax of softmax_rows_forward, then the dropout mask */
        __local REAL *x = lp + i * S;
        softmax_row_local(x, x, S, i, causal);
        for (int j = 0; j < S; ++j) {
            const REAL p = x[j];
            a[i * S + j] = p;
            x[j] = has_mask ? p * mask[i * S + j] : p;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    o += o_off + (size_t)b * S * D + (size_t)h * E;
    for (int idx = lid; idx < S * E; idx += ls) {
        const int i = idx / E, e = idx % E;
        REAL acc = (REAL)0;
        for (int j = 0; j < S; ++j) {
            acc += lp[i * S + j] * lv[j * EP + e];
        }
        o[(size_t)i * D + e] = acc;
    }
}

/* gv = (a⊙m)ᵀ·go, ga = (go·vᵀ)⊙m, gs = a⊙(ga − Σ_j ga·a), gq = scale·gs·k, gk = scale·gsᵀ·q. */
__kernel void self_attention_backward(__global const REAL *qkv, const uint qkv_off, __global const REAL *a,
                                      const uint a_off, __global const REAL *mask, const uint mask_off,
                                      __global const REAL *go, const uint go_off, __global REAL *gqkv,
                                      const uint gqkv_off, const int S, const int H, const int E,
                                      const REAL scale, const int has_mask) {
    __local REAL sh[ATT_LOCAL];
    const int g = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    const int b = g / H, h = g % H, D = H * E, EP = E + 1;
    __local REAL *lq = sh, *lk = sh + S * EP, *lv = sh + 2 * S * EP, *lg = sh + 3 * S * EP;
    __local REAL *la = sh + 4 * S * EP, *lad = la + S * S, *lgs = lad + S * S;
    __global const REAL *src = qkv + qkv_off + (size_t)b * S * 3 * D + (size_t)h * E;
    att_load(lq, src, S, E, 3 * D, lid, ls);
    att_load(lk, src + D, S, E, 3 * D, lid, ls);
    att_load(lv, src + 2 * D, S, E, 3 * D, lid, ls);
    att_load(lg, go + go_off + (size_t)b * S * D + (size_t)h * E, S, E, D, lid, ls);
    a += a_off + (size_t)g * S * S;
    mask += mask_off + (size_t)g * S * S;
    for (int idx = lid; idx < S * S; idx += ls) {
        const REAL p = a[idx];
        la[idx] = p;
        lad[idx] = has_mask ? p * mask[idx] : p;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int idx = lid; idx < S * S; idx += ls) {
        const int i = idx / S, j = idx % S;
        REAL acc = (REAL)0;
        for (int e = 0; e < E; ++e) {
            acc += lg[i * EP + e] * lv[j * EP + e];
        }
        lgs[idx] = has_mask ? acc * mask[idx] : acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < S; i += ls) { /* the softmax backward of softmax_rows_backward, in place */
        softmax_row_backward_local(la + i * S, lgs + i * S, lgs + i * S, S);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global REAL *dst = gqkv + gqkv_off + (size_t)b * S * 3 * D + (size_t)h * E;
    for (int idx = lid; idx < S * E; idx += ls) {
        const int s = idx / E, e = idx % E;
        REAL gq = (REAL)0, gk = (REAL)0, gv = (REAL)0;
        for (int j = 0; j < S; ++j) {
            gq += lgs[s * S + j] * lk[j * EP + e];
        }
        for (int i = 0; i < S; ++i) {
            gk += lgs[i * S + s] * lq[i * EP + e];
            gv += lad[i * S + s] * lg[i * EP + e];
        }
        __global REAL *row = dst + (size_t)s * 3 * D + e;
        row[0] = scale * gq;
        row[D] = scale * gk;
        row[2 * D] = gv;
    }
}
