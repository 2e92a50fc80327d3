/* The row softmax and its backward, written once for the two address spaces rows live in (OpenCL C 1.2
 * has no generic one): the *_global functions for rows in global memory (the dense output softmax of
 * activations.cl, softmax_rows_forward/backward of attention.cl), the *_local ones for rows in local
 * memory (the fused self-attention of self_attention.cl), so every path gives the same bits.
 *
 * softmax_row: row q (the query) of S scores; with `causal` only keys j <= q take part (no peek at later
 * tokens); y[j] = exp(x[j] - max) / sum over those keys, the maximum subtracted so that exp cannot
 * overflow, and exactly 0 past the last. y may be x.
 * softmax_row_backward: gx = y (gy - sum_j gy_j y_j), the Jacobian-vector product. gx may be gy. */
#ifndef NEURONET_SOFTMAX_ROW_H
#define NEURONET_SOFTMAX_ROW_H

#include "common.h"

#define SOFTMAX_ROW(SPACE, SFX)                                                                             \
    inline void softmax_row_##SFX(SPACE const REAL *x, SPACE REAL *y, const int S, const int q,            \
                                  const int causal) {                                                      \
        const int last = causal ? min(q, S - 1) : S - 1;                                                   \
        REAL mx = x[0];                                                                                    \
        for (int j = 1; j <= last; ++j) {                                                                  \
            mx = fmax(mx, x[j]);                                                                           \
        }                                                                                                  \
        REAL sum = (REAL)0;                                                                                \
        for (int j = 0; j <= last; ++j) {                                                                  \
            const REAL e = exp(x[j] - mx);                                                                 \
            y[j] = e;                                                                                      \
            sum += e;                                                                                      \
        }                                                                                                  \
        const REAL inv = (REAL)1 / sum;                                                                    \
        for (int j = 0; j < S; ++j) {                                                                      \
            y[j] = j <= last ? y[j] * inv : (REAL)0;                                                       \
        }                                                                                                  \
    }                                                                                                      \
    inline void softmax_row_backward_##SFX(SPACE const REAL *y, SPACE const REAL *gy, SPACE REAL *gx,      \
                                           const int S) {                                                  \
        REAL dot = (REAL)0;                                                                                \
        for (int j = 0; j < S; ++j) {                                                                      \
            dot += gy[j] * y[j];                                                                           \
        }                                                                                                  \
        for (int j = 0; j < S; ++j) {                                                                      \
            gx[j] = y[j] * (gy[j] - dot);                                                                  \
        }                                                                                                  \
    }

SOFTMAX_ROW(__global, global)
SOFTMAX_ROW(__local, local)
#undef SOFTMAX_ROW

#endif
