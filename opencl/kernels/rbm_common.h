/* Shared definitions of the deep-belief-net kernels (rbm.cl): REAL, the array-argument convention,
 * nn_sigmoid, nn_uniform_bits and the column sum nn_col_sum (a (CG, RG) work-group) come from nn_common.h;
 * this header adds what only the RBM kernels use.
 *
 * Build options: -D WG=n (power of two) items of every reducing work-group; -D CG=n, -D RG=n (power of
 * two) the columns x row lanes of the column kernels (nn_common.h).
 */
#ifndef RBM_COMMON_H
#define RBM_COMMON_H

#include "nn_common.h"

#ifndef WG
#define WG 1
#endif

/* Slots of the device-resident hyper-parameters (nn/rbm_ops.py HYPER). */
#define H_LR 0
#define H_MOM 1
#define H_MAX_INC 2
#define H_PREV_LEN2 3
#define H_COS 4
#define H_LEN2 5

/* Reduction operators of rbm_group and rbm_finish. */
#define OP_SUM 0
#define OP_MAX 1

/* Tree reduction over the WG items of a group (OP_SUM or OP_MAX); every item gets the result. */
inline REAL rbm_group(REAL v, __local REAL *s, int op) {
    const int lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (lid < k) {
            s[lid] = op == OP_MAX ? fmax(s[lid], s[lid + k]) : s[lid] + s[lid + k];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    REAL r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Running sums of one weight step: sum g^2, sum g.g_prev (the previous batch's), max |w_inc|. */
typedef struct {
    REAL len2, dot, mx;
} rbm_wsums;

/* The weight step of one element k (row i, column j): penalised gradient g from the CD statistic gw,
 * momentum increment, new weight; g replaces g_prev and enters the cosine sums. */
inline void rbm_weight_step(const int k, const REAL spi, const REAL xmj, __global const REAL *gw,
                            __global REAL *w, __global REAL *w_inc, __global REAL *g_prev, const REAL lr,
                            const REAL mom, const REAL lam_w, rbm_wsums *acc) {
    const REAL wk = w[k];
    const REAL g = gw[k] - lam_w * wk - xmj * spi;
    const REAL inc = mom * w_inc[k] + lr * g;
    w_inc[k] = inc;
    w[k] = wk + inc;
    acc->len2 += g * g;
    acc->dot += g * g_prev[k];
    g_prev[k] = g;
    acc->mx = fmax(acc->mx, fabs(inc));
}

/* A bias step with momentum: inc = mu * inc + lr * grad; bias += inc. */
inline void rbm_bias_step(__global REAL *bias, __global REAL *inc, const int i, const REAL grad,
                          __global const REAL *hyper) {
    const REAL d = hyper[H_MOM] * inc[i] + hyper[H_LR] * grad;
    inc[i] = d;
    bias[i] += d;
}

/* Learning-rate factor of the cosine between successive weight gradients (spec dbn.md §3.7). */
inline REAL rbm_lr_factor(const REAL cs) {
    if (cs > (REAL)0.5) {
        return (REAL)1.2;
    }
    if (cs > (REAL)0.3) {
        return (REAL)1.1;
    }
    if (cs < (REAL)-0.5) {
        return (REAL)1 / (REAL)1.2;
    }
    if (cs < (REAL)-0.3) {
        return (REAL)1 / (REAL)1.1;
    }
    return (REAL)1;
}

#endif
