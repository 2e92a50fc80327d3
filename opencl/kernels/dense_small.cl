/* Dense layers on batches of at most SMALL_B rows (online training, batch 1): matrix-vector products.
 *
 * A GEMM tuned for big batches packs op(B) on every call; with one row that packing costs as much as the
 * product, and a layer's backward pass would take five launches. Here the forward pass is one launch and
 * the backward pass two: (dz, bias gradient, weight-gradient rows) then (input gradient).
 *   x (B, I), w (O, I), bias (O,), y / gy / dz (B, O), gw (O, I), gb (O,), gx (B, I); B <= SMALL_B.
 * Rows are read as 8-wide vectors through the element-aligned typedef of common.h (see its note on PoCL). */
#include "nn_common.h"

#ifndef SMALL_B
#define SMALL_B 4
#endif

/* y = act(x w^T + bias). One item per output neuron o: a dot product of its weight row with each row of x. */
__kernel void dense_small_forward(__global const REAL *x, const uint x_off, __global const REAL *w,
                                  const uint w_off, __global const REAL *bias, const uint bias_off,
                                  __global REAL *y, const uint y_off, const int I, const int O, const int B,
                                  const int act, const REAL alpha, const REAL beta) {
    x += x_off;
    w += w_off;
    bias += bias_off;
    y += y_off;
    const int o = get_global_id(0);
    if (o >= O) {
        return;
    }
    __global const REAL *wr = w + (size_t)o * I;
    REAL8 acc[SMALL_B];
    REAL tail[SMALL_B];
    for (int b = 0; b < SMALL_B; ++b) {
        acc[b] = (REAL8)(0);
        tail[b] = (REAL)0;
    }
    int i = 0;
    for (; i + 8 <= I; i += 8) {
        const REAL8 wv = LOAD8(wr + i);
        for (int b = 0; b < SMALL_B; ++b) {
            if (b < B) {
                acc[b] += LOAD8(x + (size_t)b * I + i) * wv;
            }
        }
    }
    for (; i < I; ++i) {
        for (int b = 0; b < SMALL_B; ++b) {
            if (b < B) {
                tail[b] += x[(size_t)b * I + i] * wr[i];
            }
        }
    }
    const REAL bo = bias[o];
    for (int b = 0; b < SMALL_B; ++b) {
        if (b < B) {
            const REAL8 a = acc[b];
            const REAL s = ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7)) + tail[b];
            y[(size_t)b * O + o] = nn_act(act, s + bo, alpha, beta);
        }
    }
}

/* First half of the backward pass, one item per output neuron o:
 * dz[b, o] = gy[b, o] act'(y[b, o]); gb[o] = sum_b dz[b, o]; gw[o, :] = sum_b dz[b, o] x[b, :]. */
__kernel void dense_small_backward_w(__global const REAL *gy, const uint gy_off, __global const REAL *y,
                                     const uint y_off, __global const REAL *x, const uint x_off,
                                     __global REAL *dz, const uint dz_off, __global REAL *gw, const uint gw_off,
                                     __global REAL *gb, const uint gb_off, const int I, const int O,
                                     const int B, const int act, const REAL alpha) {
    gy += gy_off;
    y += y_off;
    x += x_off;
    dz += dz_off;
    gw += gw_off;
    gb += gb_off;
    const int o = get_global_id(0);
    if (o >= O) {
        return;
    }
    REAL d[SMALL_B];
    REAL sum = (REAL)0;
    for (int b = 0; b < SMALL_B; ++b) {
        d[b] = (REAL)0;
        if (b < B) {
            const size_t k = (size_t)b * O + o;
            d[b] = gy[k] * nn_act_grad(act, (REAL)0, y[k], alpha);
            dz[k] = d[b];
            sum += d[b];
        }
    }
    gb[o] = sum;
    __global REAL *gr = gw + (size_t)o * I;
    int i = 0;
    for (; i + 8 <= I; i += 8) {
        REAL8 acc = d[0] * LOAD8(x + i);
        for (int b = 1; b < SMALL_B; ++b) {
            if (b < B) {
                acc += d[b] * LOAD8(x + (size_t)b * I + i);
            }
        }
        STORE8(acc, gr + i);
    }
    for (; i < I; ++i) {
        REAL acc = d[0] * x[i];
        for (int b = 1; b < SMALL_B; ++b) {
            if (b < B) {
                acc += d[b] * x[(size_t)b * I + i];
            }
        }
        gr[i] = acc;
    }
}

/* Second half: gx[b, i] = sum_o dz[b, o] w[o, i]. One item per 8 consecutive inputs: each step over o reads
 * one 8-wide piece of a weight row, so the items together stream w once. */
__kernel void dense_small_backward_x(__global const REAL *dz, const uint dz_off, __global const REAL *w,
                                     const uint w_off, __global REAL *gx, const uint gx_off, const int I,
                                     const int O, const int B) {
    dz += dz_off;
    w += w_off;
    gx += gx_off;
    const int i0 = get_global_id(0) * 8;
    if (i0 >= I) {
        return;
    }
    if (i0 + 8 <= I) {
        REAL8 acc[SMALL_B];
        for (int b = 0; b < SMALL_B; ++b) {
            acc[b] = (REAL8)(0);
        }
        for (int o = 0; o < O; ++o) {
            const REAL8 wv = LOAD8(w + (size_t)o * I + i0);
            for (int b = 0; b < SMALL_B; ++b) {
                if (b < B) {
                    acc[b] += dz[(size_t)b * O + o] * wv;
                }
            }
        }
        for (int b = 0; b < SMALL_B; ++b) {
            if (b < B) {
                STORE8(acc[b], gx + (size_t)b * I + i0);
            }
        }
        return;
    }
    for (int i = i0; i < I; ++i) {
        for (int b = 0; b < B; ++b) {
            REAL acc = (REAL)0;
            for (int o = 0; o < O; ++o) {
                acc += dz[(size_t)b * O + o] * w[(size_t)o * I + i];
            }
            gx[(size_t)b * I + i] = acc;
        }
    }
}
