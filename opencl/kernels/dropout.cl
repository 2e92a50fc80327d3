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
