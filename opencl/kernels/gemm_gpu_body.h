// The body of one gemm_gpu work-group, included once per product a kernel computes (gemm_gpu.cl: one;
// gemm_gpu_pair.cl: two, with different transpositions). No include guard: each inclusion defines the
// function GEMM_BODY from the macros set at that point and undefines its own helper macros at the end.
//
// Per product: TRANS_A, TRANS_B, SPLIT, EVEN, VEC_A, VEC_B (see gemm_gpu.cl). Shared by every product of a
// program: REAL, BM, BN, BK, TM, TN, STAGES. The local tiles are declared by the kernel (OpenCL allows
// __local variables only at kernel scope) and passed in; (gx, gy, gz) is the work-group's block of C and
// its grid layer (a slice of K with SPLIT, else a product of a batch).
#ifndef GEMM_GPU_SHARED
#define GEMM_GPU_SHARED
#define NT ((BM / TM) * (BN / TN))  // items per work-group
#define A_PER (BM * BK / NT)        // tile elements each item copies
#define B_PER (BK * BN / NT)
#define PAD 4                       // breaks local-memory bank conflicts of k-major stores
#ifndef STAGES
#define STAGES 1
#endif
#endif

#if EVEN
#define INSIDE(r, c, R, C) 1
#else
#define INSIDE(r, c, R, C) ((r) < (R) && (c) < (C))
#endif

static inline void GEMM_BODY(__global const REAL* restrict A, const uint a_off,
                             __global const REAL* restrict B, const uint b_off,
                             __global REAL* restrict C, const uint c_off,
                             __global const REAL* restrict bias, const uint bias_off,
                             const int M, const int N, const int K, const int lda, const int ldb,
                             const int ldc, const REAL alpha, const REAL beta, const int has_bias,
                             const int act, const REAL act_a, const REAL act_b,
                             const int ga, const int gb, const int gc, const int kc,
                             __local REAL (*As)[BK][BM + PAD], __local REAL (*Bs)[BK][BN + PAD],
                             const int gx, const int gy, const int gz) {
    const int tx = get_local_id(0);  // column group
    const int ty = get_local_id(1);  // row group
    const int lid = ty * (BN / TN) + tx;
    const int m_blk = gy * BM;
    const int n_blk = gx * BN;
#if SPLIT
    const size_t g = 0;
    const int k_begin = gz * kc;  // one grid layer per chunk of K
    const int k_end = min(K, k_begin + kc);
    C += c_off + (size_t)gz * gc;
#else
    const size_t g = gz;  // batched products: one grid layer per product
    const int k_begin = 0;
    const int k_end = K;
    C += c_off + g * gc;
#endif
    A += a_off + g * ga;
    B += b_off + g * gb;
    bias += bias_off;

#if VEC_A
    REAL4 a_reg[A_PER / 4];
#else
    REAL a_reg[A_PER];
#endif
#if VEC_B
    REAL4 b_reg[B_PER / 4];
#else
    REAL b_reg[B_PER];
#endif
    REAL4 acc[TM][TN / 4];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN / 4; ++j) acc[i][j] = (REAL4)(0);

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

// FETCH(k0) reads the tiles starting at k0 into registers; STORE_LOCAL(s) writes them to stage s.
#if VEC_A && TRANS_A  // op(A) tile read as vectors along m (A stored K x M)
#define FETCH_A(k0)                                                                     \
    for (int i = 0; i < A_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, r4 = e % (BM / 4), c = e / (BM / 4);                \
        a_reg[i] = *(__global const REAL4*)&A_AT(m_blk + r4 * 4, (k0) + c);        \
    }
#define STORE_A(s)                                                                      \
    for (int i = 0; i < A_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, r4 = e % (BM / 4), c = e / (BM / 4);                \
        *(__local REAL4*)&As[s][c][r4 * 4] = a_reg[i];                              \
    }
#elif VEC_A  // vectors along k (A stored M x K)
#define FETCH_A(k0)                                                                     \
    for (int i = 0; i < A_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, c4 = e % (BK / 4), r = e / (BK / 4);                \
        a_reg[i] = *(__global const REAL4*)&A_AT(m_blk + r, (k0) + c4 * 4);        \
    }
#define STORE_A(s)                                                                      \
    for (int i = 0; i < A_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, c4 = e % (BK / 4), r = e / (BK / 4);                \
        As[s][c4 * 4][r] = a_reg[i].x;                  \
        As[s][c4 * 4 + 1][r] = a_reg[i].y;              \
        As[s][c4 * 4 + 2][r] = a_reg[i].z;              \
        As[s][c4 * 4 + 3][r] = a_reg[i].w;            \
    }
#else
#define FETCH_A(k0)                                                                       \
    for (int i = 0; i < A_PER; ++i) {                                                     \
        int r, c;                                                                         \
        A_RC(lid + i * NT, r, c);                                                         \
        a_reg[i] = INSIDE(m_blk + r, (k0) + c, M, k_end) ? A_AT(m_blk + r, (k0) + c) : 0; \
    }
#define STORE_A(s)                          \
    for (int i = 0; i < A_PER; ++i) {       \
        int r, c;                           \
        A_RC(lid + i * NT, r, c);           \
        As[s][c][r] = a_reg[i];             \
    }
#endif

#if VEC_B && TRANS_B  // op(B) tile read as vectors along k (B stored N x K)
#define FETCH_B(k0)                                                                     \
    for (int i = 0; i < B_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, k4 = e % (BK / 4), n = e / (BK / 4);                \
        b_reg[i] = *(__global const REAL4*)&B_AT((k0) + k4 * 4, n_blk + n);        \
    }
#define STORE_B(s)                                                                      \
    for (int i = 0; i < B_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, k4 = e % (BK / 4), n = e / (BK / 4);                \
        Bs[s][k4 * 4][n] = b_reg[i].x;                  \
        Bs[s][k4 * 4 + 1][n] = b_reg[i].y;              \
        Bs[s][k4 * 4 + 2][n] = b_reg[i].z;              \
        Bs[s][k4 * 4 + 3][n] = b_reg[i].w;            \
    }
#elif VEC_B  // vectors along n (B stored K x N)
#define FETCH_B(k0)                                                                     \
    for (int i = 0; i < B_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, n4 = e % (BN / 4), kk = e / (BN / 4);               \
        b_reg[i] = *(__global const REAL4*)&B_AT((k0) + kk, n_blk + n4 * 4);       \
    }
#define STORE_B(s)                                                                      \
    for (int i = 0; i < B_PER / 4; ++i) {                                               \
        const int e = lid + i * NT, n4 = e % (BN / 4), kk = e / (BN / 4);               \
        *(__local REAL4*)&Bs[s][kk][n4 * 4] = b_reg[i];                             \
    }
#else
#define FETCH_B(k0)                                                                           \
    for (int i = 0; i < B_PER; ++i) {                                                         \
        int kk, n;                                                                            \
        B_RC(lid + i * NT, kk, n);                                                            \
        b_reg[i] = INSIDE((k0) + kk, n_blk + n, k_end, N) ? B_AT((k0) + kk, n_blk + n) : 0;   \
    }
#define STORE_B(s)                          \
    for (int i = 0; i < B_PER; ++i) {       \
        int kk, n;                          \
        B_RC(lid + i * NT, kk, n);          \
        Bs[s][kk][n] = b_reg[i];            \
    }
#endif

    int s = 0;  // the stage multiplied in this step
    FETCH_A(k_begin);
    FETCH_B(k_begin);
#if STAGES == 2
    STORE_A(0);
    STORE_B(0);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        const bool more = k0 + BK < k_end;
#if STAGES == 1
        STORE_A(0);
        STORE_B(0);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
        if (more) {
            FETCH_A(k0 + BK);
            FETCH_B(k0 + BK);
        }
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            REAL a[TM];
            REAL4 b[TN / 4];
#pragma unroll
            for (int i4 = 0; i4 < TM / 4; ++i4) {
                const REAL4 v = *(__local const REAL4*)&As[s][kk][(i4 * (BM / TM) + ty) * 4];
                a[i4 * 4] = v.x;
                a[i4 * 4 + 1] = v.y;
                a[i4 * 4 + 2] = v.z;
                a[i4 * 4 + 3] = v.w;
            }
#pragma unroll
            for (int j4 = 0; j4 < TN / 4; ++j4) b[j4] = *(__local const REAL4*)&Bs[s][kk][(j4 * (BN / TN) + tx) * 4];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j4 = 0; j4 < TN / 4; ++j4) acc[i][j4] += a[i] * b[j4];
        }
#if STAGES == 2
        if (more) {  // the other stage was last read before the previous barrier
            STORE_A(s ^ 1);
            STORE_B(s ^ 1);
        }
        s ^= 1;
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m_blk + ((i / 4) * (BM / TM) + ty) * 4 + i % 4;
#pragma unroll
        for (int j4 = 0; j4 < TN / 4; ++j4) {
            REAL v4[4];
            *(REAL4*)v4 = alpha * acc[i][j4];
            const int n4 = n_blk + (j4 * (BN / TN) + tx) * 4;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int n = n4 + c;
                if (INSIDE(m, n, M, N)) {
                    REAL v = v4[c];
                    if (has_bias) v += bias[n];
                    if (beta != (REAL)0) v += beta * C[(size_t)m * ldc + n];
                    C[(size_t)m * ldc + n] = apply_activation(v, act, act_a, act_b);
                }
            }
        }
    }
}

#undef INSIDE
#undef A_RC
#undef A_AT
#undef B_RC
#undef B_AT
#undef FETCH_A
#undef STORE_A
#undef FETCH_B
#undef STORE_B
