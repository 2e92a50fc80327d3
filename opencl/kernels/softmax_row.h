/* The masked row softmax of attention, written once for the two address spaces its rows live in (OpenCL
 * C 1.2 has no generic one): softmax_row_global for rows in global memory (softmax_rows_forward of
 * attention.cl), softmax_row_local for rows in local memory (the fused self-attention of
 * self_attention.cl), so both paths give the same bits. Row q (the query) of S scores: with `causal`
 * only keys j <= q take part (no peek at later tokens); y[j] = exp(x[j] - max) / sum over those keys,
 * the maximum subtracted so that exp cannot overflow, and exactly 0 past the last. y may be x. */
#ifndef NEURONET_SOFTMAX_ROW_H
#define NEURONET_SOFTMAX_ROW_H

#include "common.h"

#define SOFTMAX_ROW(NAME, SPACE)                                                                            \
    inline void NAME(SPACE const REAL *x, SPACE REAL *y, const int S, const int q, const int causal) {     \
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
    }

SOFTMAX_ROW(softmax_row_global, __global)
SOFTMAX_ROW(softmax_row_local, __local)
#undef SOFTMAX_ROW

#endif
