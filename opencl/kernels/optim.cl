/* Optimizer updates: one launch over the model's whole flat parameter buffer w (n,) with its gradient g
 * and state buffers. Textbook rules (see nn.backend), descent convention w -= step(g). Regularisation is
 * folded into the gradient first: g' = g + l1 * sign(w) + l2 * w (sign(0) = 0). */
#include "nn_common.h"

inline REAL reg_grad(REAL g, REAL w, REAL l1, REAL l2) {
    REAL r = g + l2 * w;
    if (l1 != (REAL)0) { /* uniform branch: the sign costs as much as the rest of the update */
        r += l1 * (w > (REAL)0 ? (REAL)1 : (w < (REAL)0 ? (REAL)-1 : (REAL)0));
    }
    return r;
}

__kernel void sgd_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                         const int n, const REAL lr, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        w[i] = wi - lr * reg_grad(g[i], wi, l1, l2);
    }
}

/* v = mu v + g'; w -= lr v, or with Nesterov w -= lr (g' + mu v). */
__kernel void momentum_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                              __global REAL *v, const uint v_off, const int n, const REAL lr, const REAL mu,
                              const int nesterov, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    v += v_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        const REAL gi = reg_grad(g[i], wi, l1, l2);
        const REAL vi = mu * v[i] + gi;
        v[i] = vi;
        w[i] = wi - lr * (nesterov ? gi + mu * vi : vi);
    }
}

/* G += g'^2; w -= lr g' / (sqrt(G) + eps). */
__kernel void adagrad_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                             __global REAL *acc, const uint acc_off, const int n, const REAL lr,
                             const REAL eps, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    acc += acc_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        const REAL gi = reg_grad(g[i], wi, l1, l2);
        const REAL a = acc[i] + gi * gi;
        acc[i] = a;
        w[i] = wi - lr * gi / (sqrt(a) + eps);
    }
}

/* s = rho s + (1 - rho) g'^2; w -= lr g' / (sqrt(s) + eps). */
__kernel void rmsprop_update(__global REAL *w, const uint w_off, __global const REAL *g, const uint g_off,
                             __global REAL *acc, const uint acc_off, const int n, const REAL lr,
                             const REAL rho, const REAL eps, const REAL l1, const REAL l2) {
    w += w_off;
    g += g_off;
    acc += acc_off;
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        const REAL gi = reg_grad(g[i], wi, l1, l2);
        const REAL s = rho * acc[i] + ((REAL)1 - rho) * gi * gi;
        acc[i] = s;
        w[i] = wi - lr * gi / (sqrt(s) + eps);
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
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        const REAL gi = reg_grad(g[i], wi, l1, l2);
        const REAL eg = rho * acc_grad[i] + ((REAL)1 - rho) * gi * gi;
        const REAL ed = acc_delta[i];
        const REAL delta = -sqrt(ed + eps) / sqrt(eg + eps) * gi;
        acc_grad[i] = eg;
        acc_delta[i] = rho * ed + ((REAL)1 - rho) * delta * delta;
        w[i] = wi + lr * delta;
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
    const int i = get_global_id(0);
    if (i < n) {
        const REAL wi = w[i];
        const REAL gi = reg_grad(g[i], wi, l1, l2);
        const REAL mi = beta1 * m[i] + ((REAL)1 - beta1) * gi;
        const REAL vi = beta2 * v[i] + ((REAL)1 - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi - lr * (mi * c1) / (sqrt(vi * c2) + eps);
    }
}
