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

/* Logistic function without overflow: exp of a non-positive number only. */
inline REAL nn_sigmoid(REAL x) {
    if (x >= (REAL)0) {
        return (REAL)1 / ((REAL)1 + exp(-x));
    }
    REAL e = exp(x);
    return e / ((REAL)1 + e);
}

inline REAL nn_act(int act, REAL x, REAL alpha, REAL beta) {
    switch (act) {
    case ACT_LINEAR: return alpha * x + beta;
    case ACT_SIGMOID: return nn_sigmoid(x);
    case ACT_TANH: return tanh(x);
    case ACT_RELU: return x > (REAL)0 ? x : (REAL)0;
    case ACT_LRELU: return x > (REAL)0 ? x : alpha * x;
    case ACT_SWISH: return x * nn_sigmoid(alpha * x);
    case ACT_SOFTPLUS: return fmax(x, (REAL)0) + log1p(exp(-fabs(x)));
    case ACT_GELU: return (REAL)0.5 * x * ((REAL)1 + erf(x * (REAL)0.70710678118654752440));
    default: return x;
    }
}

/* d act / d x. The output-derivable kinds (linear..lrelu) use y = act(x); the others use x. */
inline REAL nn_act_grad(int act, REAL x, REAL y, REAL alpha) {
    switch (act) {
    case ACT_LINEAR: return alpha;
    case ACT_SIGMOID: return y * ((REAL)1 - y);
    case ACT_TANH: return (REAL)1 - y * y;
    case ACT_RELU: return y > (REAL)0 ? (REAL)1 : (REAL)0;
    case ACT_LRELU: return y > (REAL)0 ? (REAL)1 : alpha;
    case ACT_SWISH: {
        REAL s = nn_sigmoid(alpha * x);
        return s + alpha * x * s * ((REAL)1 - s);
    }
    case ACT_SOFTPLUS: return nn_sigmoid(x);
    case ACT_GELU: {
        REAL cdf = (REAL)0.5 * ((REAL)1 + erf(x * (REAL)0.70710678118654752440));
        return cdf + x * exp((REAL)-0.5 * x * x) * (REAL)0.39894228040143267794;
    }
    default: return (REAL)1;
    }
}

/* nn_act_grad for 8 outputs of an output-derivable kind (linear, sigmoid, tanh, relu, lrelu). */
inline REAL8 nn_act_grad8(int act, REAL8 y, REAL alpha) {
    switch (act) {
    case ACT_SIGMOID: return y * ((REAL)1 - y);
    case ACT_TANH: return (REAL)1 - y * y;
    case ACT_RELU: return select((REAL8)(0), (REAL8)(1), y > (REAL)0);
    case ACT_LRELU: return select((REAL8)(alpha), (REAL8)(1), y > (REAL)0);
    default: return (REAL8)(alpha);
    }
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
