/* Online training (batch size 1, the MQL5 library's mode) of a chain of dense layers: a whole epoch in ONE
 * launch, for NVIDIA GPUs.
 *
 * At batch 1 an epoch is thousands of dependent steps of ~15 tiny kernels each; the host's enqueue cost
 * (microseconds per launch on NVIDIA's OpenCL) bounds it, not the GPU. Here one persistent kernel runs every
 * step: its work-groups (one per compute unit, all resident) split each phase of a step and meet at a
 * grid-wide barrier between phases. A step is, for the L layers y_l = act_l(W_l y_(l-1) + b_l):
 *   forward    L phases: one warp per output neuron, lanes striding over the inputs, shuffle sum;
 *   loss       every group computes the output gradient itself (softmax + cross-entropy or MSE);
 *   backward   L-1 phases: g_(l-1) = W_l^T dz_l, a group per 32 inputs, its warps splitting the outputs;
 *   Adam       one phase over every weight and bias: g = dz_l[o] y_(l-1)[i], the textbook update with
 *              the host's float64 bias corrections of that step.
 * The maths is that of the separate kernels (dense_small.cl, softmax_loss.cl, optim.cl); only the order
 * of additions inside the sums differs.
 *
 * NVIDIA-specific by design (the host enables it on NVIDIA devices only): inline PTX for the warp shuffle
 * and for the device-scope fence (membar.gl) of the barrier, whose OpenCL 1.2 mem_fence compiles to a
 * work-group fence there. As in CUDA's grid synchronisation, one item per group fences and the group's
 * barrier follows, so every later load of the group sees what other groups wrote before the barrier.
 *
 * Layer table `desc` (L x 6 ints): weight offset, bias offset (in P), inputs, outputs, activation code,
 * offset of the layer's output in Y (and of its output gradient in G). `ab` (L x 2): activation alpha, beta.
 * `sync` (64 ints, zero at launch): the barrier's arrival counter and generation.
 * Build options: REAL (float), WG (items per group, a multiple of 32), MAX_WIDTH (widest layer). */
#include "nn_common.h"

#define LANES 32
#define WARPS (WG / LANES)
#define LOSS_SOFTMAX_CCE 0
#define LOSS_MSE 1
#define DESC 6 /* ints per layer in desc */

inline float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float other;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(other) : "f"(v), "r"(offset));
        v += other;
    }
    return v;
}

/* Every group waits here until all have arrived; writes before it are visible to every group after it. */
inline void grid_sync(volatile __global int *count, volatile __global int *gen, const int groups,
                      int *phase) {
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    *phase += 1;
    if (get_local_id(0) == 0) {
        asm volatile("membar.gl;" ::: "memory");
        if (atomic_inc(count) == groups - 1) {
            *count = 0;
            asm volatile("membar.gl;" ::: "memory");
            atomic_xchg(gen, *phase);
        } else {
            while (*gen < *phase) {
            }
        }
        asm volatile("membar.gl;" ::: "memory");
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}

/* dz = g * act'(y) of output o of a hidden or output layer (output-derivable activations only). */
inline REAL out_grad(__global const REAL *G, __global const REAL *Y, const int at,
                     const int act, const REAL alpha) {
    return G[at] * nn_act_grad(act, (REAL)0, Y[at], alpha);
}

/* The group size is fixed at build time so that the compiler budgets registers for WG resident items. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void online_dense_epoch(__global const REAL *X, const uint x_off, __global const REAL *T,
                        const uint t_off, __global const int *order, const uint order_off,
                        __global const REAL *corr, const uint corr_off, __global REAL *P,
                        const uint p_off, __global REAL *M, const uint m_off, __global REAL *V,
                        const uint v_off, __global REAL *Y, __global REAL *G,
                        __global const int *desc, __global const REAL *ab, __global REAL *loss_sum,
                        volatile __global int *sync, const int L,
                        const int steps, const int loss_kind, const REAL lr, const REAL beta1,
                        const REAL beta2, const REAL eps, const REAL l1, const REAL l2) {
    X += x_off;
    T += t_off;
    order += order_off;
    corr += corr_off;
    P += p_off;
    M += m_off;
    V += v_off;
    __local REAL dz_last[MAX_WIDTH]; /* output-layer dz, computed by every group for itself */
    __local REAL dz_hidden[MAX_WIDTH]; /* dz of the layer being back-propagated */
    __local REAL part[WARPS][LANES];
    const int lid = get_local_id(0);
    const int lane = lid % LANES;
    const int warp = lid / LANES;
    const int group = get_group_id(0);
    const int groups = get_num_groups(0);
    const int gwarp = group * WARPS + warp;
    const int warps = groups * WARPS;
    volatile __global int *count = sync; /* arrivals, and (a cache line away) the barrier generation */
    volatile __global int *gen = sync + 32;
    const int I0 = desc[2];
    const int C = desc[(L - 1) * DESC + 3];
    int phase = 0;

    for (int s = 0; s < steps; ++s) {
        const int r = order[s];
        __global const REAL *x0 = X + (size_t)r * I0;

        /* forward: one warp per neuron */
        for (int l = 0; l < L; ++l) {
            __global const int *d = desc + l * DESC;
            const int I = d[2], O = d[3], act = d[4];
            __global const REAL *in = l == 0 ? x0 : Y + desc[(l - 1) * DESC + 5];
            for (int o = gwarp; o < O; o += warps) {
                __global const REAL *w = P + d[0] + (size_t)o * I;
                float acc = 0.0f;
                for (int i = lane; i < I; i += LANES) {
                    acc += w[i] * in[i];
                }
                acc = warp_sum(acc);
                if (lane == 0) {
                    Y[d[5] + o] = nn_act(act, acc + P[d[1] + o], ab[2 * l], ab[2 * l + 1]);
                }
            }
            grid_sync(count, gen, groups, &phase);
        }

        /* loss: each group derives the output gradient; group 0 adds the loss value */
        __global const int *dl = desc + (L - 1) * DESC;
        __global const REAL *z = Y + dl[5];
        __global const REAL *t = T + (size_t)r * C;
        if (lid == 0) {
            REAL value = (REAL)0;
            if (loss_kind == LOSS_SOFTMAX_CCE) {
                REAL m = z[0];
                for (int c = 1; c < C; ++c) {
                    m = fmax(m, z[c]);
                }
                REAL sum = (REAL)0;
                for (int c = 0; c < C; ++c) {
                    sum += exp(z[c] - m);
                }
                const REAL lse = m + log(sum);
                for (int c = 0; c < C; ++c) {
                    value += t[c] * (lse - z[c]);
                    dz_last[c] = (exp(z[c] - m) / sum - t[c]) * nn_act_grad(dl[4], (REAL)0, z[c], ab[2 * (L - 1)]);
                }
            } else {
                for (int c = 0; c < C; ++c) {
                    const REAL diff = z[c] - t[c];
                    value += diff * diff;
                    dz_last[c] = (REAL)2 * diff / (REAL)C * nn_act_grad(dl[4], (REAL)0, z[c], ab[2 * (L - 1)]);
                }
                value /= (REAL)C;
            }
            if (group == 0) {
                loss_sum[0] += value;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* backward: g_(l-1)[i] = sum_o W_l[o, i] dz_l[o]; a group per 32 inputs, warps split the outputs */
        for (int l = L - 1; l >= 1; --l) {
            __global const int *d = desc + l * DESC;
            const int I = d[2], O = d[3], act = d[4];
            const REAL alpha = ab[2 * l];
            __global REAL *gin = G + desc[(l - 1) * DESC + 5];
            __local const REAL *dz = dz_last;
            if (l < L - 1) {
                for (int o = lid; o < O; o += WG) {
                    dz_hidden[o] = out_grad(G, Y, d[5] + o, act, alpha);
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                dz = dz_hidden;
            }
            for (int i0 = group * LANES; i0 < I; i0 += groups * LANES) {
                const int i = i0 + lane;
                float acc = 0.0f;
                if (i < I) {
                    for (int o = warp; o < O; o += WARPS) {
                        acc += P[d[0] + (size_t)o * I + i] * dz[o];
                    }
                }
                part[warp][lane] = acc;
                barrier(CLK_LOCAL_MEM_FENCE);
                if (warp == 0 && i < I) {
                    REAL total = (REAL)0;
                    for (int k = 0; k < WARPS; ++k) {
                        total += part[k][lane];
                    }
                    gin[i] = total;
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            grid_sync(count, gen, groups, &phase);
        }

        /* Adam over every weight and bias, spread evenly over all items: element e of layer l is the bias
         * of output o (k = -1) or its weight from input k, with (o, k + 1) = divmod(e, I + 1) */
        const REAL c1 = corr[2 * s], c2 = corr[2 * s + 1];
        const int item = get_global_id(0);
        const int items = get_global_size(0);
        for (int l = 0; l < L; ++l) {
            __global const int *d = desc + l * DESC;
            const int I = d[2], O = d[3], act = d[4];
            const REAL alpha = ab[2 * l];
            __global const REAL *in = l == 0 ? x0 : Y + desc[(l - 1) * DESC + 5];
            for (int e = item; e < O * (I + 1); e += items) {
                const int o = e / (I + 1);
                const int k = e - o * (I + 1) - 1;
                const REAL dz = l == L - 1 ? dz_last[o] : out_grad(G, Y, d[5] + o, act, alpha);
                const int at = k < 0 ? d[1] + o : d[0] + o * I + k;
                const REAL w = P[at];
                REAL m = M[at];
                REAL v = V[at];
                P[at] = nn_adam_step(w, nn_reg_grad(k < 0 ? dz : dz * in[k], w, l1, l2), &m, &v, lr, beta1,
                                     beta2, eps, c1, c2);
                M[at] = m;
                V[at] = v;
            }
        }
        grid_sync(count, gen, groups, &phase);
    }
}
