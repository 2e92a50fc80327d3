/* Deep-belief-net kernels (nn/rbm_ops_opencl.py, which declares each kernel's work-group): the RBM's
 * sampling, reductions, parameter steps and initial-weight search, and the supervised head's vector ops.
 * The matrix products run through GEMM. Reductions are two-stage: NP groups of WG items stride over the
 * elements and write one partial each; a single group finishes. Shared helpers: rbm_common.h.
 */
#include "rbm_common.h"

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

/* Partial sums of an elementwise quantity. mode 0: (p - x)^2; 1: cross entropy; 2: max |x| (p unused);
 * 3: x * p (dot product); 4: p * x^2 (masked sum of squares). */
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
        } else if (mode == 1) {
            const REAL pi = p[i];
            acc -= xi * log(pi + (REAL)1e-10) + ((REAL)1 - xi) * log((REAL)1 - pi + (REAL)1e-10);
        } else if (mode == 3) {
            acc += xi * p[i];
        } else {
            acc += p[i] * xi * xi;
        }
    }
    acc = rbm_group(acc, scratch, mode == 2 ? OP_MAX : OP_SUM);
    if (get_local_id(0) == 0) {
        part[get_group_id(0)] = acc;
    }
}

/* out[0] = sum (OP_SUM) or max (OP_MAX) of np partials; one group of WG items. */
__kernel void rbm_finish(__global const REAL *part, const uint part_off, const int np, const int op,
                         __global REAL *out, const uint out_off) {
    __local REAL scratch[WG];
    part += part_off;
    out += out_off;
    REAL acc = 0;
    for (int i = get_local_id(0); i < np; i += WG) {
        acc = op == OP_MAX ? fmax(acc, part[i]) : acc + part[i];
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
    __local REAL scratch[CG * RG];
    const int i = get_global_id(0);
    const int ic = i < nh ? i : nh - 1;  // tail items read a valid column and help the reduction
    REAL frac = 0, diff = 0;
    for (int r = get_local_id(1); r < n; r += RG) {
        frac += q1[r * nh + ic];
        diff += hd[r * nh + ic] - q2[r * nh + ic];
    }
    frac = nn_col_sum(frac, scratch);
    diff = nn_col_sum(diff, scratch);
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
    rbm_bias_step(c, c_inc, i, diff / n - pen, hyper);
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
    __local REAL scratch[CG * RG];
    const int j = get_global_id(0);
    const int jc = j < nv ? j : nv - 1;
    REAL diff = 0;
    for (int r = get_local_id(1); r < n; r += RG) {
        diff += v1[r * nv + jc] - v2[r * nv + jc];
    }
    diff = nn_col_sum(diff, scratch);
    if (j >= nv || get_local_id(1) != 0) {
        return;
    }
    rbm_bias_step(b, b_inc, j, diff / n, hyper);
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
    rbm_wsums acc = {0, 0, 0};
    const int n = nh * nv;
    for (int k = get_global_id(0); k < n; k += get_global_size(0)) {
        const int i = k / nv;
        rbm_weight_step(k, sp[i], xm[k - i * nv], gw, w, w_inc, g_prev, lr, mom, lam_w, &acc);
    }
    const int np = get_num_groups(0), gid = get_group_id(0);
    acc.len2 = rbm_group(acc.len2, scratch, OP_SUM);
    acc.dot = rbm_group(acc.dot, scratch, OP_SUM);
    acc.mx = rbm_group(acc.mx, scratch, OP_MAX);
    if (get_local_id(0) == 0) {
        part[gid] = acc.len2;
        part[np + gid] = acc.dot;
        part[2 * np + gid] = acc.mx;
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
    rbm_wsums acc = {0, 0, 0};
    for (int j = 0; j < nv; j++) {
        rbm_weight_step(j, spi, xm[j], gw, w, w_inc, g_prev, lr, mom, lam_w, &acc);
    }
    part += part_off;
    part[i] = acc.len2;
    part[nh + i] = acc.dot;
    part[2 * nh + i] = acc.mx;
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
    len2 = rbm_group(len2, scratch, OP_SUM);
    dot = rbm_group(dot, scratch, OP_SUM);
    mx = rbm_group(mx, scratch, OP_MAX);
    if (get_local_id(0) != 0) {
        return;
    }
    hyper[H_MAX_INC] = fmax(hyper[H_MAX_INC], mx);
    const REAL prev = hyper[H_PREV_LEN2];
    if (prev > (REAL)0 && len2 > (REAL)0) {
        const REAL cs = dot / sqrt(len2 * prev);
        hyper[H_LR] = fmin(fmax(hyper[H_LR] * rbm_lr_factor(cs), (REAL)0.001), (REAL)1.0);
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
        a[k] = nn_sigmoid(a[k] + bias[k / cols]);
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
        const REAL d = nn_sigmoid(pre[k] + b[k % nv]) - x[k];
        acc += d * d;
    }
    acc = rbm_group(acc, scratch, OP_SUM);
    if (get_local_id(0) == 0) {
        part[t * get_num_groups(0) + get_group_id(0)] = acc;
    }
}

/* out[t] = (accumulate ? out[t] : 0) + the sum of the np partials of try t; one item per try. */
__kernel void rbm_try_finish(__global const REAL *part, const uint part_off, const int np, const int ntry,
                             const int accumulate, __global REAL *out, const uint out_off) {
    part += part_off;
    out += out_off;
    const int t = get_global_id(0);
    if (t < ntry) {
        REAL acc = 0;
        for (int i = 0; i < np; i++) {
            acc += part[t * np + i];
        }
        out[t] = accumulate ? out[t] + acc : acc;
    }
}

/* out = alpha * x + beta * y (CG trial points and directions). */
__kernel void dbn_axpby(const REAL alpha, __global const REAL *x, const uint x_off, const REAL beta,
                        __global const REAL *y, const uint y_off, __global REAL *out, const uint out_off,
                        const int n) {
    x += x_off;
    y += y_off;
    out += out_off;
    const int i = get_global_id(0);
    if (i < n) {
        out[i] = alpha * x[i] + beta * y[i];
    }
}

/* grad += 2 * coef * mask * theta: the weight penalty's gradient, biases masked out. */
__kernel void dbn_penalty_grad(__global const REAL *theta, const uint theta_off, __global const REAL *mask,
                               const uint mask_off, const REAL coef, __global REAL *grad, const uint grad_off,
                               const int n) {
    theta += theta_off;
    mask += mask_off;
    grad += grad_off;
    const int i = get_global_id(0);
    if (i < n) {
        grad[i] += (REAL)2 * coef * mask[i] * theta[i];
    }
}
