/* Shared definitions of the network-library kernels (elementwise, activations, losses, batch norm,
 * dropout, optimizers, reductions).
 *
 * Build options (REAL and the array-argument convention come from common.h):
 *   -D LWG=n               work-group size of the single-group and partial reductions (power of two;
 *                          1 on CPU devices, where PoCL runs barriers slowly and one item per group wins)
 *   -D RG=n                rows reduced in parallel by one work-group of a column kernel (power of two;
 *                          1 on CPU devices)
 *   -D CG=n                columns handled by one work-group of a column kernel
 *   -D NN_GPU=1            GPU work-group layout (selects the vector load/store built-ins)
 */
#ifndef NN_COMMON_H
#define NN_COMMON_H

#ifndef LWG
#define LWG 1
#endif
#ifndef RG
#define RG 1
#endif
#ifndef CG
#define CG 16
#endif

#include "common.h"

/* Activation codes, in the order of nn.backend.ACTIVATIONS: common.h defines the output-derivable ones
 * (0-4, shared with the GEMM epilogue); these follow. */
#define ACT_SWISH 5
#define ACT_SOFTPLUS 6
#define ACT_GELU 7

/* 8-wide loads and stores at any element address. CPU builds cast to the element-aligned vector type of
 * common.h (pip's PoCL does not inline vload8/vstore8); other devices (-D NN_GPU=1) use the built-ins. */
#ifdef NN_GPU
#define LOAD8(p) vload8(0, (p))
#define STORE8(v, p) vstore8((v), 0, (p))
#else
#define LOAD8(p) (*(__global const REAL8_u *)(p))
#define STORE8(v, p) (*(__global REAL8_u *)(p) = (v))
#endif

/* Every activation and its derivative, defined once for a scalar (nn_act, nn_act_grad: T = REAL) and for
 * 8-wide vectors (nn_act8, nn_act_grad8: T = REAL8), which CPU kernels use because PoCL does not vectorise
 * these switch bodies across work-items. The ternaries and built-ins below work on both kinds of T.
 * The logistic function never overflows: exp of a non-positive number only. nn_act_grad: the
 * output-derivable kinds (linear..lrelu) use y = act(x); the others use x. */
#define NN_ACTIVATIONS(SFX, T)                                                                         \
    inline T nn_sigmoid##SFX(T x) {                                                                    \
        const T e = exp(-fabs(x));                                                                     \
        const T s = (REAL)1 / ((REAL)1 + e);                                                           \
        return x >= (REAL)0 ? s : e * s;                                                               \
    }                                                                                                  \
    inline T nn_act##SFX(int act, T x, REAL alpha, REAL beta) {                                        \
        switch (act) {                                                                                 \
        case ACT_LINEAR: return alpha * x + beta;                                                      \
        case ACT_SIGMOID: return nn_sigmoid##SFX(x);                                                   \
        case ACT_TANH: return tanh(x);                                                                 \
        case ACT_RELU: return x > (REAL)0 ? x : (T)(0);                                                \
        case ACT_LRELU: return x > (REAL)0 ? x : alpha * x;                                            \
        case ACT_SWISH: return x * nn_sigmoid##SFX(alpha * x);                                         \
        case ACT_SOFTPLUS: return fmax(x, (REAL)0) + log1p(exp(-fabs(x)));                             \
        case ACT_GELU: return (REAL)0.5 * x * ((REAL)1 + erf(x * (REAL)0.70710678118654752440));       \
        default: return x;                                                                             \
        }                                                                                              \
    }                                                                                                  \
    inline T nn_act_grad##SFX(int act, T x, T y, REAL alpha) {                                         \
        switch (act) {                                                                                 \
        case ACT_LINEAR: return (T)(alpha);                                                            \
        case ACT_SIGMOID: return y * ((REAL)1 - y);                                                    \
        case ACT_TANH: return (REAL)1 - y * y;                                                         \
        case ACT_RELU: return y > (REAL)0 ? (T)(1) : (T)(0);                                           \
        case ACT_LRELU: return y > (REAL)0 ? (T)(1) : (T)(alpha);                                      \
        case ACT_SWISH: {                                                                              \
            const T s = nn_sigmoid##SFX(alpha * x);                                                    \
            return s + alpha * x * s * ((REAL)1 - s);                                                  \
        }                                                                                              \
        case ACT_SOFTPLUS: return nn_sigmoid##SFX(x);                                                  \
        case ACT_GELU: {                                                                               \
            const T cdf = (REAL)0.5 * ((REAL)1 + erf(x * (REAL)0.70710678118654752440));               \
            return cdf + x * exp((REAL)-0.5 * x * x) * (REAL)0.39894228040143267794;                   \
        }                                                                                              \
        default: return (T)(1);                                                                        \
        }                                                                                              \
    }

NN_ACTIVATIONS(, REAL)
NN_ACTIVATIONS(8, REAL8)

/* Items of VEC consecutive elements (-D VEC=8 on CPU devices, 1 elsewhere): REALV, and loads and stores at
 * element i of n that mask the last item's tail. */
#ifndef VEC
#define VEC 1
#endif
#if VEC == 1
#define REALV REAL
#define REALV_u REAL
#define nn_act_v nn_act
#define nn_act_grad_v nn_act_grad
#else
#define REALV CONCAT(REAL, VEC)
typedef REAL REALV_u __attribute__((ext_vector_type(VEC), aligned(sizeof(REAL))));
#define nn_act_v CONCAT(nn_act, VEC)
#define nn_act_grad_v CONCAT(nn_act_grad, VEC)
#endif

inline REALV load_v(__global const REAL *p, const int i, const int n) {
    if (i + VEC <= n) {
        return *(__global const REALV_u *)(p + i);
    }
    REAL tmp[VEC];
    for (int c = 0; c < VEC; ++c) {
        tmp[c] = i + c < n ? p[i + c] : (REAL)0;
    }
    return *(REALV *)tmp;
}

inline void store_v(__global REAL *p, const int i, const int n, const REALV v) {
    if (i + VEC <= n) {
        *(__global REALV_u *)(p + i) = v;
        return;
    }
    REAL tmp[VEC];
    *(REALV *)tmp = v;
    for (int c = 0; i + c < n; ++c) {
        p[i + c] = tmp[c];
    }
}

/* Optimizer helpers on REALV (so on VEC-wide items too), shared by optim.cl and online_dense.cl.
 * Regularisation folded into the gradient: g' = g + l1 * sign(w) + l2 * w (sign(0) = 0). */
inline REALV nn_reg_grad(const REALV g, const REALV w, const REAL l1, const REAL l2) {
    REALV r = g + l2 * w;
    if (l1 != (REAL)0) { /* uniform branch: the sign costs as much as the rest of the update */
        r += l1 * sign(w);
    }
    return r;
}

/* Kingma & Ba's Adam step on the regularised gradient g: updates the moments *m and *v and returns the new
 * weight; c1 = 1 / (1 - beta1^t) and c2 = 1 / (1 - beta2^t) are the bias corrections of step t. */
inline REALV nn_adam_step(const REALV w, const REALV g, REALV *m, REALV *v, const REAL lr, const REAL beta1,
                          const REAL beta2, const REAL eps, const REAL c1, const REAL c2) {
    *m = beta1 * *m + ((REAL)1 - beta1) * g;
    *v = beta2 * *v + ((REAL)1 - beta2) * g * g;
    return w - lr * (*m * c1) / (sqrt(*v * c2) + eps);
}

/* nn.random.hash32: Wellons' lowbias32 finaliser on wrapping 32-bit unsigned arithmetic. */
inline uint nn_hash32(uint x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

/* The 24 random bits behind nn.random.uniform01(seed, counter, index) = bits * 2^-24. */
inline uint nn_uniform_bits(uint seed, uint counter, uint index) {
    return nn_hash32(nn_hash32(nn_hash32(index) ^ counter) ^ seed) >> 8;
}

/* Sum of `v` over the LWG items of a work-group; the result is valid in item 0 only. */
inline REAL nn_group_sum(REAL v, __local REAL *scratch) {
#if LWG > 1
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LWG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            scratch[lid] += scratch[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return scratch[0];
#else
    return v;
#endif
}

/* Column kernels run on a (CG, RG) work-group: item (lx, ly) owns column lx of the group and rows
 * ly, ly + RG, ... Sum of `v` over the RG row lanes, returned to every lane of the column. */
inline REAL nn_col_sum(REAL v, __local REAL *scratch) {
#if RG > 1
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    scratch[ly * CG + lx] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RG / 2; s > 0; s >>= 1) {
        if (ly < s) {
            scratch[ly * CG + lx] += scratch[(ly + s) * CG + lx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    REAL total = scratch[lx];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
#else
    return v;
#endif
}

#endif
