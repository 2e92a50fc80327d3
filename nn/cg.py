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
from typing import Any

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


def line_minimum(
    f: Callable[[float], float], f0: float, step: float = 1.0, tol: float = 1e-8, max_iter: int = 100
) -> tuple[float, float]:
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
    x: Any  # the minimum: a host array, or a backend tensor when CG ran on the backend
    value: float
    iterations: int
    points: list[np.ndarray] = field(default_factory=list)  # the point after each line search
    steps: list[float] = field(default_factory=list)  # t* of each line search along its direction


class HostSpace:
    """The vector operations of ``conjugate_gradient`` on host arrays (``nn.mlfn_device.BackendSpace``:
    the same on backend tensors)."""

    @staticmethod
    def axpby(alpha: float, x: np.ndarray, beta: float, y: np.ndarray) -> np.ndarray:
        return alpha * x + beta * y

    @staticmethod
    def dot(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.vdot(a, b))


def conjugate_gradient(
    fg: Callable[[Any], tuple[float, Any]],
    x0: Any,
    *,
    max_iter: int = 1000,
    tol: float = 5e-5,
    on_iter: Callable[[int, float], None] | None = None,
    f: Callable[[Any], float] | None = None,
    space: Any = None,
) -> CGResult:
    """Minimise ``f`` (``fg(x) -> (f, ∇f)``) by Polak–Ribière CG with exact line searches.

    ``f`` (the value alone) makes the line searches skip the gradient they do not use. Vectors are touched
    only through ``space`` (default ``HostSpace``): ``axpby`` forms trial points and directions, ``dot`` the
    scalars of Polak–Ribière, so with backend tensors and ``BackendSpace`` only scalars reach the host.
    ``points`` (the point after each line search) is recorded for host vectors only."""
    sp = space or HostSpace()
    value = f or (lambda p: fg(p)[0])
    x = np.array(x0, dtype=np.float64) if space is None else x0
    size = _size(x)
    fx, grad = fg(x)
    h = sp.axpby(-1.0, grad, 0.0, grad)  # steepest descent
    gg = sp.dot(grad, grad)
    res = CGResult(x, fx, 0)
    for it in range(max_iter):
        hh = sp.dot(h, h)
        if hh == 0.0 or not math.isfinite(hh):
            break
        scale = math.sqrt(sp.dot(x, x) / size) if size else 1.0
        step = max(1e-3, min(1.0, scale)) / math.sqrt(hh)
        t, f_new = line_minimum(lambda s, x=x, h=h: value(sp.axpby(1.0, x, s, h)), fx, step)
        x = sp.axpby(1.0, x, t, h)
        if isinstance(x, np.ndarray):
            res.points.append(x.copy())
        res.steps.append(t)
        f_prev, fx = fx, f_new
        res.iterations = it + 1
        if on_iter is not None:
            on_iter(it + 1, fx)
        fx, grad_new = fg(x)
        gg_new = sp.dot(grad_new, grad_new)
        if not fx < f_prev or abs(f_prev - fx) / max(abs(f_prev), 1e-30) < tol or gg_new == 0.0:
            break
        # γ = (g_new − g)·g_new / (g·g), with g = −∇f: the signs cancel
        gamma = (gg_new - sp.dot(grad, grad_new)) / max(gg, 1e-300)
        h = sp.axpby(-1.0, grad_new, max(gamma, 0.0), h)
        if sp.dot(h, grad_new) >= 0.0:  # not downhill: restart along −∇f
            h = sp.axpby(-1.0, grad_new, 0.0, grad_new)
        grad, gg = grad_new, gg_new
    res.x, res.value = x, fx
    return res


def _size(x: Any) -> int:
    return int(np.prod(x.shape))


def anneal(
    evaluate: Callable[[np.ndarray], float],
    n: int,
    iters: int,
    rng_range: float,
    rng: np.random.Generator,
    fill: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
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
