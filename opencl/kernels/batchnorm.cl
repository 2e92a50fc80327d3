/* Batch normalization (Ioffe & Szegedy 2015) over x (B, F): statistics per feature column.
 * Column kernels: 2-D range (roundup(F, CG), RG), work-group (CG, RG); see nn_col_sum. */
#include "nn_common.h"

/* Training: mean and biased variance of the batch (two passes: no cancellation), normalise, scale, shift,
 * and update the running statistics in place (running variance from the unbiased batch variance). B > 1. */
__kernel void batchnorm_forward_train(__global const REAL *x, const uint x_off, __global const REAL *gamma,
                                      const uint gamma_off, __global const REAL *beta, const uint beta_off,
                                      __global REAL *running_mean, const uint running_mean_off,
                                      __global REAL *running_var, const uint running_var_off,
                                      __global REAL *y, const uint y_off, __global REAL *xhat,
                                      const uint xhat_off, __global REAL *inv_std, const uint inv_std_off,
                                      const int F, const int B, const REAL momentum, const REAL eps) {
    __local REAL scratch[CG * RG];
    x += x_off;
    gamma += gamma_off;
    beta += beta_off;
    running_mean += running_mean_off;
    running_var += running_var_off;
    y += y_off;
    xhat += xhat_off;
    inv_std += inv_std_off;
    const int f = get_global_id(0);
    const int lane = get_local_id(1);
    const bool live = f < F;
    REAL s = (REAL)0;
    if (live) {
        for (int b = lane; b < B; b += RG) {
            s += x[(size_t)b * F + f];
        }
    }
    const REAL mean = nn_col_sum(s, scratch) / (REAL)B;
    REAL q = (REAL)0;
    if (live) {
        for (int b = lane; b < B; b += RG) {
            const REAL d = x[(size_t)b * F + f] - mean;
            q += d * d;
        }
    }
    const REAL var = nn_col_sum(q, scratch) / (REAL)B;
    if (!live) {
        return;
    }
    const REAL istd = rsqrt(var + eps);
    const REAL g = gamma[f];
    const REAL sh = beta[f];
    for (int b = lane; b < B; b += RG) {
        const size_t k = (size_t)b * F + f;
        const REAL h = (x[k] - mean) * istd;
        xhat[k] = h;
        y[k] = g * h + sh;
    }
    if (lane == 0) {
        inv_std[f] = istd;
        running_mean[f] = ((REAL)1 - momentum) * running_mean[f] + momentum * mean;
        running_var[f] = ((REAL)1 - momentum) * running_var[f] + momentum * var * (REAL)B / (REAL)(B - 1);
    }
}

/* Inference (and batches of one): normalise with the running statistics. n = B * F items. */
__kernel void batchnorm_forward_infer(__global const REAL *x, const uint x_off, __global const REAL *gamma,
                                      const uint gamma_off, __global const REAL *beta, const uint beta_off,
                                      __global const REAL *running_mean, const uint running_mean_off,
                                      __global const REAL *running_var, const uint running_var_off,
                                      __global REAL *y, const uint y_off, __global REAL *xhat,
                                      const uint xhat_off, __global REAL *inv_std, const uint inv_std_off,
                                      const int F, const int n, const REAL eps) {
    x += x_off;
    gamma += gamma_off;
    beta += beta_off;
    running_mean += running_mean_off;
    running_var += running_var_off;
    y += y_off;
    xhat += xhat_off;
    inv_std += inv_std_off;
    const int i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const int f = i % F;
    const REAL istd = rsqrt(running_var[f] + eps);
    const REAL h = (x[i] - running_mean[f]) * istd;
    xhat[i] = h;
    y[i] = gamma[f] * h + beta[f];
    if (i < F) {
        inv_std[f] = istd;
    }
}

/* Exact gradient through the batch statistics:
 *   gbeta = sum_b gy, ggamma = sum_b gy * xhat,
 *   gx = gamma * inv_std / B * (B * gy - gbeta - xhat * ggamma).
 * A batch of one was normalised with the running statistics (a fixed affine map): gx = gamma * inv_std * gy. */
__kernel void batchnorm_backward(__global const REAL *gy, const uint gy_off, __global const REAL *xhat,
                                 const uint xhat_off, __global const REAL *inv_std, const uint inv_std_off,
                                 __global const REAL *gamma, const uint gamma_off, __global REAL *gx,
                                 const uint gx_off, __global REAL *ggamma, const uint ggamma_off,
                                 __global REAL *gbeta, const uint gbeta_off, const int F, const int B) {
    __local REAL scratch[CG * RG];
    gy += gy_off;
    xhat += xhat_off;
    inv_std += inv_std_off;
    gamma += gamma_off;
    gx += gx_off;
    ggamma += ggamma_off;
    gbeta += gbeta_off;
    const int f = get_global_id(0);
    const int lane = get_local_id(1);
    const bool live = f < F;
    REAL sb = (REAL)0;
    REAL sg = (REAL)0;
    if (live) {
        for (int b = lane; b < B; b += RG) {
            const size_t k = (size_t)b * F + f;
            sb += gy[k];
            sg += gy[k] * xhat[k];
        }
    }
    sb = nn_col_sum(sb, scratch);
    sg = nn_col_sum(sg, scratch);
    if (!live) {
        return;
    }
    if (B == 1) {
        if (lane == 0) {
            gx[f] = gamma[f] * inv_std[f] * gy[f];
        }
    }
    const REAL scale = gamma[f] * inv_std[f] / (REAL)B;
    for (int b = lane; B > 1 && b < B; b += RG) {
        const size_t k = (size_t)b * F + f;
        gx[k] = scale * ((REAL)B * gy[k] - sb - xhat[k] * sg);
    }
    if (lane == 0) {
        ggamma[f] = sg;
        gbeta[f] = sb;
    }
}
