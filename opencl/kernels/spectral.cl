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

/* bin_energy with the angles read from tw: (cos, sin)(2 pi t / L) for t < L, interleaved. */
inline REAL bin_energy_tw(__global const REAL *x, __global const REAL *tw, const int L, const REAL mean,
                          const int k) {
    REAL re = (REAL)0;
    REAL im = (REAL)0;
    int phase = 0;
    for (int t = 0; t < L; ++t) {
        const REAL v = x[t] - mean;
        re += v * tw[2 * phase];
        im -= v * tw[2 * phase + 1];
        phase += k;
        if (phase >= L) {
            phase -= L;
        }
    }
    return re * re + im * im;
}

/* harmonic_weight on CPUs: one item per HW_ROWS rows (groups of 1), 8 bins per vector. The angles
 * 2 pi (k t mod L) / L come from the table tw (L x (cos, sin), computed in float64 on the host) instead of
 * L x F cos/sin calls per row: the same values bin_energy computes, rounded once; each gathered vector of
 * them serves the item's HW_ROWS rows. Same statistics, same order of summation. global (ceil(M / HW_ROWS)). */
#define HW_ROWS 4
__kernel void harmonic_weight_cpu(__global const REAL *x, const uint x_off, __global const REAL *tw,
                                  const uint tw_off, __global REAL *w, const uint w_off, const int M,
                                  const int L) {
    const int m0 = get_global_id(0) * HW_ROWS;
    if (m0 >= M) {
        return;
    }
    x += x_off;
    tw += tw_off;
    __global const REAL *xr[HW_ROWS];
    REAL mean[HW_ROWS];
    REAL total[HW_ROWS];
    REAL best[HW_ROWS];
    int k0[HW_ROWS];
    #pragma unroll
    for (int r = 0; r < HW_ROWS; ++r) {
        xr[r] = x + (size_t)min(m0 + r, M - 1) * L; /* rows past M repeat the last one, not written */
        REAL part = (REAL)0;
        for (int t = 0; t < L; ++t) {
            part += xr[r][t];
        }
        mean[r] = part / (REAL)L;
        total[r] = (REAL)0;
        best[r] = (REAL)0;
        k0[r] = 0;
    }
    const int F = L / 2 + 1;
    for (int kb = 0; kb < F; kb += 8) {
        /* lanes past the last bin repeat it (in range of the table; their energies are not used) */
        const int8 k = min((int8)(kb) + (int8)(0, 1, 2, 3, 4, 5, 6, 7), (int8)(F - 1));
        int8 ph = (int8)(0);
        REAL8 re[HW_ROWS];
        REAL8 im[HW_ROWS];
        #pragma unroll
        for (int r = 0; r < HW_ROWS; ++r) {
            re[r] = (REAL8)(0);
            im[r] = (REAL8)(0);
        }
        for (int t = 0; t < L; ++t) {
            const int8 at = ph * 2;
            const REAL8 c = (REAL8)(tw[at.s0], tw[at.s1], tw[at.s2], tw[at.s3], tw[at.s4], tw[at.s5], tw[at.s6],
                                    tw[at.s7]);
            const REAL8 s = (REAL8)(tw[at.s0 + 1], tw[at.s1 + 1], tw[at.s2 + 1], tw[at.s3 + 1], tw[at.s4 + 1],
                                    tw[at.s5 + 1], tw[at.s6 + 1], tw[at.s7 + 1]);
            #pragma unroll
            for (int r = 0; r < HW_ROWS; ++r) {
                const REAL v = xr[r][t] - mean[r];
                re[r] += v * c;
                im[r] -= v * s;
            }
            ph += k;
            ph = select(ph, ph - L, ph >= L);
        }
        const int lanes = min(8, F - kb);
        #pragma unroll
        for (int r = 0; r < HW_ROWS; ++r) {
            REAL8 energy = re[r] * re[r] + im[r] * im[r];
            const REAL *e = (const REAL *)&energy;
            for (int l = 0; l < lanes; ++l) {
                const int kk = kb + l;
                total[r] += e[l];
                if (kk >= 3 && kk < F / 3 && e[l] > best[r]) {
                    best[r] = e[l];
                    k0[r] = kk;
                }
            }
        }
    }
    for (int r = 0; r < HW_ROWS && m0 + r < M; ++r) {
        const REAL harm = bin_energy_tw(xr[r], tw, L, mean[r], k0[r]) +
                          bin_energy_tw(xr[r], tw, L, mean[r], 2 * k0[r]) +
                          bin_energy_tw(xr[r], tw, L, mean[r], 3 * k0[r]);
        w[w_off + m0 + r] = harm / (total[r] + (REAL)1e-5);
    }
}
