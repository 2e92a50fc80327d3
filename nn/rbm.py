"""Bernoulli RBM training by contrastive divergence, after Masters' DEEP (spec dbn.md §3).

``train_rbm(backend, x, RBMConfig(...))`` runs the random-try initial-weight search (§3.5) and the SGD loop
(§3.6, §3.7) in the backend's ``rbm_*`` ops only: the data, the parameters, the momentum increments and even
the adaptive learning rate and momentum stay on the device; the host reads a few scalars once per epoch (log,
stopping tests, momentum creep, learning-rate caps). Same seed, backend and device give the same weights.

Decisions where the book is ambiguous or wrong (§8):
- The saturation penalty tests the smoothed on-fraction (the CUDA code), not the raw batch fraction.
- Data means are clamped to [1e-8, 1 − 1e-8] for the initial weights and for the sparsity term alike.
- The reconstruction error is either the fast one (first chain step, sampled hidden states) or the direct
  one (mean-field pass from the data); never both (the listing's ``#ifdef`` slip).
- A weight matrix of all zeros gives the increment ratio ``max_inc / 1e-30`` instead of a division by zero.
- The shuffle is NumPy's seeded permutation (a Fisher–Yates shuffle) and sampling uses the counter-based
  ``nn.random`` bits instead of Park–Miller: reproducible on every backend and device.
- When visible reconstruction is sampled (``mean_field=False``), the data term's hidden states are sampled
  too (§3.3 "Sampled"); with mean field both use probabilities.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from neuronet.errors import NeuronetError
from nn.errors import NNDataError
from nn.rbm_config import RBMConfig
from nn.rbm_ops import COSINE, HYPER, LEN2, LR, MAX_INC, MOMENTUM, RBMState

_LR_CAPS = ((250, 0.002), (200, 0.005), (150, 0.01), (100, 0.02), (50, 0.03))
_TRY_ELEMENTS = 1 << 23  # tries x cases x max(inputs, hidden) per call of the initial-weight search


class TrainingDivergedError(NeuronetError, FloatingPointError):
    """Training produced non-finite weights or criteria: the parameters (learning rate, penalties, ranges)
    drove it there, so the user can fix it; nothing non-finite is ever returned as a model."""


@dataclass(frozen=True)
class EpochLog:
    """One line of the training log (spec §6.7, §6.10)."""

    epoch: int
    recon_rms: float  # sqrt(mean error per case per input); for "ce" the mean cross entropy
    learning_rate: float
    momentum: float
    chain: int
    ratio: float  # max |w_inc| / max |w|
    cosine: float
    rms_gradient: float
    no_improvement: int
    seconds: float  # wall time of the epoch


@dataclass
class RBMFit:
    """A trained layer: host float64 ``w (H, V)``, ``b (V,)``, ``c (H,)`` and how training went."""

    w: np.ndarray
    b: np.ndarray
    c: np.ndarray
    initial_error: float  # RMS direct reconstruction error of the best random try
    history: list[EpochLog] = field(default_factory=list)
    stop_reason: str = ""


def data_means(x: np.ndarray) -> np.ndarray:
    """Column means clamped to [1e-8, 1 − 1e-8] (spec §3.5)."""
    return np.clip(x.mean(axis=0, dtype=np.float64), 1e-8, 1.0 - 1e-8)


def check_unit_interval(x: np.ndarray, what: str = "RBM input") -> np.ndarray:
    """A 2-D floating array (float32 kept, anything else float64) of values in [0, 1], or a one-line error."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        x = x.astype(np.float64, copy=False)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise NNDataError(f"{what} must be a non-empty (cases, inputs) matrix, got shape {x.shape}")
    low, high = x.min(), x.max()  # NaN propagates into both
    if not (low >= 0.0 and high <= 1.0):
        bad = ~np.isfinite(x) | (x < 0.0) | (x > 1.0)
        r, c = np.argwhere(bad)[0]
        raise NNDataError(f"{what} must lie in [0, 1]: row {r}, column {c} holds {x[r, c]}")
    return x


def random_tries(seeds: np.ndarray, n_hidden: int, means: np.ndarray):
    """One candidate (w, b, c) of spec §3.5 per seed, stacked: ``(T, H, V)``, ``(T, V)``, ``(T, H)``.

    Each try draws from its own seeded stream, so how the tries are grouped never changes them."""
    nv = means.size
    w = np.empty((len(seeds), n_hidden, nv))
    for k, seed in enumerate(seeds):
        r = np.random.default_rng(int(seed))
        scale = 4.0 * r.uniform() / math.sqrt(math.sqrt(nv * n_hidden))
        w[k] = scale * (r.uniform(size=(n_hidden, nv)) - 0.5)
    c = -w @ means  # zero net input for the average case (Eq. 3-18)
    b = np.log(means / (1.0 - means)) - 0.5 * w.sum(axis=1)  # Eq. 3-20 with q = 0.5
    return w, b, c


def initial_weights(be, x_dev, means: np.ndarray, n_hidden: int, n_rand: int, rng: np.random.Generator):
    """Best of ``n_rand`` random tries by direct reconstruction error; each group of tries is one batched
    computation (``backend.rbm_try_errors``). Returns ``(w, b, c, rms error)``."""
    n, nv = x_dev.shape
    per_group = max(1, min(n_rand, _TRY_ELEMENTS // (n_hidden * nv)))
    best = (math.inf, None)
    done = 0
    while done < n_rand:
        t = min(per_group, n_rand - done)
        # each group draws its own seeds: the same stream as all at once, without an (n_rand,) array
        w, b, c = random_tries(rng.integers(0, 2**63, size=t), n_hidden, means)
        wd, bd, cd = be.asarray(w), be.asarray(b), be.asarray(c)
        chunk = max(1, _TRY_ELEMENTS // (t * max(nv, n_hidden)))
        total = be.zeros((t,))
        for start in range(0, n, chunk):
            be.add_(total, be.rbm_try_errors(x_dev[start : start + chunk], wd, bd, cd))
        errors = be.to_numpy(total)
        k = int(np.argmin(errors))  # first of equal minima: strict < across groups too
        if errors[k] < best[0]:
            best = (float(errors[k]), (w[k], b[k], c[k]))
        done += t
    w, b, c = best[1]
    return w, b, c, math.sqrt(max(best[0], 0.0) / (n * nv))


def _batch_bounds(n: int, n_batches: int) -> list[tuple[int, int]]:
    """Batch b takes (n − done)/(n_batches − b) cases (spec §3.6): sizes differ by at most one."""
    bounds, done = [], 0
    for k in range(n_batches):
        size = (n - done) // (n_batches - k)
        bounds.append((done, done + size))
        done += size
    return bounds


def epoch_schedule(lr: float, momentum: float, chain: float, no_imp: int, cfg: RBMConfig):
    """End-of-epoch updates (spec §3.6): momentum creeps toward its end value, the chain length toward its
    end value (rounded when used), and the learning rate is capped after long stalls."""
    momentum = 0.99 * momentum + 0.01 * cfg.momentum_end
    chain = (1.0 - cfg.chain_rate) * chain + cfg.chain_rate * cfg.chain_end
    for after, cap in _LR_CAPS:
        if no_imp > after:
            lr = min(lr, cap)
            break
    return lr, momentum, chain


def cd_chain(be, st: RBMState, v1, q1, k: int, mean_field: bool, seed: int, counter: int):
    """The CD-k chain of spec §3.3 from data ``v1`` with ``q1 = P(h | v1)``.

    Hidden states inside the chain are always sampled; the visible side is ``p`` (mean field) or a sample of
    it. Returns ``(h_data, v2, q2, p1, counter)``: the data term's hidden quantity (``q1``, or a sample of it
    when not mean field), the chain's last visible state and hidden probabilities, the first step's
    reconstruction ``p1`` (for the fast error) and the next unused random counter.
    """
    q2, p1, v2 = q1, None, v1
    for step in range(k):
        h, counter = be.rbm_sample(q2, seed, counter), counter + 1
        p = be.rbm_visible_probs(h, st.w, st.b)
        if step == 0:
            p1 = p
        if mean_field:
            v2 = p
        else:
            v2, counter = be.rbm_sample(p, seed, counter), counter + 1
        q2 = be.rbm_hidden_probs(v2, st.w, st.c)
    h_data = q1
    if not mean_field:
        h_data, counter = be.rbm_sample(q1, seed, counter), counter + 1
    return h_data, v2, q2, p1, counter


def train_rbm(
    be,
    x: np.ndarray,
    config: RBMConfig,
    *,
    sample_input: bool = False,
    on_epoch: Callable[[EpochLog], None] | None = None,
) -> RBMFit:
    """Train one RBM on ``x (N, V)`` in [0, 1] with ``backend`` ``be``.

    ``sample_input`` re-samples the input batch 0/1 from its values each batch (greedy training of upper
    layers with "greedy mean field" off, spec §5.1). ``on_epoch`` receives each epoch's log line.
    """
    x = check_unit_interval(x)
    n, nv = x.shape
    cfg = config
    n_batches = min(cfg.n_batches, n)
    rng = np.random.default_rng(cfg.seed)
    means = data_means(x)
    x_dev = be.asarray(x)
    w, b, c, init_rms = initial_weights(be, x_dev, means, cfg.n_hidden, cfg.n_rand, rng)
    hyper = np.zeros(HYPER)
    hyper[LR], hyper[MOMENTUM] = cfg.learning_rate, cfg.momentum_start
    nh = cfg.n_hidden
    st = RBMState(
        w=be.asarray(w),
        b=be.asarray(b),
        c=be.asarray(c),
        w_inc=be.zeros((nh, nv)),
        b_inc=be.zeros((nv,)),
        c_inc=be.zeros((nh,)),
        on_frac=be.asarray(np.full(nh, 0.5)),
        g_prev=be.zeros((nh, nv)),
        hyper=be.asarray(hyper),
    )
    xm = be.asarray(means)
    order = be.asarray(np.arange(n, dtype=np.int32))
    batches = [order[lo:hi] for lo, hi in _batch_bounds(n, n_batches)]
    fit = RBMFit(w, b, c, init_rms)
    counter = 0
    chain = float(cfg.chain_start)
    best_ratio, no_imp = math.inf, 0
    for epoch in range(cfg.max_epochs):
        t0 = time.perf_counter()
        be.copy_(order, be.asarray(rng.permutation(n).astype(np.int32)))
        k_chain = int(chain + 0.5)
        err = be.zeros((1,))
        for rows in batches:
            v1 = be.gather_rows(x_dev, rows)
            if sample_input:
                v1, counter = be.rbm_sample(v1, cfg.seed, counter), counter + 1
            q1 = be.rbm_hidden_probs(v1, st.w, st.c)
            if cfg.direct_error:
                be.add_(err, be.rbm_recon_error(v1, be.rbm_visible_probs(q1, st.w, st.b), cfg.recon))
            h_data, v2, q2, p1, counter = cd_chain(be, st, v1, q1, k_chain, cfg.mean_field, cfg.seed, counter)
            if not cfg.direct_error:
                be.add_(err, be.rbm_recon_error(v1, p1, cfg.recon))
            be.rbm_update(
                st,
                v1,
                h_data,
                q1,
                v2,
                q2,
                xm,
                weight_penalty=cfg.weight_penalty,
                sparsity_penalty=cfg.sparsity_penalty,
                sparsity_target=cfg.sparsity_target,
            )
        # epoch end: the only host reads of the loop
        total = float(be.to_numpy(err)[0]) / (n * nv)
        hy = be.to_numpy(st.hyper).astype(np.float64)
        max_w = float(be.to_numpy(be.rbm_max_abs(st.w))[0])
        ratio = hy[MAX_INC] / max(max_w, 1e-30)
        if epoch == 0 or ratio < best_ratio:
            best_ratio, no_imp = ratio, 0
        else:
            no_imp += 1
        line = EpochLog(
            epoch + 1,
            math.sqrt(total) if cfg.recon == "mse" else total,
            float(hy[LR]),
            float(hy[MOMENTUM]),
            k_chain,
            ratio,
            float(hy[COSINE]),
            math.sqrt(hy[LEN2] / (nh * nv)),
            no_imp,
            time.perf_counter() - t0,
        )
        fit.history.append(line)
        if on_epoch is not None:
            on_epoch(line)
        if not math.isfinite(total) or not math.isfinite(ratio):
            fit.stop_reason = f"diverged at epoch {epoch + 1} (non-finite error or weights)"
            break
        if ratio < cfg.convergence_crit:
            fit.stop_reason = f"increment ratio {ratio:.3g} below {cfg.convergence_crit:g}"
            break
        if no_imp > cfg.max_no_improvement:
            fit.stop_reason = f"{no_imp} epochs without a lower increment ratio"
            break
        hy[LR], hy[MOMENTUM], chain = epoch_schedule(hy[LR], hy[MOMENTUM], chain, no_imp, cfg)
        hy[MAX_INC] = 0.0
        be.copy_(st.hyper, be.asarray(hy))
    else:
        fit.stop_reason = f"max_epochs ({cfg.max_epochs}) reached"
    fit.w, fit.b, fit.c = (be.to_numpy(t).astype(np.float64) for t in (st.w, st.b, st.c))
    if not fit.stop_reason.startswith("diverged") and not all(
        np.isfinite(a).all() for a in (fit.w, fit.b, fit.c)
    ):
        fit.stop_reason = f"diverged by epoch {len(fit.history)} (non-finite biases)"
    return fit
