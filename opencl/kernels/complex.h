/* Complex numbers as REAL2 (x = Re, y = Im) with explicit helpers: `a * b` on REAL2 is the elementwise
 * product, NOT the complex one, so every complex operation goes through a c_* function.
 *
 * Complex tensors are real arrays with interleaved (Re, Im) pairs. Loads and stores go through c_ld/c_st
 * (two scalar accesses) rather than a REAL2 pointer cast, because a view may start at an odd element
 * offset, where a REAL2 access would be misaligned.
 *
 * Gradient convention of every complex kernel: the gradient delivered for z is dL/dRe z + i dL/dIm z; for a
 * holomorphic f it is conj(f'(z)) * g (see nn/complex_ops_numpy.py for the derivations). */
#ifndef NEURONET_COMPLEX_H
#define NEURONET_COMPLEX_H

#include "nn_common.h"

/* Items that cooperate on one row in the per-row reduction kernels (power of two; 1 on CPUs, where PoCL
 * runs barriers slowly and the reductions compile to plain loops). Set with -D LG=n. */
#ifndef LG
#define LG 1
#endif

inline REAL2 c_ld(__global const REAL *p, size_t i) { return (REAL2)(p[2 * i], p[2 * i + 1]); }

inline void c_st(__global REAL *p, size_t i, REAL2 v) {
    p[2 * i] = v.x;
    p[2 * i + 1] = v.y;
}

inline REAL2 c_mul(REAL2 a, REAL2 b) { return (REAL2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }

/* a * conj(b) */
inline REAL2 c_mul_conj(REAL2 a, REAL2 b) { return (REAL2)(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y); }

inline REAL2 c_conj(REAL2 a) { return (REAL2)(a.x, -a.y); }

inline REAL2 c_div(REAL2 a, REAL2 b) {
    const REAL d = b.x * b.x + b.y * b.y;
    return (REAL2)((a.x * b.x + a.y * b.y) / d, (a.y * b.x - a.x * b.y) / d);
}

inline REAL c_abs(REAL2 a) { return hypot(a.x, a.y); }

/* exp(clamp(Re z, -lim, lim) + i Im z): the holomorphic softmax's exponent (the MQL5 port clamps at 20). */
inline REAL2 c_exp_clamped(REAL2 z, REAL lim) {
    const REAL m = exp(clamp(z.x, -lim, lim));
    return (REAL2)(m * cos(z.y), m * sin(z.y));
}

/* tanh(x + iy) = (tanh 2x + i sin 2y / cosh 2x) / (1 + cos 2y / cosh 2x): no inf/inf for large |x|
 * (cosh overflows to inf and the ratios go to 0, giving ±1). */
inline REAL2 c_tanh(REAL2 z) {
    const REAL ch = cosh((REAL)2 * z.x);
    const REAL den = (REAL)1 + cos((REAL)2 * z.y) / ch;
    return (REAL2)(tanh((REAL)2 * z.x) / den, sin((REAL)2 * z.y) / ch / den);
}

/* sigmoid(z) = (1 + tanh(z/2)) / 2: the identity avoids exp(-z) overflowing for Re z << 0. */
inline REAL2 c_sigmoid(REAL2 z) {
    const REAL2 t = c_tanh(z * (REAL)0.5);
    return (REAL2)(((REAL)1 + t.x) * (REAL)0.5, t.y * (REAL)0.5);
}

/* Sum of v over the LG items of a work-group, returned to every item (LG = 1: v itself, no barrier). */
inline REAL2 group_sum2(REAL2 v, __local REAL2 *scratch) {
#if LG > 1
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            scratch[lid] += scratch[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    return v;
}

#endif
