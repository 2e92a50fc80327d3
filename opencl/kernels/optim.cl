/* Optimizer updates: one launch over the model's whole flat parameter buffer w (n,) with its gradient g
 * and state buffers. Textbook rules (see nn.backend), descent convention w -= step(g). Regularisation is
 * folded into the gradient first: g' = g + l1 * sign(w) + l2 * w (sign(0) = 0).
 *
 * Each work-item updates VEC consecutive elements as one REALV vector (nn_common.h: -D VEC=8 on CPU
 * devices, where PoCL does not vectorise these bodies across work-items; VEC=1 on GPUs, one element per
 * item). */
#include "nn_common.h"

__kernel void sgd_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                         const int n, const REAL lr, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        store_v(w, i, n, wi - lr * nn_reg_grad(load_v(g, i, n), wi, l1, l2));
    }
}

/* v = mu v + g'; w -= lr v, or with Nesterov w -= lr (g' + mu v). */
__kernel void momentum_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                              __global REAL *v, const uint v_off, const int n, const REAL lr, const REAL mu,
                              const int nesterov, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    v += v_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        const REALV gi = nn_reg_grad(load_v(g, i, n), wi, l1, l2);
        const REALV vi = mu * load_v(v, i, n) + gi;
        store_v(v, i, n, vi);
        store_v(w, i, n, wi - lr * (nesterov ? gi + mu * vi : vi));
    }
}

/* G += g'^2; w -= lr g' / (sqrt(G) + eps). */
__kernel void adagrad_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                             __global REAL *acc, const uint acc_off, const int n, const REAL lr,
                             const REAL eps, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    acc += acc_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        const REALV gi = nn_reg_grad(load_v(g, i, n), wi, l1, l2);
        const REALV a = load_v(acc, i, n) + gi * gi;
        store_v(acc, i, n, a);
        store_v(w, i, n, wi - lr * gi / (sqrt(a) + eps));
    }
}

/* s = rho s + (1 - rho) g'^2; w -= lr g' / (sqrt(s) + eps). */
__kernel void rmsprop_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                             __global REAL *acc, const uint acc_off, const int n, const REAL lr,
                             const REAL rho, const REAL eps, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    acc += acc_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        const REALV gi = nn_reg_grad(load_v(g, i, n), wi, l1, l2);
        const REALV s = rho * load_v(acc, i, n) + ((REAL)1 - rho) * gi * gi;
        store_v(acc, i, n, s);
        store_v(w, i, n, wi - lr * gi / (sqrt(s) + eps));
    }
}

/* Zeiler 2012: E[g^2] = rho E[g^2] + (1 - rho) g'^2; delta = -sqrt(E[d^2] + eps) / sqrt(E[g^2] + eps) g';
 * E[d^2] = rho E[d^2] + (1 - rho) delta^2; w += lr delta. */
__kernel void adadelta_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                              __global REAL *acc_grad, const uint acc_grad_off, __global REAL *acc_delta,
                              const uint acc_delta_off, const int n, const REAL lr, const REAL rho,
                              const REAL eps, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    acc_grad += acc_grad_off;
    acc_delta += acc_delta_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        const REALV gi = nn_reg_grad(load_v(g, i, n), wi, l1, l2);
        const REALV eg = rho * load_v(acc_grad, i, n) + ((REAL)1 - rho) * gi * gi;
        const REALV ed = load_v(acc_delta, i, n);
        const REALV delta = -sqrt(ed + eps) / sqrt(eg + eps) * gi;
        store_v(acc_grad, i, n, eg);
        store_v(acc_delta, i, n, rho * ed + ((REAL)1 - rho) * delta * delta);
        store_v(w, i, n, wi + lr * delta);
    }
}

/* Kingma & Ba 2015: m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
 * w -= lr (m c1) / (sqrt(v c2) + eps) with the bias corrections c1 = 1 / (1 - b1^t), c2 = 1 / (1 - b2^t)
 * computed on the host from the step t (a per-call scalar, no device state). */
__kernel void adam_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                          __global REAL *m, const uint m_off, __global REAL *v, const uint v_off, const int n,
                          const REAL lr, const REAL beta1, const REAL beta2, const REAL eps, const REAL c1,
                          const REAL c2, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    m += m_off;
    v += v_off;
    const int i = get_global_id(0) * VEC;
    if (i < n) {
        const REALV wi = load_v(w, i, n);
        REALV mi = load_v(m, i, n);
        REALV vi = load_v(v, i, n);
        const REALV wn = nn_adam_step(wi, nn_reg_grad(load_v(g, i, n), wi, l1, l2), &mi, &vi, lr, beta1,
                                      beta2, eps, c1, c2);
        store_v(m, i, n, mi);
        store_v(v, i, n, vi);
        store_v(w, i, n, wn);
    }
}
