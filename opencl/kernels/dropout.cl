/* Inverted-dropout mask drawn from the counter-based hash of nn.random, bit for bit: element i is dropped
 * when uniform01(seed, counter, i) < rate, i.e. when its 24 random bits are below `threshold`
 * = ceil(rate * 2^24) (computed on the host, so the comparison is exact integer arithmetic). */
#include "nn_common.h"

__kernel void dropout_mask(__global REAL *mask, const uint mask_off, const int n, const uint seed,
                           const uint counter, const uint threshold, const REAL scale) {
    mask += mask_off;
    const int i = get_global_id(0);
    if (i < n) {
        mask[i] = nn_uniform_bits(seed, counter, (uint)i) < threshold ? (REAL)0 : scale;
    }
}

/* The mask of dropout_mask and the dropped values in one pass: y = x ⊙ mask, where each mask element covers
 * `width` consecutive elements of x (1 for reals, 2 for the (Re, Im) pair of a complex value). The mask is
 * written too (the backward pass multiplies by it). One item per mask element. */
__kernel void dropout_apply(__global const REAL *x, const uint x_off, __global REAL *y, const uint y_off,
                            __global REAL *mask, const uint mask_off, const int n, const int width,
                            const uint seed, const uint counter, const uint threshold, const REAL scale) {
    x += x_off;
    y += y_off;
    mask += mask_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL m = nn_uniform_bits(seed, counter, (uint)i) < threshold ? (REAL)0 : scale;
        mask[i] = m;
        for (int w = 0; w < width; ++w) {
            y[(size_t)i * width + w] = x[(size_t)i * width + w] * m;
        }
    }
}
