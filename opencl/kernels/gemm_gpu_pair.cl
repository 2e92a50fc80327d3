// Two independent products in one launch: gemm_gpu's work-groups for product 1 and for product 2 share one
// grid, so a dense layer's weight gradient dzᵀ·x and input gradient dz·w cost one kernel submission
// instead of two. On a GPU whose driver spends more host time submitting a kernel than a small product
// takes on the device (NVIDIA's OpenCL: ~13 µs of the caller's CPU per kernel), launches are the step's
// cost (benchmarks/RESULTS.md, GEMM).
//
// Each product keeps its own transpositions, K split, bounds checks and vector reads (TRANS_A1, TRANS_B1,
// SPLIT1, EVEN1, VEC_A1, VEC_B1 and the same with 2); the tiles (BM, BN, BK, TM, TN, STAGES) are shared.
// Grid layers 0 .. layers1 - 1 are product 1's (its K slices, or its single layer), the rest product 2's;
// axes 0 and 1 cover the larger of the two block grids and a work-group outside its product's blocks
// returns at once (the whole group, before any barrier). A product adds its terms in the same order as in
// gemm_gpu.cl with the same tiles and slices, so the pair gives the bits of the two products launched alone.
#include "common.h"

#define TRANS_A TRANS_A1
#define TRANS_B TRANS_B1
#define SPLIT SPLIT1
#define EVEN EVEN1
#define VEC_A VEC_A1
#define VEC_B VEC_B1
#define GEMM_BODY gemm_body_1
#include "gemm_gpu_body.h"
#undef TRANS_A
#undef TRANS_B
#undef SPLIT
#undef EVEN
#undef VEC_A
#undef VEC_B
#undef GEMM_BODY

#define TRANS_A TRANS_A2
#define TRANS_B TRANS_B2
#define SPLIT SPLIT2
#define EVEN EVEN2
#define VEC_A VEC_A2
#define VEC_B VEC_B2
#define GEMM_BODY gemm_body_2
#include "gemm_gpu_body.h"

#include "gemm_gpu_reduce.h"

// The signature is spelled out (no macro): drivers without kernel argument info have the scalar types
// parsed from this file's text (opencl/program.py).
#define GEMM_PASS(n)                                                                                      \
    A##n, a_off##n, B##n, b_off##n, C##n, c_off##n, bias##n, bias_off##n, M##n, N##n, K##n, lda##n, ldb##n, \
        ldc##n, alpha##n, beta##n, has_bias##n, act##n, act_a##n, act_b##n, ga##n, gb##n, gc##n, kc##n

__kernel __attribute__((reqd_work_group_size(BN / TN, BM / TM, 1)))
void gemm_gpu_pair(
                   __global const REAL* restrict A1, const uint a_off1,
                   __global const REAL* restrict B1, const uint b_off1,
                   __global REAL* restrict C1, const uint c_off1,
                   __global const REAL* restrict bias1, const uint bias_off1,
                   const int M1, const int N1, const int K1, const int lda1, const int ldb1, const int ldc1,
                   const REAL alpha1, const REAL beta1, const int has_bias1,
                   const int act1, const REAL act_a1, const REAL act_b1,
                   const int ga1, const int gb1, const int gc1, const int kc1,
                   __global const REAL* restrict A2, const uint a_off2,
                   __global const REAL* restrict B2, const uint b_off2,
                   __global REAL* restrict C2, const uint c_off2,
                   __global const REAL* restrict bias2, const uint bias_off2,
                   const int M2, const int N2, const int K2, const int lda2, const int ldb2, const int ldc2,
                   const REAL alpha2, const REAL beta2, const int has_bias2,
                   const int act2, const REAL act_a2, const REAL act_b2,
                   const int ga2, const int gb2, const int gc2, const int kc2,
                   const int layers1) {
    __local REAL As[STAGES][BK][BM + PAD] __attribute__((aligned(4 * sizeof(REAL))));
    __local REAL Bs[STAGES][BK][BN + PAD] __attribute__((aligned(4 * sizeof(REAL))));
    const int gx = get_group_id(0), gy = get_group_id(1), gz = get_group_id(2);
    if (gz < layers1) {
        if (gx * BN < N1 && gy * BM < M1) gemm_body_1(GEMM_PASS(1), As, Bs, gx, gy, gz);
    } else if (gx * BN < N2 && gy * BM < M2) {
        gemm_body_2(GEMM_PASS(2), As, Bs, gx, gy, gz - layers1);
    }
}
