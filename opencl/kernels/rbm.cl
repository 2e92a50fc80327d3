/* Restricted Boltzmann machine kernels (nn/rbm_ops_opencl.py); the matrix products run through GEMM.
 *
 * Build-time macros: WG (power of two) = items of every reducing work-group; CW x RL (RL a power of two)
 * = columns x row lanes of the column kernels. Reductions are two-stage:
 * NP groups of WG items stride over the elements and write one partial each; a single group finishes.
 * Hyper-parameter slots (nn/rbm_ops.py): 0 lr, 1 momentum, 2 max |w_inc|, 3 |g_prev|^2, 4 cosine, 5 |g|^2.
 */
#include "nn_common.h"

#define H_LR 0
#define H_MOM 1
#define H_MAX_INC 2
#define H_PREV_LEN2 3
#define H_COS 4
#define H_LEN2 5

inline REAL rbm_sigmoid(REAL x) { return (REAL)1 / ((REAL)1 + exp(-x)); }

/* Tree reduction over the WG items of a group (op 0: sum, 1: max); every item gets the result. */
inline REAL rbm_group(REAL v, __local REAL *s, int op) {
    const int lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (lid < k) {
            s[lid] = op ? fmax(s[lid], s[lid + k]) : s[lid] + s[lid + k];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    REAL r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Column kernels: a (CW, RL) work-group owns CW adjacent columns; row lane ly sums rows ly, ly + RL, ...
 * Returns the column's total to every lane. */
inline REAL rbm_col_total(REAL v, __local REAL *s) {
    const int lx = get_local_id(0), ly = get_local_id(1);
    s[ly * CW + lx] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = RL / 2; k > 0; k >>= 1) {
        if (ly < k) {
            s[ly * CW + lx] += s[(ly + k) * CW + lx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    REAL r = s[lx];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Bernoulli states: 1 where uniform01(seed, counter, i) < p[i] (nn.random, bit for bit). */
__kernel void rbm_sample(__global const REAL *p, const uint p_off, __global REAL *s, const uint s_off,
                         const int n, const uint seed, const uint counter) {
    p += p_off;
    s += s_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL u = (REAL)nn_uniform_bits(seed, counter, (uint)i) * (REAL)5.9604644775390625e-8;
        s[i] = u < p[i] ? (REAL)1 : (REAL)0;
    }
}

/* Partial sums of an elementwise quantity. mode 0: (p - x)^2; 1: cross entropy; 2: max |x| (p unused). */
__kernel void rbm_partials(__global const REAL *x, const uint x_off, __global const REAL *p, const uint p_off,
                           const int n, const int mode, __global REAL *part, const uint part_off) {
    __local REAL scratch[WG];
    x += x_off;
    p += p_off;
    part += part_off;
    REAL acc = 0;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
        const REAL xi = x[i];
        if (mode == 2) {
            acc = fmax(acc, fabs(xi));
        } else if (mode == 0) {
            const REAL d = p[i] - xi;
            acc += d * d;
        } else {
            const REAL pi = p[i];
            acc -= xi * log(pi + (REAL)1e-10) + ((REAL)1 - xi) * log((REAL)1 - pi + (REAL)1e-10);
        }
    }
    acc = rbm_group(acc, scratch, mode == 2);
    if (get_local_id(0) == 0) {
        part[get_group_id(0)] = acc;
    }
}

/* out[0] = sum (op 0) or max (op 1) of np partials; one group of WG items. */
__kernel void rbm_finish(__global const REAL *part, const uint part_off, const int np, const int op,
                         __global REAL *out, const uint out_off) {
    __local REAL scratch[WG];
    part += part_off;
    out += out_off;
    REAL acc = 0;
    for (int i = get_local_id(0); i < np; i += WG) {
        acc = op ? fmax(acc, part[i]) : acc + part[i];
    }
    acc = rbm_group(acc, scratch, op);
    if (get_local_id(0) == 0) {
        out[0] = acc;
    }
}

/* One column per hidden neuron: smoothed on-fraction, sparsity + saturation term sp, hidden-bias step. */
__kernel void rbm_hidden_update(__global const REAL *q1, const uint q1_off, __global const REAL *hd,
                                const uint hd_off, __global const REAL *q2, const uint q2_off, const int n,
                                const int nh, __global REAL *on, const uint on_off, __global REAL *c,
                                const uint c_off, __global REAL *c_inc, const uint ci_off, __global REAL *sp,
                                const uint sp_off, __global const REAL *hyper, const uint hy_off,
                                const REAL lam_s, const REAL target) {
    q1 += q1_off;
    hd += hd_off;
    q2 += q2_off;
    on += on_off;
    c += c_off;
    c_inc += ci_off;
    sp += sp_off;
    hyper += hy_off;
    __local REAL scratch[CW * RL];
    const int i = get_global_id(0);
    const int ic = i < nh ? i : nh - 1;  // tail items read a valid column and help the reduction
    REAL frac = 0, diff = 0;
    for (int r = get_local_id(1); r < n; r += RL) {
        frac += q1[r * nh + ic];
        diff += hd[r * nh + ic] - q2[r * nh + ic];
    }
    frac = rbm_col_total(frac, scratch);
    diff = rbm_col_total(diff, scratch);
    if (i >= nh || get_local_id(1) != 0) {
        return;
    }
    const REAL s = (REAL)0.95 * on[i] + (REAL)0.05 * (frac / n);
    on[i] = s;
    REAL pen = lam_s * (s - target);
    if (s < (REAL)0.01) {
        pen += (REAL)0.5 * (s - (REAL)0.01);
    }
    if (s > (REAL)0.99) {
        pen += (REAL)0.5 * (s - (REAL)0.99);
    }
    sp[i] = pen;
    const REAL inc = hyper[H_MOM] * c_inc[i] + hyper[H_LR] * (diff / n - pen);
    c_inc[i] = inc;
    c[i] += inc;
}

/* One column per visible input: visible-bias step. */
__kernel void rbm_visible_update(__global const REAL *v1, const uint v1_off, __global const REAL *v2,
                                 const uint v2_off, const int n, const int nv, __global REAL *b,
                                 const uint b_off, __global REAL *b_inc, const uint bi_off,
                                 __global const REAL *hyper, const uint hy_off) {
    v1 += v1_off;
    v2 += v2_off;
    b += b_off;
    b_inc += bi_off;
    hyper += hy_off;
    __local REAL scratch[CW * RL];
    const int j = get_global_id(0);
    const int jc = j < nv ? j : nv - 1;
    REAL diff = 0;
    for (int r = get_local_id(1); r < n; r += RL) {
        diff += v1[r * nv + jc] - v2[r * nv + jc];
    }
    diff = rbm_col_total(diff, scratch);
    if (j >= nv || get_local_id(1) != 0) {
        return;
    }
    const REAL inc = hyper[H_MOM] * b_inc[j] + hyper[H_LR] * (diff / n);
    b_inc[j] = inc;
    b[j] += inc;
}

/* Weight step over all H x V elements (grid-stride). gw holds the CD statistics on entry; g_prev gets the
 * penalised gradient g. Partials (3 x NP): sum g^2, sum g.g_prev(old), max |w_inc|. */
__kernel void rbm_weight_update(__global const REAL *gw, const uint gw_off, __global REAL *w, const uint w_off,
                                __global REAL *w_inc, const uint wi_off, __global REAL *g_prev,
                                const uint gp_off, __global const REAL *sp, const uint sp_off,
                                __global const REAL *xm, const uint xm_off, const int nh, const int nv,
                                __global const REAL *hyper, const uint hy_off, const REAL lam_w,
                                __global REAL *part, const uint part_off) {
    __local REAL scratch[WG];
    gw += gw_off;
    w += w_off;
    w_inc += wi_off;
    g_prev += gp_off;
    sp += sp_off;
    xm += xm_off;
    hyper += hy_off;
    part += part_off;
    const REAL lr = hyper[H_LR], mom = hyper[H_MOM];
    REAL len2 = 0, dot = 0, mx = 0;
    const int n = nh * nv;
    for (int k = get_global_id(0); k < n; k += get_global_size(0)) {
        const int i = k / nv, j = k - (k / nv) * nv;
        const REAL wk = w[k];
        const REAL g = gw[k] - lam_w * wk - xm[j] * sp[i];
        const REAL inc = mom * w_inc[k] + lr * g;
        w_inc[k] = inc;
        w[k] = wk + inc;
        len2 += g * g;
        dot += g * g_prev[k];
        g_prev[k] = g;
        mx = fmax(mx, fabs(inc));
    }
    const int np = get_num_groups(0), gid = get_group_id(0);
    len2 = rbm_group(len2, scratch, 0);
    dot = rbm_group(dot, scratch, 0);
    mx = rbm_group(mx, scratch, 1);
    if (get_local_id(0) == 0) {
        part[gid] = len2;
        part[np + gid] = dot;
        part[2 * np + gid] = mx;
    }
}

/* CPU layout of the weight step: one item per hidden neuron (row), a plain loop over its inputs that the
 * compiler can vectorise. Partials (3 x nh) as in rbm_weight_update. */
__kernel void rbm_weight_update_rows(__global const REAL *gw, const uint gw_off, __global REAL *w,
                                     const uint w_off, __global REAL *w_inc, const uint wi_off,
                                     __global REAL *g_prev, const uint gp_off, __global const REAL *sp,
                                     const uint sp_off, __global const REAL *xm, const uint xm_off,
                                     const int nh, const int nv, __global const REAL *hyper, const uint hy_off,
                                     const REAL lam_w, __global REAL *part, const uint part_off) {
    const int i = get_global_id(0);
    if (i >= nh) {
        return;
    }
    const REAL lr = hyper[hy_off + H_LR], mom = hyper[hy_off + H_MOM], spi = sp[sp_off + i];
    gw += gw_off + (size_t)i * nv;
    w += w_off + (size_t)i * nv;
    w_inc += wi_off + (size_t)i * nv;
    g_prev += gp_off + (size_t)i * nv;
    xm += xm_off;
    REAL len2 = 0, dot = 0, mx = 0;
    for (int j = 0; j < nv; j++) {
        const REAL wk = w[j];
        const REAL g = gw[j] - lam_w * wk - xm[j] * spi;
        const REAL inc = mom * w_inc[j] + lr * g;
        w_inc[j] = inc;
        w[j] = wk + inc;
        len2 += g * g;
        dot += g * g_prev[j];
        g_prev[j] = g;
        mx = fmax(mx, fabs(inc));
    }
    part += part_off;
    part[i] = len2;
    part[nh + i] = dot;
    part[2 * nh + i] = mx;
}

/* One group: finish the weight partials and adapt the learning rate and momentum (spec §3.7). */
__kernel void rbm_adapt(__global const REAL *part, const uint part_off, const int np, __global REAL *hyper,
                        const uint hy_off) {
    __local REAL scratch[WG];
    part += part_off;
    hyper += hy_off;
    REAL len2 = 0, dot = 0, mx = 0;
    for (int i = get_local_id(0); i < np; i += WG) {
        len2 += part[i];
        dot += part[np + i];
        mx = fmax(mx, part[2 * np + i]);
    }
    len2 = rbm_group(len2, scratch, 0);
    dot = rbm_group(dot, scratch, 0);
    mx = rbm_group(mx, scratch, 1);
    if (get_local_id(0) != 0) {
        return;
    }
    hyper[H_MAX_INC] = fmax(hyper[H_MAX_INC], mx);
    const REAL prev = hyper[H_PREV_LEN2];
    if (prev > (REAL)0 && len2 > (REAL)0) {
        const REAL cs = dot / sqrt(len2 * prev);
        REAL lr = hyper[H_LR];
        if (cs > (REAL)0.5) {
            lr *= (REAL)1.2;
        } else if (cs > (REAL)0.3) {
            lr *= (REAL)1.1;
        } else if (cs < (REAL)-0.5) {
            lr /= (REAL)1.2;
        } else if (cs < (REAL)-0.3) {
            lr /= (REAL)1.1;
        }
        hyper[H_LR] = fmin(fmax(lr, (REAL)0.001), (REAL)1.0);
        if (fabs(cs) > (REAL)0.3) {
            hyper[H_MOM] /= (REAL)1.5;
        }
        hyper[H_COS] = cs;
    }
    hyper[H_PREV_LEN2] = len2;
    hyper[H_LEN2] = len2;
}

/* a (rows, cols) <- sigmoid(a + bias[row]), in place. */
__kernel void rbm_row_bias_sigmoid(__global REAL *a, const uint a_off, __global const REAL *bias,
                                   const uint bias_off, const int rows, const int cols) {
    a += a_off;
    bias += bias_off;
    const int k = get_global_id(0);
    if (k < rows * cols) {
        a[k] = rbm_sigmoid(a[k] + bias[k / cols]);
    }
}

/* Initial-weight search: partial sums, per try (dimension 1), of (sigmoid(pre + b_t) - x)^2 over m x nv. */
__kernel void rbm_try_partials(__global const REAL *pre, const uint pre_off, __global const REAL *x,
                               const uint x_off, __global const REAL *b, const uint b_off, const int m,
                               const int nv, __global REAL *part, const uint part_off) {
    __local REAL scratch[WG];
    const int t = get_global_id(1);
    pre += pre_off + (size_t)t * m * nv;
    x += x_off;
    b += b_off + t * nv;
    part += part_off;
    REAL acc = 0;
    const int n = m * nv;
    for (int k = get_global_id(0); k < n; k += get_global_size(0)) {
        const REAL d = rbm_sigmoid(pre[k] + b[k % nv]) - x[k];
        acc += d * d;
    }
    acc = rbm_group(acc, scratch, 0);
    if (get_local_id(0) == 0) {
        part[t * get_num_groups(0) + get_group_id(0)] = acc;
    }
}

/* out[t] += sum of the np partials of try t; one item per try. */
__kernel void rbm_try_finish(__global const REAL *part, const uint part_off, const int np, const int ntry,
                             __global REAL *out, const uint out_off) {
    part += part_off;
    out += out_off;
    const int t = get_global_id(0);
    if (t < ntry) {
        REAL acc = 0;
        for (int i = 0; i < np; i++) {
            acc += part[t * np + i];
        }
        out[t] += acc;
    }
}
