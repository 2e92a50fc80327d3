/* Spectral pieces of ATFNet's F block (the DFTs themselves are GEMMs against precomputed bases):
 * spectrum normalisation and its inverse, and the harmonic-energy weight. Rows are independent series
 * (batch x channel); a spectrum row holds F complex bins as interleaved (Re, Im). */
#include "complex.h"

/* y = (X - mean) / std, std = sqrt(var_k |X_k| + eps) with `ddof` (0 or 1). One item per row. */
__kernel void spectrum_norm_forward(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                                    __global REAL *mean, const uint mean_off, __global REAL *std,
                                    const uint std_off, const int M, const int F, const REAL eps,
                                    const int ddof) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    x += x_off + (size_t)m * 2 * F;
    y += y_off + (size_t)m * 2 * F;
    REAL2 mu = (REAL2)(0, 0);
    REAL amean = (REAL)0;
    for (int k = 0; k < F; ++k) {
        const REAL2 z = c_ld(x, k);
        mu += z;
        amean += c_abs(z);
    }
    mu /= (REAL)F;
    amean /= (REAL)F;
    REAL var = (REAL)0;
    for (int k = 0; k < F; ++k) {
        const REAL d = c_abs(c_ld(x, k)) - amean;
        var += d * d;
    }
    const REAL sd = sqrt(var / (REAL)(F - ddof) + eps);
    for (int k = 0; k < F; ++k) {
        c_st(y, k, (c_ld(x, k) - mu) / sd);
    }
    c_st(mean + mean_off, m, mu);
    std[std_off + m] = sd;
}

/* Exact gradient through both statistics:
 * gX_k = (g_k - mean g) / sd - R (a_k - mean a) X_k / (a_k sd^2 (F - ddof)), R = sum Re(conj(g) y), a = |X|.
 * With has_stats, g_mean (M, 2) and g_std (M,) are gradients reaching the same statistics from the
 * de-normalisation: they add g_mean / F + g_std (a_k - mean a) X_k / (a_k sd (F - ddof)).
 * One item per row. */
__kernel void spectrum_norm_backward(__global const REAL *x, const uint x_off, __global const REAL *y,
                                     const uint y_off, __global const REAL *std, const uint std_off,
                                     __global const REAL *gy, const uint gy_off, __global const REAL *g_mean,
                                     const uint g_mean_off, __global const REAL *g_std, const uint g_std_off,
                                     __global REAL *gx, const uint gx_off, const int M, const int F,
                                     const int ddof, const int has_stats) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    x += x_off + (size_t)m * 2 * F;
    y += y_off + (size_t)m * 2 * F;
    gy += gy_off + (size_t)m * 2 * F;
    gx += gx_off + (size_t)m * 2 * F;
    const REAL sd = std[std_off + m];
    REAL2 gmean = (REAL2)(0, 0);
    REAL amean = (REAL)0;
    REAL r = (REAL)0;
    for (int k = 0; k < F; ++k) {
        const REAL2 g = c_ld(gy, k);
        const REAL2 v = c_ld(y, k);
        gmean += g;
        amean += c_abs(c_ld(x, k));
        r += g.x * v.x + g.y * v.y;
    }
    gmean /= (REAL)F;
    amean /= (REAL)F;
    REAL gs = -r / sd; /* total gradient reaching sd */
    REAL2 shift = -gmean / sd;
    if (has_stats) {
        gs += g_std[g_std_off + m];
        shift += c_ld(g_mean + g_mean_off, m) / (REAL)F;
    }
    const REAL coef = gs / (sd * (REAL)(F - ddof));
    for (int k = 0; k < F; ++k) {
        const REAL2 z = c_ld(x, k);
        const REAL a = c_abs(z);
        const REAL2 unit = a > (REAL)0 ? z / a : (REAL2)(0, 0);
        c_st(gx, k, c_ld(gy, k) / sd + shift + unit * (coef * (a - amean)));
    }
}

/* out = y std + mean per row. One item per complex element (k, m): global (F, M). */
__kernel void spectrum_denorm_forward(__global const REAL *y, const uint y_off, __global const REAL *mean,
                                      const uint mean_off, __global const REAL *std, const uint std_off,
                                      __global REAL *out, const uint out_off, const int M, const int F) {
    const int k = get_global_id(0);
    const int m = get_global_id(1);
    if (k >= F || m >= M) {
        return;
    }
    const size_t idx = (size_t)m * F + k;
    c_st(out + out_off, idx, c_ld(y + y_off, idx) * std[std_off + m] + c_ld(mean + mean_off, m));
}

/* Backward of out = y std + mean: gx = gy std, and per row the gradients of the statistics,
 * g_mean = sum_k gy_k and g_std = sum_k Re(conj(gy_k) y_k). One item per row. */
__kernel void spectrum_denorm_backward(__global const REAL *gy, const uint gy_off, __global const REAL *y,
                                       const uint y_off, __global const REAL *std, const uint std_off,
                                       __global REAL *gx, const uint gx_off, __global REAL *g_mean,
                                       const uint g_mean_off, __global REAL *g_std, const uint g_std_off,
                                       const int M, const int F) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    gy += gy_off + (size_t)m * 2 * F;
    y += y_off + (size_t)m * 2 * F;
    gx += gx_off + (size_t)m * 2 * F;
    const REAL sd = std[std_off + m];
    REAL2 sum = (REAL2)(0, 0);
    REAL dot = (REAL)0;
    for (int k = 0; k < F; ++k) {
        const REAL2 g = c_ld(gy, k);
        const REAL2 v = c_ld(y, k);
        c_st(gx, k, g * sd);
        sum += g;
        dot += g.x * v.x + g.y * v.y;
    }
    c_st(g_mean + g_mean_off, m, sum);
    g_std[g_std_off + m] = dot;
}

/* |DFT_k(x - mean)|^2 of one row of length L; the angle 2 pi (k t mod L) / L is reduced in integers. */
inline REAL bin_energy(__global const REAL *x, const int L, const REAL mean, const int k) {
    const REAL step = (REAL)6.28318530717958647692 / (REAL)L;
    REAL re = (REAL)0;
    REAL im = (REAL)0;
    int phase = 0;
    for (int t = 0; t < L; ++t) {
        const REAL v = x[t] - mean;
        const REAL ang = step * (REAL)phase;
        re += v * cos(ang);
        im -= v * sin(ang);
        phase += k;
        if (phase >= L) {
            phase -= L;
        }
    }
    return re * re + im * im;
}

/* The harmonic-energy weight of each row: fundamental k0 = the strongest bin in [3, F/3) (the first one on
 * ties; 0 when none has energy), w = energy of k0, 2 k0, 3 k0 over the total. One work-group of LG items per
 * row, the items taking bins k = lid, lid + LG, ...: global (LG M), local (LG). */
__kernel void harmonic_weight(__global const REAL *x, const uint x_off, __global REAL *w, const uint w_off,
                              const int M, const int L) {
    __local REAL2 scratch[LG];
    const int m = get_group_id(0);
    const int lid = get_local_id(0);
    x += x_off + (size_t)m * L;
    REAL part = (REAL)0;
    for (int t = lid; t < L; t += LG) {
        part += x[t];
    }
    const REAL mean = group_sum2((REAL2)(part, 0), scratch).x / (REAL)L;
    const int F = L / 2 + 1;
    REAL total = (REAL)0;
    REAL best = (REAL)0;
    int k0 = 0;
    for (int k = lid; k < F; k += LG) {
        const REAL e = bin_energy(x, L, mean, k);
        total += e;
        if (k >= 3 && k < F / 3 && e > best) {
            best = e;
            k0 = k;
        }
    }
    total = group_sum2((REAL2)(total, 0), scratch).x;
#if LG > 1
    /* Strongest bin over the group: larger energy wins, the smaller bin on equal energy. */
    scratch[lid] = (REAL2)(best, (REAL)k0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            const REAL2 a = scratch[lid];
            const REAL2 b = scratch[lid + s];
            if (b.x > a.x || (b.x == a.x && b.x > (REAL)0 && b.y < a.y)) {
                scratch[lid] = b;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    k0 = (int)scratch[0].y;
#endif
    if (lid == 0) {
        const REAL harm = bin_energy(x, L, mean, k0) + bin_energy(x, L, mean, 2 * k0) + bin_energy(x, L, mean, 3 * k0);
        w[w_off + m] = harm / (total + (REAL)1e-5);
    }
}
