/* Elementwise activations (forward and derivative), row-wise softmax and its Jacobian-vector product.
 * Activation codes are those of nn_common.h; alpha/beta follow nn.backend.Activation. */
#include "nn_common.h"

/* One item per VEC elements (nn_common.h). */
__kernel void activation_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                                 const int n, const int act, const REAL alpha, const REAL beta) {
    x += x_off;
    y += y_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        store_v(y, i, n, nn_act_v(act, load_v(x, i, n), alpha, beta));
    }
}

/* gx = gy * act'(x); y = act(x) is read for the output-derivable kinds (the host passes x again for the
 * others, whose derivative needs x only). One item per VEC elements. */
__kernel void activation_backward(__global const REAL *x, const uint x_off, __global const REAL *y,
                                  const uint y_off, __global const REAL *gy, const uint gy_off,
                                  __global REAL *gx, const uint gx_off, const int n, const int act,
                                  const REAL alpha) {
    x += x_off;
    y += y_off;
    gy += gy_off;
    gx += gx_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        store_v(gx, i, n, load_v(gy, i, n) * nn_act_grad_v(act, load_v(x, i, n), load_v(y, i, n), alpha));
    }
}

/* y (B, C) = softmax of each row of x, max-subtracted so exp never overflows. One item per row. */
__kernel void softmax_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                              const int C, const int B) {
    x += x_off;
    y += y_off;
    const int b = get_global_id(0);
    if (b >= B) {
        return;
    }
    __global const REAL *xr = x + (size_t)b * C;
    __global REAL *yr = y + (size_t)b * C;
    REAL m = xr[0];
    for (int c = 1; c < C; ++c) {
        m = fmax(m, xr[c]);
    }
    REAL s = (REAL)0;
    for (int c = 0; c < C; ++c) {
        const REAL e = exp(xr[c] - m);
        yr[c] = e;
        s += e;
    }
    const REAL inv = (REAL)1 / s;
    for (int c = 0; c < C; ++c) {
        yr[c] *= inv;
    }
}

/* gx = y * (gy - sum_c gy * y), row-wise. One item per row. */
__kernel void softmax_backward(__global const REAL *y, const uint y_off, __global const REAL *gy,
                               const uint gy_off, __global REAL *gx, const uint gx_off, const int C,
                               const int B) {
    y += y_off;
    gy += gy_off;
    gx += gx_off;
    const int b = get_global_id(0);
    if (b >= B) {
        return;
    }
    const size_t r = (size_t)b * C;
    REAL dot = (REAL)0;
    for (int c = 0; c < C; ++c) {
        dot += gy[r + c] * y[r + c];
    }
    for (int c = 0; c < C; ++c) {
        gx[r + c] = y[r + c] * (gy[r + c] - dot);
    }
}
