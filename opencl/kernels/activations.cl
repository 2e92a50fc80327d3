/* Elementwise activations (forward and derivative), row-wise softmax and its Jacobian-vector product.
 * Activation codes are those of nn_common.h; alpha/beta follow nn.backend.Activation. */
#include "nn_common.h"
#include "softmax_row.h"

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

/* y (B, C) = softmax of each row of x (softmax_row.h). One item per row. */
__kernel void softmax_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                              const int C, const int B) {
    const int b = get_global_id(0);
    if (b < B) {
        softmax_row_global(x + x_off + (size_t)b * C, y + y_off + (size_t)b * C, C, 0, 0);
    }
}

/* gx = y * (gy - sum_c gy * y), row-wise (softmax_row.h). One item per row. */
__kernel void softmax_backward(__global const REAL *y, const uint y_off, __global const REAL *gy,
                               const uint gy_off, __global REAL *gx, const uint gx_off, const int C,
                               const int B) {
    const int b = get_global_id(0);
    if (b < B) {
        const size_t r = (size_t)b * C;
        softmax_row_backward_global(y + y_off + r, gy + gy_off + r, gx + gx_off + r, C);
    }
}
