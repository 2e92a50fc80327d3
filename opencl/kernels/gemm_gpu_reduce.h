// The split-K reduction shared by gemm_gpu.cl and gemm_gpu_pair.cl.
#ifndef GEMM_GPU_REDUCE_H
#define GEMM_GPU_REDUCE_H

// Sums the S partial products of a split-K gemm_gpu launch (P: S layers of M x N, row-major) in layer order
// and applies the epilogue: C = act(alpha * sum + beta * C + bias). Global size (N, M).
__kernel void gemm_splitk_reduce(__global const REAL* restrict P, const uint p_off,
                                 __global REAL* restrict C, const uint c_off,
                                 __global const REAL* restrict bias, const uint bias_off,
                                 const int M, const int N, const int ldc, const int S,
                                 const REAL alpha, const REAL beta, const int has_bias,
                                 const int act, const REAL act_a, const REAL act_b) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    P += p_off + (size_t)m * N + n;
    const size_t layer = (size_t)M * N;
    REAL sum = 0;
    for (int s = 0; s < S; ++s) sum += P[s * layer];
    REAL v = alpha * sum;
    if (has_bias) v += bias[bias_off + n];
    __global REAL* c = C + c_off + (size_t)m * ldc + n;
    if (beta != (REAL)0) v += beta * *c;
    *c = apply_activation(v, act, act_a, act_b);
}

#endif
