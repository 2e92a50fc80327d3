/* Dense layers on batches of at most SMALL_B rows (online training, batch 1): matrix-vector products.
 *
 * A GEMM tuned for big batches packs op(B) on every call; with one row that packing costs as much as the
 * product, and a layer's backward pass would take five launches. Here the forward pass is one launch and
 * the backward pass two on CPUs: (dz, bias gradient, weight-gradient rows) then (input gradient); one on
 * GPUs (the NN_GPU kernels at the end of this file).
 *   x (B, I), w (O, I), bias (O,), y / gy / dz (B, O), gw (O, I), gb (O,), gx (B, I); B <= SMALL_B.
 * CPU layout: each item owns 4 neurons (4 independent vector accumulators: much faster under PoCL than
 * one neuron per item) or 8 inputs, and loops over the batch rows outside the vector loops (private arrays
 * indexed by the row are slower again). Rows are read 8 wide with LOAD8/STORE8 (nn_common.h). */
#include "nn_common.h"

#ifndef SMALL_B
#define SMALL_B 4
#endif

inline REAL hsum8(REAL8 a) {
    return ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
}

/* y = act(x w^T + bias). Item k owns neurons 4k..4k+3 (rows past O repeat the last one and are not
 * stored). Range: ceil(O / 4) items. */
__kernel void dense_small_forward(__global const REAL *x, const uint x_off, __global const REAL *w,
                                  const uint w_off, __global const REAL *bias, const uint bias_off,
                                  __global REAL *y, const uint y_off, const int I, const int O, const int B,
                                  const int act, const REAL alpha, const REAL beta) {
    x += x_off;
    w += w_off;
    bias += bias_off;
    y += y_off;
    const int o0 = get_global_id(0) * 4;
    if (o0 >= O) {
        return;
    }
    __global const REAL *w0 = w + (size_t)o0 * I;
    __global const REAL *w1 = w + (size_t)min(o0 + 1, O - 1) * I;
    __global const REAL *w2 = w + (size_t)min(o0 + 2, O - 1) * I;
    __global const REAL *w3 = w + (size_t)min(o0 + 3, O - 1) * I;
    for (int b = 0; b < B; ++b) {
        __global const REAL *xr = x + (size_t)b * I;
        REAL8 a0 = (REAL8)(0);
        REAL8 a1 = (REAL8)(0);
        REAL8 a2 = (REAL8)(0);
        REAL8 a3 = (REAL8)(0);
        int i = 0;
        for (; i + 8 <= I; i += 8) {
            const REAL8 xv = LOAD8(xr + i);
            a0 += xv * LOAD8(w0 + i);
            a1 += xv * LOAD8(w1 + i);
            a2 += xv * LOAD8(w2 + i);
            a3 += xv * LOAD8(w3 + i);
        }
        REAL s0 = hsum8(a0);
        REAL s1 = hsum8(a1);
        REAL s2 = hsum8(a2);
        REAL s3 = hsum8(a3);
        for (; i < I; ++i) {
            const REAL xi = xr[i];
            s0 += xi * w0[i];
            s1 += xi * w1[i];
            s2 += xi * w2[i];
            s3 += xi * w3[i];
        }
        __global REAL *yr = y + (size_t)b * O + o0;
        yr[0] = nn_act(act, s0 + bias[o0], alpha, beta);
        if (o0 + 1 < O) {
            yr[1] = nn_act(act, s1 + bias[o0 + 1], alpha, beta);
        }
        if (o0 + 2 < O) {
            yr[2] = nn_act(act, s2 + bias[o0 + 2], alpha, beta);
        }
        if (o0 + 3 < O) {
            yr[3] = nn_act(act, s3 + bias[o0 + 3], alpha, beta);
        }
    }
}

/* First half of the backward pass: dz[b, o] = gy[b, o] act'(y[b, o]); gb[o] = sum_b dz[b, o];
 * gw[o, :] = sum_b dz[b, o] x[b, :]. One item per neuron o. Range: O items. */
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
    __global REAL *gr = gw + (size_t)o * I;
    REAL sum = (REAL)0;
    for (int b = 0; b < B; ++b) {
        const size_t k = (size_t)b * O + o;
        const REAL d = gy[k] * nn_act_grad(act, (REAL)0, y[k], alpha);
        dz[k] = d;
        sum += d;
        __global const REAL *xr = x + (size_t)b * I;
        int i = 0;
        if (b == 0) {
            for (; i + 8 <= I; i += 8) {
                STORE8(d * LOAD8(xr + i), gr + i);
            }
            for (; i < I; ++i) {
                gr[i] = d * xr[i];
            }
        } else {
            for (; i + 8 <= I; i += 8) {
                STORE8(LOAD8(gr + i) + d * LOAD8(xr + i), gr + i);
            }
            for (; i < I; ++i) {
                gr[i] += d * xr[i];
            }
        }
    }
    gb[o] = sum;
}

/* Second half: gx[b, i] = sum_o dz[b, o] w[o, i]. Item k owns inputs 8k..8k+7: each step over o reads
 * one 8-wide piece of a weight row, so the items together stream w once per batch row.
 * Range: ceil(I / 8) items. */
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
    for (int b = 0; b < B; ++b) {
        __global const REAL *d = dz + (size_t)b * O;
        __global REAL *g = gx + (size_t)b * I;
        if (i0 + 8 <= I) {
            REAL8 a0 = (REAL8)(0);
            REAL8 a1 = (REAL8)(0);
            int o = 0;
            for (; o + 2 <= O; o += 2) {
                a0 += d[o] * LOAD8(w + (size_t)o * I + i0);
                a1 += d[o + 1] * LOAD8(w + (size_t)(o + 1) * I + i0);
            }
            if (o < O) {
                a0 += d[o] * LOAD8(w + (size_t)o * I + i0);
            }
            STORE8(a0 + a1, g + i0);
        } else {
            for (int i = i0; i < I; ++i) {
                REAL acc = (REAL)0;
                for (int o = 0; o < O; ++o) {
                    acc += d[o] * w[(size_t)o * I + i];
                }
                g[i] = acc;
            }
        }
    }
}

#ifdef NN_GPU
/* GPU layouts (-D NN_GPU=1). The CPU kernels above leave a GPU idle: 125 items for a 500-neuron layer, each
 * streaming whole rows (uncoalesced). Here every weight is read by its own lane, neighbouring lanes read
 * neighbouring addresses, and sums over a row or column finish in a local-memory tree. The backward pass
 * is ONE launch: the activation derivative dz = gy act'(y) is recomputed wherever it is needed (one
 * multiply per use) instead of being stored by one kernel and read by a second. */

/* Build options from nn/ops_opencl.py (the launch sizes there use the same values):
 *   FWD_LANES  lanes splitting the inputs of one neuron (a warp: one row read coalesced)
 *   FWD_ROWS   neurons per forward work-group
 *   BW_GROUP   work-group of the backward kernel
 *   BX_COLS    input-gradient columns per group: 8 lanes read one 32-byte piece of a weight row */
#define BX_ROWS (BW_GROUP / BX_COLS) /* lanes splitting the outputs o of those columns */

/* y = act(x w^T + bias). Work-group (FWD_LANES, FWD_ROWS): row r of the group is neuron
 * get_global_id(1); its lanes stride over the inputs. Range: (FWD_LANES, FWD_ROWS * ceil(O / FWD_ROWS)). */
__kernel __attribute__((reqd_work_group_size(FWD_LANES, FWD_ROWS, 1))) void
dense_small_forward_gpu(__global const REAL *x, const uint x_off, __global const REAL *w, const uint w_off,
                        __global const REAL *bias, const uint bias_off, __global REAL *y, const uint y_off,
                        const int I, const int O, const int B, const int act, const REAL alpha,
                        const REAL beta) {
    __local REAL red[FWD_ROWS][FWD_LANES];
    x += x_off;
    w += w_off;
    bias += bias_off;
    y += y_off;
    const int l = get_local_id(0);
    const int r = get_local_id(1);
    const int o = get_global_id(1);
    __global const REAL *wr = w + (size_t)min(o, O - 1) * I; /* rows past O repeat the last, unstored */
    for (int b = 0; b < B; ++b) {
        __global const REAL *xr = x + (size_t)b * I;
        REAL acc = (REAL)0;
        for (int i = l; i < I; i += FWD_LANES) {
            acc += xr[i] * wr[i];
        }
        red[r][l] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = FWD_LANES / 2; s > 0; s >>= 1) {
            if (l < s) {
                red[r][l] += red[r][l + s];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l == 0 && o < O) {
            y[(size_t)b * O + o] = nn_act(act, red[r][0] + bias[o], alpha, beta);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next row */
    }
}

/* The whole backward pass in one launch of groups of BW_GROUP items (group-uniform roles):
 *   groups [0, wg): one weight-gradient element per item, gw[o, i] = sum_b dz[b, o] x[b, i] (coalesced
 *     rows); the items of column 0 also write gb[o] = sum_b dz[b, o]; wg = ceil(O I / BW_GROUP);
 *   groups [wg, wg + xg): gx[b, i] = sum_o dz[b, o] w[o, i] for BX_COLS columns, BX_ROWS lanes splitting
 *     o, then a local-memory tree; xg = ceil(I / BX_COLS), or 0 without the input gradient.
 * dz[b, o] = gy[b, o] act'(y[b, o]) in both. Range: (wg + xg) * BW_GROUP items. */
__kernel __attribute__((reqd_work_group_size(BW_GROUP, 1, 1))) void
dense_small_backward_gpu(__global const REAL *gy, const uint gy_off, __global const REAL *y, const uint y_off,
                         __global const REAL *x, const uint x_off, __global const REAL *w, const uint w_off,
                         __global REAL *gw, const uint gw_off, __global REAL *gb, const uint gb_off,
                         __global REAL *gx, const uint gx_off, const int I, const int O, const int B,
                         const int act, const REAL alpha, const int wg) {
    gy += gy_off;
    y += y_off;
    x += x_off;
    w += w_off;
    gw += gw_off;
    gb += gb_off;
    gx += gx_off;
    const int g = get_group_id(0);
    const int t = get_local_id(0);
    if (g < wg) {
        const int e = g * BW_GROUP + t;
        if (e >= O * I) {
            return;
        }
        const int o = e / I;
        const int i = e - o * I;
        REAL acc = (REAL)0;
        REAL sum = (REAL)0;
        for (int b = 0; b < B; ++b) {
            const size_t k = (size_t)b * O + o;
            const REAL d = gy[k] * nn_act_grad(act, (REAL)0, y[k], alpha);
            acc += d * x[(size_t)b * I + i];
            sum += d;
        }
        gw[e] = acc;
        if (i == 0) {
            gb[o] = sum;
        }
        return;
    }
    __local REAL red[BX_ROWS][BX_COLS];
    const int c = t % BX_COLS;
    const int r = t / BX_COLS;
    const int i = (g - wg) * BX_COLS + c;
    __global const REAL *wc = w + min(i, I - 1); /* columns past I repeat the last, unstored */
    for (int b = 0; b < B; ++b) {
        __global const REAL *gyr = gy + (size_t)b * O;
        __global const REAL *yr = y + (size_t)b * O;
        REAL acc = (REAL)0;
        for (int o = r; o < O; o += BX_ROWS) {
            acc += gyr[o] * nn_act_grad(act, (REAL)0, yr[o], alpha) * wc[(size_t)o * I];
        }
        red[r][c] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = BX_ROWS / 2; s > 0; s >>= 1) {
            if (r < s) {
                red[r][c] += red[r + s][c];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (r == 0 && i < I) {
            gx[(size_t)b * I + i] = red[0][c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
#endif
