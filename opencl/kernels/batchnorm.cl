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

/* CPU variants: one item per 8 adjacent feature columns with explicit vectors, rows in a loop (PoCL does
 * not vectorise across items whose body is a loop); columns past the last full group of 8 are done one at
 * a time by the last item. Range: ceil(F / 8) items. */
inline void bn_train_column(__global const REAL *x, __global const REAL *gamma, __global const REAL *beta,
                            __global REAL *running_mean, __global REAL *running_var, __global REAL *y,
                            __global REAL *xhat, __global REAL *inv_std, int f, int F, int B, REAL momentum,
                            REAL eps) {
    REAL s = (REAL)0;
    for (int b = 0; b < B; ++b) {
        s += x[(size_t)b * F + f];
    }
    const REAL mean = s / (REAL)B;
    REAL q = (REAL)0;
    for (int b = 0; b < B; ++b) {
        const REAL d = x[(size_t)b * F + f] - mean;
        q += d * d;
    }
    const REAL var = q / (REAL)B;
    const REAL istd = rsqrt(var + eps);
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f;
        const REAL h = (x[k] - mean) * istd;
        xhat[k] = h;
        y[k] = gamma[f] * h + beta[f];
    }
    inv_std[f] = istd;
    running_mean[f] = ((REAL)1 - momentum) * running_mean[f] + momentum * mean;
    running_var[f] = ((REAL)1 - momentum) * running_var[f] + momentum * var * (REAL)B / (REAL)(B - 1);
}

__kernel void batchnorm_forward_train8(__global const REAL *x, const uint x_off, __global const REAL *gamma,
                                       const uint gamma_off, __global const REAL *beta, const uint beta_off,
                                       __global REAL *running_mean, const uint running_mean_off,
                                       __global REAL *running_var, const uint running_var_off,
                                       __global REAL *y, const uint y_off, __global REAL *xhat,
                                       const uint xhat_off, __global REAL *inv_std, const uint inv_std_off,
                                       const int F, const int B, const REAL momentum, const REAL eps) {
    x += x_off;
    gamma += gamma_off;
    beta += beta_off;
    running_mean += running_mean_off;
    running_var += running_var_off;
    y += y_off;
    xhat += xhat_off;
    inv_std += inv_std_off;
    const int f0 = get_global_id(0) * 8;
    if (f0 + 8 > F) {
        for (int f = f0; f < F; ++f) {
            bn_train_column(x, gamma, beta, running_mean, running_var, y, xhat, inv_std, f, F, B, momentum, eps);
        }
        return;
    }
    REAL8 s = (REAL8)(0);
    for (int b = 0; b < B; ++b) {
        s += LOAD8(x + (size_t)b * F + f0);
    }
    const REAL8 mean = s / (REAL)B;
    REAL8 q = (REAL8)(0);
    for (int b = 0; b < B; ++b) {
        const REAL8 d = LOAD8(x + (size_t)b * F + f0) - mean;
        q += d * d;
    }
    const REAL8 var = q / (REAL)B;
    const REAL8 istd = rsqrt(var + eps);
    const REAL8 g = LOAD8(gamma + f0);
    const REAL8 sh = LOAD8(beta + f0);
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f0;
        const REAL8 h = (LOAD8(x + k) - mean) * istd;
        STORE8(h, xhat + k);
        STORE8(g * h + sh, y + k);
    }
    STORE8(istd, inv_std + f0);
    STORE8(((REAL)1 - momentum) * LOAD8(running_mean + f0) + momentum * mean, running_mean + f0);
    STORE8(((REAL)1 - momentum) * LOAD8(running_var + f0) + momentum * var * ((REAL)B / (REAL)(B - 1)),
           running_var + f0);
}

inline void bn_backward_column(__global const REAL *gy, __global const REAL *xhat, __global const REAL *inv_std,
                               __global const REAL *gamma, __global REAL *gx, __global REAL *ggamma,
                               __global REAL *gbeta, int f, int F, int B) {
    REAL sb = (REAL)0;
    REAL sg = (REAL)0;
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f;
        sb += gy[k];
        sg += gy[k] * xhat[k];
    }
    const REAL scale = gamma[f] * inv_std[f] / (REAL)B;
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f;
        gx[k] = B == 1 ? gamma[f] * inv_std[f] * gy[k] : scale * ((REAL)B * gy[k] - sb - xhat[k] * sg);
    }
    ggamma[f] = sg;
    gbeta[f] = sb;
}

__kernel void batchnorm_backward8(__global const REAL *gy, const uint gy_off, __global const REAL *xhat,
                                  const uint xhat_off, __global const REAL *inv_std, const uint inv_std_off,
                                  __global const REAL *gamma, const uint gamma_off, __global REAL *gx,
                                  const uint gx_off, __global REAL *ggamma, const uint ggamma_off,
                                  __global REAL *gbeta, const uint gbeta_off, const int F, const int B) {
    gy += gy_off;
    xhat += xhat_off;
    inv_std += inv_std_off;
    gamma += gamma_off;
    gx += gx_off;
    ggamma += ggamma_off;
    gbeta += gbeta_off;
    const int f0 = get_global_id(0) * 8;
    if (f0 + 8 > F || B == 1) {
        for (int f = f0; f < min(F, f0 + 8); ++f) {
            bn_backward_column(gy, xhat, inv_std, gamma, gx, ggamma, gbeta, f, F, B);
        }
        return;
    }
    REAL8 sb = (REAL8)(0);
    REAL8 sg = (REAL8)(0);
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f0;
        const REAL8 g = LOAD8(gy + k);
        sb += g;
        sg += g * LOAD8(xhat + k);
    }
    const REAL8 scale = LOAD8(gamma + f0) * LOAD8(inv_std + f0) /
                        (REAL)B;
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * F + f0;
        STORE8(scale * ((REAL)B * LOAD8(gy + k) - sb -
                                                 LOAD8(xhat + k) * sg), gx + k);
    }
    STORE8(sg, ggamma + f0);
    STORE8(sb, gbeta + f0);
}
