// GEMM for GPUs: C (M, N) = act(alpha * op(A) * op(B) + beta * C + bias), row-major, REAL.
//
// Classic shared-memory tiling with register blocking: a work-group of (BM / TM) * (BN / TN) items computes
// a BM x BN block of C; each item owns a TM x TN sub-block in registers. Per step of BK along K the group
// copies an BM x BK tile of op(A) (stored k-major, so the compute loop reads TM consecutive values) and a
// BK x BN tile of op(B) to local memory. The next tile is fetched into registers while the current one is
// multiplied, hiding global-memory latency. Items read local memory as REAL4 vectors (one 16-byte load
// instead of four); item (tx, ty) owns the column groups tx, tx + BN/TN, ... (4 columns each) and the
// row groups ty, ty + BM/TM, ..., so the vectors a warp reads are contiguous (no bank conflicts). Global reads are coalesced for either layout of each operand:
// the mapping of items to tile elements follows the contiguous axis (TRANS_A / TRANS_B).
//
// Split K: when M x N has too few blocks to fill the device (a weight gradient over many samples), SPLIT = 1
// makes grid layer z compute the partial product over K in [z * kc, z * kc + kc) into layer z of C (a
// partial-sum buffer, no epilogue); gemm_splitk_reduce then adds the layers in a fixed order and applies
// the epilogue, so the result does not depend on scheduling. Without SPLIT, kc = K and grid layer z is
// product z of a batch.
//
// Two stages (STAGES 2) double-buffer the local tiles: while the group multiplies one stage it stores the
// next tile into the other, so each step along K needs one barrier instead of two. With VEC_A / VEC_B an
// operand's tile is read from global memory as REAL4 vectors along its contiguous axis (one 16-byte load per
// four elements; only for EVEN shapes whose rows, offsets and product strides keep every vector aligned).
// Neither changes the order in which products are added: every variant gives the same bits.
//
// Build-time macros: REAL, BM, BN, BK, TM, TN (multiples of 4), TRANS_A, TRANS_B, SPLIT (0/1), EVEN (1 when
// M % BM, N % BN, K % BK and kc % BK are all 0 and K % kc == 0: bounds checks compiled out), STAGES (1/2),
// VEC_A, VEC_B (0/1, only with EVEN). The work-group's body is gemm_gpu_body.h, shared with gemm_gpu_pair.cl.
#include "common.h"

#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef VEC_A
#define VEC_A 0
#endif
#ifndef VEC_B
#define VEC_B 0
#endif
#define GEMM_BODY gemm_body
#include "gemm_gpu_body.h"
#include "gemm_gpu_reduce.h"

__kernel __attribute__((reqd_work_group_size(BN / TN, BM / TM, 1)))
void gemm_gpu(__global const REAL* restrict A, const uint a_off,
              __global const REAL* restrict B, const uint b_off,
              __global REAL* restrict C, const uint c_off,
              __global const REAL* restrict bias, const uint bias_off,
              const int M, const int N, const int K, const int lda, const int ldb, const int ldc,
              const REAL alpha, const REAL beta, const int has_bias,
              const int act, const REAL act_a, const REAL act_b,
              const int ga, const int gb, const int gc, const int kc) {
    // Rows of BM + PAD elements keep every REAL4 of the compute loop aligned.
    __local REAL As[STAGES][BK][BM + PAD] __attribute__((aligned(4 * sizeof(REAL))));
    __local REAL Bs[STAGES][BK][BN + PAD] __attribute__((aligned(4 * sizeof(REAL))));
    gemm_body(A, a_off, B, b_off, C, c_off, bias, bias_off, M, N, K, lda, ldb, ldc, alpha, beta, has_bias,
              act, act_a, act_b, ga, gb, gc, kc, As, Bs, get_group_id(0), get_group_id(1), get_group_id(2));
}
