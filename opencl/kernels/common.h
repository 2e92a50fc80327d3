// Shared definitions for every neuronet kernel file. Included with `#include "common.h"` (the runtime
// passes `-I <kernels dir>`).
//
// Build-time macros set by opencl/program.py:
//   REAL            float or double: the element type of every floating tensor
//   REAL_IS_DOUBLE  defined (1) when REAL is double
//
// Array arguments: each array is passed as a base pointer plus an element offset (`const uint x_off`);
// a kernel starts with `x += x_off;` (see opencl/memory.py). Offsets of views into flat buffers are
// multiples of the device's base-address alignment.
//
// Vector loads: on pip's PoCL 3.0 the vloadN/vstoreN built-ins and fma() are not inlined (real calls,
// several times slower), so kernels read vectors through a pointer cast to the aligned typedefs below, or to the
// `_u` typedefs (element alignment) when the address may not be a multiple of the vector size.
#ifndef NEURONET_COMMON_H
#define NEURONET_COMMON_H

#ifdef REAL_IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifndef REAL
#define REAL float
#endif

#define CONCAT_(a, b) a##b
#define CONCAT(a, b) CONCAT_(a, b)
#define REAL2 CONCAT(REAL, 2)
#define REAL4 CONCAT(REAL, 4)
#define REAL8 CONCAT(REAL, 8)
#define REAL16 CONCAT(REAL, 16)

// Vectors with the alignment of one element: safe at any element address (unaligned vector moves).
typedef REAL REAL4_u __attribute__((ext_vector_type(4), aligned(sizeof(REAL))));
typedef REAL REAL8_u __attribute__((ext_vector_type(8), aligned(sizeof(REAL))));
typedef REAL REAL16_u __attribute__((ext_vector_type(16), aligned(sizeof(REAL))));

// Activation codes shared by fused epilogues (gemm.cl) and the activation kernels. Output-derivable ones
// only: their derivative is a function of the output y.
#define ACT_LINEAR 0   // a*x + b
#define ACT_SIGMOID 1  // 1 / (1 + exp(-x))
#define ACT_TANH 2
#define ACT_RELU 3     // max(x, 0)
#define ACT_LRELU 4    // x > 0 ? x : a*x

inline REAL apply_activation(REAL x, int act, REAL a, REAL b) {
    switch (act) {
    case ACT_SIGMOID: return (REAL)1 / ((REAL)1 + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_RELU: return x > (REAL)0 ? x : (REAL)0;
    case ACT_LRELU: return x > (REAL)0 ? x : a * x;
    default: return a * x + b;
    }
}

#endif
