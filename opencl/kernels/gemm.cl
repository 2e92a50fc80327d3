// GEMM for CPU devices: C (M, N) = act(alpha * op(A) * op(B) + beta * C + bias), row-major, REAL.
//
// Design (measured on PoCL's CPU device, see benchmarks/RESULTS.md):
// - op(B) is first packed into column panels of NR = 16 values: Bp[panel][k][0..15], zero-padded past N.
//   The product kernel then reads one aligned REAL16 per k (a single vector load) whatever the layout and
//   transposition of B, and never needs a bounds check inside the k loop.
// - Each work-item owns a TM x 16 block of C: TM accumulators of REAL16 stay in registers, each k step
//   broadcasts TM scalars of op(A) and does TM vector multiply-adds. No local memory, no barriers, and a
//   work-group of 1 x 1: PoCL runs work-groups on its threads and would serialise the items of a larger one.
// - op(A) is read through two strides (row, k), so transposed A costs nothing extra.
// - The epilogue (alpha, beta, bias per column, activation) is fused: a dense layer is one product launch.
//
// Build-time macros: REAL (common.h); TM (rows per work-item), DW and DN (vector width and columns of the
// gemm_dot block). blas.py derives all three from the device's native vector width, so the accumulators
// fill the register file without spilling, on 16-register AVX2 and 32-register AVX-512 alike.
#include "common.h"

#ifndef TM
#define TM 6
#endif
#ifndef DW
#define DW 16
#endif
#ifndef DN
#define DN 4
#endif
#define NR 16
#define REALD CONCAT(REAL, DW)
typedef REAL REALD_u __attribute__((ext_vector_type(DW), aligned(sizeof(REAL))));

// Packs op(B) (K, N), element (k, n) at B[k * sbk + n * sbn], into Bp (panels, K, NR).
// One work-item per (k, panel, group): global size (K, ceil(N / NR), G); group g reads B + g * gb and
// writes Bp + g * gp.
__kernel void gemm_pack_b(__global const REAL* restrict B, const uint b_off,
                          __global REAL* restrict Bp, const uint bp_off,
                          const int K, const int N, const int sbk, const int sbn, const int gb,
                          const int gp) {
    const int k = get_global_id(0);
    const int panel = get_global_id(1);
    const size_t g = get_global_id(2);
    B += b_off + g * gb + (size_t)k * sbk;
    Bp += bp_off + g * gp + ((size_t)panel * K + k) * NR;
    const int n0 = panel * NR;
    if (n0 + NR <= N) {
        for (int c = 0; c < NR; ++c) Bp[c] = B[(size_t)(n0 + c) * sbn];
    } else {
        for (int c = 0; c < NR; ++c) Bp[c] = (n0 + c < N) ? B[(size_t)(n0 + c) * sbn] : (REAL)0;
    }
}

// The same packing for a B whose K axis is contiguous (op(B) = Bᵀ of a row-major (N, K) array, as the
// weights w (O, I) of a dense layer's forward product): each work-item reads 16 rows of B as REAL16
// vectors along K and writes them transposed, a 16 x 16 block at a time.
// Global size (ceil(K / 16), panels, G), local size (1, 1, 1).
__kernel void gemm_pack_bt(__global const REAL* restrict B, const uint b_off,
                           __global REAL* restrict Bp, const uint bp_off,
                           const int K, const int N, const int ldb, const int gb, const int gp) {
    const int k0 = get_global_id(0) * NR;
    const int panel = get_global_id(1);
    const size_t g = get_global_id(2);
    const int n0 = panel * NR;
    B += b_off + g * gb;
    Bp += bp_off + g * gp + ((size_t)panel * K + k0) * NR;
    REAL tile[NR][NR];  // tile[c][kk] = B[n0 + c][k0 + kk]
    const int kn = min(NR, K - k0);
    for (int c = 0; c < NR; ++c) {
        __global const REAL* row = B + (size_t)min(n0 + c, N - 1) * ldb + k0;
        if (n0 + c >= N) {
            for (int kk = 0; kk < NR; ++kk) tile[c][kk] = (REAL)0;
        } else if (kn == NR) {
            *(REAL16*)tile[c] = *(__global const REAL16_u*)row;
        } else {
            for (int kk = 0; kk < NR; ++kk) tile[c][kk] = kk < kn ? row[kk] : (REAL)0;
        }
    }
    for (int kk = 0; kk < kn; ++kk) {
        REAL out[NR];
        for (int c = 0; c < NR; ++c) out[c] = tile[c][kk];
        *(__global REAL16*)(Bp + (size_t)kk * NR) = *(REAL16*)out;
    }
}

inline REAL16 activation16(REAL16 x, int act, REAL a, REAL b) {
    switch (act) {
    case ACT_SIGMOID: return (REAL)1 / ((REAL)1 + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_RELU: return max(x, (REAL)0);
    case ACT_LRELU: return select(a * x, x, x > (REAL)0);
    default: return a * x + b;
    }
}

// C = act(alpha * op(A) op(B) + beta * C + bias). op(A) (M, K) element (m, k) at A[m * sam + k * sak].
// op(B) comes either packed (packed = 1: Bp from gemm_pack_b, bstep = NR) or straight from a row-major
// B (K, N) with row stride bstep = ldb (packed = 0: no packing pass; the last, partial panel is read with
// masked scalar loads).
// Each work-item computes ppi consecutive panels (ppi > 1 when K is small, so that a work-item has enough
// arithmetic to outweigh PoCL's cost of scheduling a work-group).
// Global size (ceil(M / TM), ceil(panels / ppi), G), local size (1, 1, 1); group g uses A + g * ga,
// Bp + g * gb and C + g * gc (batched products; G = 1 for one product).
// bias: N values, or any buffer with has_bias = 0. C is read only when beta != 0 (so it may hold NaN).
inline void tile_panel(__global const REAL* restrict A, __global const REAL* restrict Bp,
                       __global REAL* restrict C, __global const REAL* restrict bias,
                       const int M, const int N, const int K, const int sam, const int sak, const int ldc,
                       const int packed, const int bstep, const REAL alpha, const REAL beta,
                       const int has_bias, const int act, const REAL act_a, const REAL act_b,
                       const int m0, const int panel) {
    const int n0 = panel * NR;
    Bp += packed ? (size_t)panel * K * NR : (size_t)n0;

    // Rows past M read row M-1 (valid memory) and are never stored: no branch in the k loop.
    __global const REAL* arow[TM];
#pragma unroll
    for (int r = 0; r < TM; ++r) arow[r] = A + (size_t)min(m0 + r, M - 1) * sam;

    REAL16 acc[TM];
#pragma unroll
    for (int r = 0; r < TM; ++r) acc[r] = (REAL16)(0);

    if (packed || n0 + NR <= N) {
        for (int k = 0; k < K; ++k) {
            const REAL16 b = *(__global const REAL16_u*)(Bp + (size_t)k * bstep);
            const size_t ka = (size_t)k * sak;
#pragma unroll
            for (int r = 0; r < TM; ++r) acc[r] += arow[r][ka] * b;
        }
    } else {
        const int cols = N - n0;
        for (int k = 0; k < K; ++k) {
            REAL tmp[NR];
            for (int c = 0; c < NR; ++c) tmp[c] = c < cols ? Bp[(size_t)k * bstep + c] : (REAL)0;
            const REAL16 b = *(REAL16*)tmp;
            const size_t ka = (size_t)k * sak;
#pragma unroll
            for (int r = 0; r < TM; ++r) acc[r] += arow[r][ka] * b;
        }
    }

    REAL16 bvec = (REAL16)(0);
    if (has_bias) {
        if (n0 + NR <= N) {
            bvec = *(__global const REAL16_u*)(bias + n0);
        } else {
            REAL tmp[NR];
            for (int c = 0; c < NR; ++c) tmp[c] = (n0 + c < N) ? bias[n0 + c] : (REAL)0;
            bvec = *(REAL16*)tmp;
        }
    }
    const int rows = min(TM, M - m0);
#pragma unroll
    for (int r = 0; r < TM; ++r) {
        if (r < rows) {
            __global REAL* crow = C + (size_t)(m0 + r) * ldc + n0;
            if (n0 + NR <= N) {
                REAL16 v = alpha * acc[r] + bvec;
                if (beta != (REAL)0) v += beta * *(__global const REAL16_u*)crow;
                *(__global REAL16_u*)crow = activation16(v, act, act_a, act_b);
            } else {
                REAL16 v = alpha * acc[r] + bvec;
                REAL tmp[NR];
                *(REAL16*)tmp = v;
                for (int c = 0; c < N - n0; ++c) {
                    REAL x = tmp[c];
                    if (beta != (REAL)0) x += beta * crow[c];
                    crow[c] = apply_activation(x, act, act_a, act_b);
                }
            }
        }
    }
}


__kernel void gemm_tile(__global const REAL* restrict A, const uint a_off,
                        __global const REAL* restrict Bp, const uint bp_off,
                        __global REAL* restrict C, const uint c_off,
                        __global const REAL* restrict bias, const uint bias_off,
                        const int M, const int N, const int K, const int sam, const int sak, const int ldc,
                        const int packed, const int bstep, const int ppi,
                        const REAL alpha, const REAL beta, const int has_bias,
                        const int act, const REAL act_a, const REAL act_b,
                        const int ga, const int gb, const int gc) {
    const int m0 = get_global_id(0) * TM;
    const size_t g = get_global_id(2);
    A += a_off + g * ga;
    Bp += bp_off + g * gb;
    C += c_off + g * gc;
    bias += bias_off;
    const int panels = (N + NR - 1) / NR;
    const int first = get_global_id(1) * ppi;
    const int last = min(first + ppi, panels);
    for (int panel = first; panel < last; ++panel)
        tile_panel(A, Bp, C, bias, M, N, K, sam, sak, ldc, packed, bstep, alpha, beta, has_bias, act,
                   act_a, act_b, m0, panel);
}

inline REAL hsum_d(REALD v) {
#if DW == 16
    const REAL8 s8 = v.lo + v.hi;
    const REAL4 s4 = s8.lo + s8.hi;
#elif DW == 8
    const REAL4 s4 = v.lo + v.hi;
#else
    const REAL4 s4 = v;
#endif
    const REAL2 s2 = s4.lo + s4.hi;
    return s2.x + s2.y;
}

// C = act(alpha * A Bᵀ + beta * C + bias) for row-major A (M, K) and B (N, K): both operands are contiguous
// along K, so each work-item computes a DM x DN block as dot products of DW-wide vectors, with no packing
// pass. Used for small M (the forward product of a dense layer at small batch), where packing B would
// cost more than the product. Each work-item covers npi consecutive column blocks (enough arithmetic per
// PoCL work-group). Global size (ceil(M / DM), ceil(ceil(N / DN) / npi), G), local size (1, 1, 1).
#define DM 4
inline void dot_block(__global const REAL* restrict A, __global const REAL* restrict B,
                      __global REAL* restrict C, __global const REAL* restrict bias,
                      const int M, const int N, const int K, const int lda, const int ldb, const int ldc,
                      const REAL alpha, const REAL beta, const int has_bias,
                      const int act, const REAL act_a, const REAL act_b, const int m0, const int n0) {
    __global const REAL* arow[DM];
    __global const REAL* brow[DN];
#pragma unroll
    for (int r = 0; r < DM; ++r) arow[r] = A + (size_t)min(m0 + r, M - 1) * lda;
#pragma unroll
    for (int c = 0; c < DN; ++c) brow[c] = B + (size_t)min(n0 + c, N - 1) * ldb;

    REALD acc[DM][DN];
#pragma unroll
    for (int r = 0; r < DM; ++r)
#pragma unroll
        for (int c = 0; c < DN; ++c) acc[r][c] = (REALD)(0);
    const int kv = K - K % DW;
    for (int k = 0; k < kv; k += DW) {
        REALD a[DM], b[DN];
#pragma unroll
        for (int r = 0; r < DM; ++r) a[r] = *(__global const REALD_u*)(arow[r] + k);
#pragma unroll
        for (int c = 0; c < DN; ++c) b[c] = *(__global const REALD_u*)(brow[c] + k);
#pragma unroll
        for (int r = 0; r < DM; ++r)
#pragma unroll
            for (int c = 0; c < DN; ++c) acc[r][c] += a[r] * b[c];
    }
    REAL out[DM][DN];
#pragma unroll
    for (int r = 0; r < DM; ++r)
#pragma unroll
        for (int c = 0; c < DN; ++c) {
            REAL s = hsum_d(acc[r][c]);
            for (int k = kv; k < K; ++k) s += arow[r][k] * brow[c][k];
            out[r][c] = s;
        }
#pragma unroll
    for (int r = 0; r < DM; ++r) {
        if (m0 + r < M) {
#pragma unroll
            for (int c = 0; c < DN; ++c) {
                const int n = n0 + c;
                if (n < N) {
                    REAL v = alpha * out[r][c];
                    if (has_bias) v += bias[n];
                    if (beta != (REAL)0) v += beta * C[(size_t)(m0 + r) * ldc + n];
                    C[(size_t)(m0 + r) * ldc + n] = apply_activation(v, act, act_a, act_b);
                }
            }
        }
    }
}

__kernel void gemm_dot(__global const REAL* restrict A, const uint a_off,
                       __global const REAL* restrict B, const uint b_off,
                       __global REAL* restrict C, const uint c_off,
                       __global const REAL* restrict bias, const uint bias_off,
                       const int M, const int N, const int K, const int lda, const int ldb, const int ldc,
                       const int npi, const REAL alpha, const REAL beta, const int has_bias,
                       const int act, const REAL act_a, const REAL act_b,
                       const int ga, const int gb, const int gc) {
    const int m0 = get_global_id(0) * DM;
    const size_t g = get_global_id(2);
    A += a_off + g * ga;
    B += b_off + g * gb;
    C += c_off + g * gc;
    bias += bias_off;
    const int blocks = (N + DN - 1) / DN;
    const int first = get_global_id(1) * npi;
    const int last = min(first + npi, blocks);
    for (int blk = first; blk < last; ++blk)
        dot_block(A, B, C, bias, M, N, K, lda, ldb, ldc, alpha, beta, has_bias, act, act_a, act_b, m0,
                  blk * DN);
}
