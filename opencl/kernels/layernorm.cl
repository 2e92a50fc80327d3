/* Layer normalisation over the last axis D of (rows, D) (Ba, Kiros & Hinton 2016; torch.nn.LayerNorm):
 * xhat = (x - mean)/sqrt(biased var + eps), y = gamma xhat + beta. Reference: nn/attention_ops_numpy.py. */
#include "complex.h" /* group_sum2: the LG-item work-group sum (LG defaults to 1 there) */

/* Writes y, xhat and inv_std (rows,). One work-group of LG items per row (global LG rows, local LG): on
 * CPUs LG = 1 (an item walks its row), on GPUs the items of a group read consecutive elements. */
__kernel void layernorm_forward(__global const REAL *x, const uint x_off, __global const REAL *gamma,
                                const uint gamma_off, __global const REAL *beta, const uint beta_off,
                                __global REAL *y, const uint y_off, __global REAL *xhat, const uint xhat_off,
                                __global REAL *inv_std, const uint inv_std_off, const int rows, const int D,
                                const REAL eps) {
    __local REAL2 scratch[LG];
    const int r = get_group_id(0);
    const int lid = get_local_id(0);
    x += x_off + (size_t)r * D;
    y += y_off + (size_t)r * D;
    xhat += xhat_off + (size_t)r * D;
    gamma += gamma_off;
    beta += beta_off;
    REAL part = (REAL)0;
    for (int j = lid; j < D; j += LG) {
        part += x[j];
    }
    const REAL mu = group_sum2((REAL2)(part, 0), scratch).x / (REAL)D;
    part = (REAL)0;
    for (int j = lid; j < D; j += LG) {
        const REAL d = x[j] - mu;
        part += d * d;
    }
    const REAL inv = (REAL)1 / sqrt(group_sum2((REAL2)(part, 0), scratch).x / (REAL)D + eps);
    for (int j = lid; j < D; j += LG) {
        const REAL h = (x[j] - mu) * inv;
        xhat[j] = h;
        y[j] = gamma[j] * h + beta[j];
    }
    if (lid == 0) {
        inv_std[inv_std_off + r] = inv;
    }
}

/* gx = inv_std (g - mean(g) - xhat mean(g xhat)) with g = gy gamma. One work-group of LG items per row. */
__kernel void layernorm_backward_input(__global const REAL *gy, const uint gy_off, __global const REAL *xhat,
                                       const uint xhat_off, __global const REAL *inv_std, const uint inv_std_off,
                                       __global const REAL *gamma, const uint gamma_off, __global REAL *gx,
                                       const uint gx_off, const int rows, const int D) {
    __local REAL2 scratch[LG];
    const int r = get_group_id(0);
    const int lid = get_local_id(0);
    gy += gy_off + (size_t)r * D;
    xhat += xhat_off + (size_t)r * D;
    gx += gx_off + (size_t)r * D;
    gamma += gamma_off;
    REAL2 part = (REAL2)(0, 0);
    for (int j = lid; j < D; j += LG) {
        const REAL g = gy[j] * gamma[j];
        part += (REAL2)(g, g * xhat[j]);
    }
    const REAL2 means = group_sum2(part, scratch) / (REAL)D;
    const REAL inv = inv_std[inv_std_off + r];
    for (int j = lid; j < D; j += LG) {
        gx[j] = inv * (gy[j] * gamma[j] - means.x - xhat[j] * means.y);
    }
}

/* ggamma = sum_rows gy xhat, gbeta = sum_rows gy, in `chunks` slices of rows (see column_sum in
 * attention.cl): outputs (chunks, D). One item per (slice, column). */
__kernel void layernorm_backward_params(__global const REAL *gy, const uint gy_off, __global const REAL *xhat,
                                        const uint xhat_off, __global REAL *ggamma, const uint ggamma_off,
                                        __global REAL *gbeta, const uint gbeta_off, const int rows, const int D,
                                        const int chunks) {
    gy += gy_off;
    xhat += xhat_off;
    const int i = get_global_id(0);
    if (i >= D * chunks) {
        return;
    }
    const int j = i % D;
    const int k = i / D;
    const int per = (rows + chunks - 1) / chunks;
    const int end = min(rows, (k + 1) * per);
    REAL sg = (REAL)0, sgx = (REAL)0;
    for (int r = k * per; r < end; ++r) {
        const REAL g = gy[(size_t)r * D + j];
        sg += g;
        sgx += g * xhat[(size_t)r * D + j];
    }
    ggamma[ggamma_off + i] = sgx;
    gbeta[gbeta_off + i] = sg;
}
