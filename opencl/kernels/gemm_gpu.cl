// GEMM for GPUs: C (M, N) = act(alpha * op(A) * op(B) + beta * C + bias), row-major, REAL.
//
// Classic shared-memory tiling with register blocking: a work-group of (BM / TM) * (BN / TN) items computes
// a BM x BN block of C; each item owns a TM x TN sub-block in registers. Per step of BK along K the group
// copies an BM x BK tile of op(A) (stored k-major, so the compute loop reads TM consecutive values) and a
// BK x BN tile of op(B) to local memory. The next tile is fetched into registers while the current one is
// multiplied, hiding global-memory latency. Global reads are coalesced for either layout of each operand:
// the mapping of items to tile elements follows the contiguous axis (TRANS_A / TRANS_B).
//
// Build-time macros: REAL, BM, BN, BK, TM, TN, TRANS_A, TRANS_B (0/1), EVEN (1 when M % BM, N % BN and
// K % BK are all 0: bounds checks compiled out).
#include "common.h"

#define NT ((BM / TM) * (BN / TN))  // items per work-group
#define A_PER (BM * BK / NT)        // tile elements each item copies
#define B_PER (BK * BN / NT)
#define PAD 4                       // breaks local-memory bank conflicts of k-major stores

#if EVEN
#define INSIDE(r, c, R, C) 1
#else
#define INSIDE(r, c, R, C) ((r) < (R) && (c) < (C))
#endif

__kernel __attribute__((reqd_work_group_size(BN / TN, BM / TM, 1)))
void gemm_gpu(__global const REAL* restrict A, const uint a_off,
              __global const REAL* restrict B, const uint b_off,
              __global REAL* restrict C, const uint c_off,
              __global const REAL* restrict bias, const uint bias_off,
              const int M, const int N, const int K, const int lda, const int ldb, const int ldc,
              const REAL alpha, const REAL beta, const int has_bias,
              const int act, const REAL act_a, const REAL act_b) {
    __local REAL As[BK][BM + PAD];
    __local REAL Bs[BK][BN + PAD];

    const int tx = get_local_id(0);  // column group
    const int ty = get_local_id(1);  // row group
    const int lid = ty * (BN / TN) + tx;
    const int m_blk = get_group_id(1) * BM;
    const int n_blk = get_group_id(0) * BN;
    A += a_off;
    B += b_off;
    C += c_off;
    bias += bias_off;

    REAL a_reg[A_PER];
    REAL b_reg[B_PER];
    REAL acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = (REAL)0;

    // Tile element e of op(A) (BM x BK): row, k chosen so consecutive items read consecutive addresses.
#if TRANS_A
#define A_RC(e, r, c) r = (e) % BM; c = (e) / BM
#define A_AT(m, k) A[(size_t)(k) * lda + (m)]
#else
#define A_RC(e, r, c) c = (e) % BK; r = (e) / BK
#define A_AT(m, k) A[(size_t)(m) * lda + (k)]
#endif
#if TRANS_B
#define B_RC(e, k, n) k = (e) % BK; n = (e) / BK
#define B_AT(k, n) B[(size_t)(n) * ldb + (k)]
#else
#define B_RC(e, k, n) n = (e) % BN; k = (e) / BN
#define B_AT(k, n) B[(size_t)(k) * ldb + (n)]
#endif

#define FETCH(k0)                                                                       \
    for (int i = 0; i < A_PER; ++i) {                                 \
        int r, c;                                                                       \
        A_RC(lid + i * NT, r, c);                                                       \
        a_reg[i] = INSIDE(m_blk + r, (k0) + c, M, K) ? A_AT(m_blk + r, (k0) + c) : 0;   \
    }                                                                                   \
    for (int i = 0; i < B_PER; ++i) {                                 \
        int kk, n;                                                                      \
        B_RC(lid + i * NT, kk, n);                                                      \
        b_reg[i] = INSIDE((k0) + kk, n_blk + n, K, N) ? B_AT((k0) + kk, n_blk + n) : 0; \
    }

#define STORE_LOCAL()                                       \
    for (int i = 0; i < A_PER; ++i) {     \
        int r, c;                                           \
        A_RC(lid + i * NT, r, c);                           \
        As[c][r] = a_reg[i];                                \
    }                                                       \
    for (int i = 0; i < B_PER; ++i) {     \
        int kk, n;                                          \
        B_RC(lid + i * NT, kk, n);                          \
        Bs[kk][n] = b_reg[i];                               \
    }

    FETCH(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        STORE_LOCAL();
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + BK < K) {
            FETCH(k0 + BK);
        }
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            REAL a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m_blk + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n_blk + tx * TN + j;
            if (INSIDE(m, n, M, N)) {
                REAL v = alpha * acc[i][j];
                if (has_bias) v += bias[n];
                if (beta != (REAL)0) v += beta * C[(size_t)m * ldc + n];
                C[(size_t)m * ldc + n] = apply_activation(v, act, act_a, act_b);
            }
        }
    }
}
