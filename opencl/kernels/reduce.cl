/* Global-norm gradient clipping in two launches and no host read:
 *   1. sumsq_partials: P work-groups of LWG items write P partial sums of squares;
 *   2. clip_by_norm:   every item first adds up the P partials (P is small), then scales its elements by
 *                      min(1, max_norm / ||g||). */
#include "nn_common.h"

/* Group k sums its share of g (contiguous chunks when LWG == 1, the CPU layout; a grid-stride loop
 * otherwise, so neighbouring items read neighbouring elements). */
__kernel void sumsq_partials(__global const REAL *g, const uint g_off, __global REAL *partials,
                             const uint partials_off, const int n) {
    __local REAL scratch[LWG];
    g += g_off;
    partials += partials_off;
    const int groups = get_num_groups(0);
    const int k = get_group_id(0);
    REAL acc = (REAL)0;
#if LWG > 1
    for (int i = get_global_id(0); i < n; i += groups * LWG) {
        acc += g[i] * g[i];
    }
#else
    const int chunk = (n + groups - 1) / groups;
    const int end = min(n, (k + 1) * chunk);
    for (int i = k * chunk; i < end; ++i) {
        acc += g[i] * g[i];
    }
#endif
    acc = nn_group_sum(acc, scratch);
    if (get_local_id(0) == 0) {
        partials[k] = acc;
    }
}

/* Items stride over g like sumsq_partials does (same launch shape). */
__kernel void clip_by_norm(__global REAL *g, const uint g_off, __global const REAL *partials,
                           const uint partials_off, const int parts, const int n, const REAL max_norm) {
    g += g_off;
    partials += partials_off;
    REAL total = (REAL)0;
    for (int k = 0; k < parts; ++k) {
        total += partials[k];
    }
    const REAL norm = sqrt(total);
    if (!(norm > max_norm)) {
        return;
    }
    const REAL scale = max_norm / norm;
    const int items = get_global_size(0);
#if LWG > 1
    for (int i = get_global_id(0); i < n; i += items) {
        g[i] *= scale;
    }
#else
    const int chunk = (n + items - 1) / items;
    const int end = min(n, ((int)get_global_id(0) + 1) * chunk);
    for (int i = get_global_id(0) * chunk; i < end; ++i) {
        g[i] *= scale;
    }
#endif
}
