/* Losses: value (batch mean, reduced on the device) and gradient in one launch of ONE work-group of LWG
 * items. Loss tensors are small (batch x outputs), so one group is enough and the value needs no second
 * launch; items stride over the rows/elements, then sum their partial losses in local memory. */
#include "nn_common.h"

#define LOSS_MSE 0
#define LOSS_MAE 1
#define LOSS_BCE 2

/* BCE clips probabilities away from 0 and 1 so the logarithms stay finite in float32. */
#define BCE_CLIP 1e-7

/* Softmax + categorical cross-entropy from the LOGITS x (B, C): value = mean over rows of
 * -sum_c t log softmax(x) = sum_c t (lse - x) with a max-subtracted log-sum-exp; grad = (softmax - t) / B. */
__kernel void softmax_cce_loss(__global const REAL *x, const uint x_off, __global const REAL *t,
                               const uint t_off, __global REAL *grad, const uint grad_off,
                               __global REAL *value, const uint value_off, const int C, const int B) {
    __local REAL scratch[LWG];
    x += x_off;
    t += t_off;
    grad += grad_off;
    value += value_off;
    const REAL inv_b = (REAL)1 / (REAL)B;
    REAL acc = (REAL)0;
    for (int b = get_local_id(0); b < B; b += LWG) {
        const size_t r = (size_t)b * C;
        REAL m = x[r];
        for (int c = 1; c < C; ++c) {
            m = fmax(m, x[r + c]);
        }
        REAL s = (REAL)0;
        for (int c = 0; c < C; ++c) {
            s += exp(x[r + c] - m);
        }
        const REAL lse = m + log(s);
        const REAL inv_s = (REAL)1 / s;
        for (int c = 0; c < C; ++c) {
            const REAL xc = x[r + c];
            const REAL tc = t[r + c];
            acc += tc * (lse - xc);
            grad[r + c] = (exp(xc - m) * inv_s - tc) * inv_b;
        }
    }
    acc = nn_group_sum(acc, scratch);
    if (get_local_id(0) == 0) {
        value[0] = acc * inv_b;
    }
}

/* MSE, MAE or BCE over all n = B * C elements of p and t: value = mean loss, grad = d value / d p. */
__kernel void pointwise_loss(__global const REAL *p, const uint p_off, __global const REAL *t,
                             const uint t_off, __global REAL *grad, const uint grad_off, __global REAL *value,
                             const uint value_off, const int n, const int kind) {
    __local REAL scratch[LWG];
    p += p_off;
    t += t_off;
    grad += grad_off;
    value += value_off;
    const REAL inv_n = (REAL)1 / (REAL)n;
    REAL acc = (REAL)0;
    for (int i = get_local_id(0); i < n; i += LWG) {
        const REAL pi = p[i];
        const REAL ti = t[i];
        const REAL d = pi - ti;
        REAL loss;
        REAL g;
        if (kind == LOSS_MSE) {
            loss = d * d;
            g = (REAL)2 * d;
        } else if (kind == LOSS_MAE) {
            loss = fabs(d);
            g = d > (REAL)0 ? (REAL)1 : (d < (REAL)0 ? (REAL)-1 : (REAL)0);
        } else {
#ifdef REAL_IS_DOUBLE
            const REAL pc = clamp(pi, (REAL)BCE_CLIP, (REAL)1 - (REAL)BCE_CLIP);
            const REAL qc = (REAL)1 - pc;
#else
            /* 1 - 1e-7 rounds to 1 - 1.19e-7 in float32: clip p and 1 - p from below separately. */
            const REAL pc = fmax(pi, (REAL)BCE_CLIP);
            const REAL qc = fmax((REAL)1 - pi, (REAL)BCE_CLIP);
#endif
            loss = -(ti * log(pc) + ((REAL)1 - ti) * log(qc));
            g = (fmin(pc, (REAL)1 - (REAL)BCE_CLIP) - ti) / (pc * qc);
        }
        acc += loss;
        grad[i] = g * inv_n;
    }
    acc = nn_group_sum(acc, scratch);
    if (get_local_id(0) == 0) {
        value[0] = acc * inv_n;
    }
}
