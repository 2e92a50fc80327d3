"""Exact RBM quantities for tiny models (spec dbn.md §3.1), by enumerating every visible state.

Energy ``E(v, h) = −bᵀv − cᵀh − hᵀWv``; summing ``h`` out gives the free energy
``F(v) = −bᵀv − Σ_i log(1 + e^{c_i + W_i·v})`` and ``log P(v) = −F(v) − log Z`` with
``log Z = log Σ_v e^{−F(v)}`` (the book's Eq. 3-9 writes ΣΣP for Z; it is ΣΣe^{−E}). Feasible up to about
20 visible units; used to check training and to study small models.
"""

from __future__ import annotations

import itertools

import numpy as np

from nn.errors import NNConfigError

MAX_VISIBLE = 20


def all_states(n: int) -> np.ndarray:
    """Every 0/1 vector of length ``n`` as rows ``(2^n, n)``."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n)))


def free_energy(v: np.ndarray, w: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``F(v)`` for each row of ``v (N, V)``."""
    return -(v @ b) - np.logaddexp(0.0, v @ w.T + c).sum(axis=1)


def log_partition(w: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """``log Z``, enumerating the 2^V visible states."""
    if w.shape[1] > MAX_VISIBLE:
        raise NNConfigError(f"exact log Z enumerates 2^V states: V = {w.shape[1]} exceeds {MAX_VISIBLE}")
    neg = -free_energy(all_states(w.shape[1]), w, b, c)
    top = neg.max()
    return float(top + np.log(np.exp(neg - top).sum()))


def mean_log_likelihood(x: np.ndarray, w: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """Mean ``log P(x)`` over the rows of binary ``x``."""
    return float(np.mean(-free_energy(x, w, b, c)) - log_partition(w, b, c))
