"""Supervised optimisers of DEEP (spec dbn.md §2): simulated-annealing starts, SVD output weights, and
Polak–Ribière conjugate gradients with an exact line search.

The book gives no line-search code: here the minimum along the direction is bracketed by golden-ratio
expansion and then located by Brent's method (parabolic steps with golden-section fallbacks). CG restarts
with the steepest-descent direction when γ < 0 (PR+) or when the direction is not downhill. Convergence:
relative change of the criterion below ``tol`` (§2.5), or ``max_iter`` line searches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

_GOLD = 1.618033988749895
_CGOLD = 0.3819660112501051
SVD_MAX_INPUTS = 400  # DEEP switches SVD off above this many output-layer inputs
SVD_CUTOFF = 1e-2  # singular values below this fraction of the largest are dropped


def svd_weights(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Least-squares ``(K, I + 1)`` output weights (bias last) of targets ``t (N, K)`` on ``a (N, I)``."""
    design = np.hstack([a, np.ones((a.shape[0], 1))])
    u, s, vt = np.linalg.svd(design, full_matrices=False)
    keep = s > SVD_CUTOFF * s[0] if s.size else s.astype(bool)
    inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    return ((vt.T * inv) @ (u.T @ t)).T


def _bracket(f: Callable[[float], float], f0: float, step: float):
    """Three points a < b < c (or reversed) with f(b) below both ends, starting at 0 and ``step``."""
    a, b = 0.0, step
    fa, fb = f0, f(b)
    if fb > fa:
        a, b, fa, fb = b, a, fb, fa
    c = b + _GOLD * (b - a)
    fc = f(c)
    for _ in range(60):
        if fc > fb:
            break
        a, b, fa, fb = b, c, fb, fc
        c = b + _GOLD * (b - a)
        fc = f(c)
    return a, b, c, fb


def line_minimum(f: Callable[[float], float], f0: float, step: float = 1.0, tol: float = 1e-8,
                 max_iter: int = 100) -> tuple[float, float]:
    """``(t*, f(t*))``: Brent's method on the bracket found from ``t = 0`` with value ``f0``."""
    a, b, c, fb = _bracket(f, f0, step)
    lo, hi = min(a, c), max(a, c)
    x = w = v = b
    fx = fw = fv = fb
    d = e = 0.0
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        tol1 = tol * abs(x) + 1e-12
        if abs(x - mid) <= 2.0 * tol1 - 0.5 * (hi - lo):
            break
        use_golden = True
        if abs(e) > tol1:  # try a parabola through x, w, v
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            if abs(p) < abs(0.5 * q * e) and q * (lo - x) < p < q * (hi - x):
                e, d = d, p / q
                u = x + d
                if u - lo < 2.0 * tol1 or hi - u < 2.0 * tol1:
                    d = tol1 if mid >= x else -tol1
                use_golden = False
        if use_golden:
            e = (lo - x) if x >= mid else (hi - x)
            d = _CGOLD * e
        u = x + (d if abs(d) >= tol1 else math.copysign(tol1, d))
        fu = f(u)
        if fu <= fx:
            if u >= x:
                lo = x
            else:
                hi = x
            v, w, x, fv, fw, fx = w, x, u, fw, fx, fu
        else:
            if u < x:
                lo = u
            else:
                hi = u
            if fu <= fw or w == x:
                v, w, fv, fw = w, u, fw, fu
            elif fu <= fv or v in (x, w):
                v, fv = u, fu
    return x, fx


@dataclass
class CGResult:
    x: np.ndarray
    value: float
    iterations: int
    points: list[np.ndarray] = field(default_factory=list)  # the point after each line search
    steps: list[float] = field(default_factory=list)  # t* of each line search along its direction


def conjugate_gradient(fg: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, *,
                       max_iter: int = 1000, tol: float = 5e-5,
                       on_iter: Callable[[int, float], None] | None = None,
                       f: Callable[[np.ndarray], float] | None = None) -> CGResult:
    """Minimise ``f`` (``fg(x) -> (f, ∇f)``) by Polak–Ribière CG with exact line searches.

    ``f`` (the value alone) makes the line searches skip the gradient they do not use."""
    value = f or (lambda p: fg(p)[0])
    x = np.array(x0, dtype=np.float64)
    fx, grad = fg(x)
    g = -grad
    h = g.copy()
    res = CGResult(x, fx, 0)
    for it in range(max_iter):
        hh = float(h @ h)
        if hh == 0.0:
            break
        scale = math.sqrt(float(x @ x) / x.size) if x.size else 1.0
        step = max(1e-3, min(1.0, scale)) / math.sqrt(hh)
        t, f_new = line_minimum(lambda s, x=x, h=h: value(x + s * h), fx, step)
        x = x + t * h
        res.points.append(x.copy())
        res.steps.append(t)
        f_prev, fx = fx, f_new
        res.iterations = it + 1
        if on_iter is not None:
            on_iter(it + 1, fx)
        fx, grad = fg(x)
        g_new = -grad
        if not fx < f_prev or abs(f_prev - fx) / max(abs(f_prev), 1e-30) < tol or not g_new.any():
            break
        gamma = float((g_new - g) @ g_new) / max(float(g @ g), 1e-300)
        h = g_new + max(gamma, 0.0) * h
        if float(h @ g_new) <= 0.0:
            h = g_new.copy()
        g = g_new
    res.x, res.value = x, fx
    return res


def anneal(evaluate: Callable[[np.ndarray], float], n: int, iters: int, rng_range: float,
           rng: np.random.Generator, fill: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Best of ``iters`` random weight vectors around a drifting centre (spec §2.1).

    ``fill`` may overwrite part of each candidate (the SVD output weights) before it is scored.
    """
    frac = 0.3 / max(iters, 1)
    center, spread = np.zeros(n), rng_range
    best, best_val = None, math.inf
    factors = {1: 10.0, 2: 4.0, 3: 0.1, 4: 0.25}
    for i in range(max(iters, 1)):
        w = center + spread * factors.get(i % 10, 1.0) * (2.0 * rng.uniform(size=n) - 1.0)
        if fill is not None:
            w = fill(w)
        val = evaluate(w)
        if best is None or val < best_val:
            best, best_val = w, val
        if i >= 100:
            center = (1.0 - frac) * center + frac * best
            spread *= 1.0 - frac
    return best
