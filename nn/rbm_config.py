"""An RBM's training parameters (spec dbn.md §6.5) with DEEP's defaults, and the range checks every DBN
parameter shares.

Each value outside its range raises ``DBNConfigError`` naming the field, so a caller with its own names for
the parameters (the command line's options) can say which of them to change; Python and the command line
accept exactly the same values.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from neuronet.errors import NeuronetError
from nn.rbm_ops import ADAPT_LR_MAX, ADAPT_LR_MIN, RECON_KINDS


class DBNConfigError(NeuronetError, ValueError):
    """A training parameter outside its range. ``field`` names the config field at fault, so a caller with
    its own names for the parameters (the command line's options) can say which of them to change."""

    def __init__(self, owner: str, field: str, value: object, rule: str) -> None:
        self.owner, self.field, self.value, self.rule = owner, field, value, rule
        super().__init__(f"{owner} parameter {field} = {value!r}: {rule}")


SEED_LIMIT = 2**32  # seeds are 0 .. 2**32 - 1: the device sampler hashes 32 bits of them (nn.random)
# Counts (tries, batches, chain lengths, epochs, iterations) are below 2**31, as every count the command line
# takes: more is a typing slip that would run for ever, not a setting (the book's largest are thousands).
COUNT_LIMIT = 2**31


def check_int(owner: str, name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high)`` (``high`` None: unbounded), or ``DBNConfigError``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise DBNConfigError(owner, name, value, "must be a whole number") from None
    if number < low:
        raise DBNConfigError(owner, name, value, f"must be at least {low}")
    if high is not None and number >= high:
        raise DBNConfigError(owner, name, value, f"must be below {high}")
    return number


def check_real(
    owner: str,
    name: str,
    value: object,
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
    rule: str = "",
) -> float:
    """``value`` as a finite ``float`` in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    below = number <= low if low_open else number < low
    if not math.isfinite(number) or below or number > high:
        if not rule and math.isfinite(high):
            rule = f"must be a finite number in {'(' if low_open else '['}{low:g}, {high:g}]"
        elif not rule:
            rule = f"must be a finite number {'>' if low_open else '>='} {low:g}"
        raise DBNConfigError(owner, name, value, rule)
    return number


def check_bool(owner: str, name: str, value: object) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise DBNConfigError(owner, name, value, "must be true or false")
    return bool(value)


@dataclass(frozen=True)
class RBMConfig:
    """Training parameters with DEEP's defaults (spec §6.5), convergence tests included: training stops when
    the increment ratio has not reached a new low for ``max_no_improvement`` epochs (the book's primary
    test), or falls below ``convergence_crit`` (secondary), or after ``max_epochs`` (a backstop only)."""

    n_hidden: int
    n_rand: int = 50  # initial random tries
    n_batches: int = 24
    chain_start: int = 1
    chain_end: int = 4
    chain_rate: float = 0.005
    learning_rate: float = 0.05
    momentum_start: float = 0.1
    momentum_end: float = 0.9
    weight_penalty: float = 1e-4
    sparsity_penalty: float = 1e-3
    sparsity_target: float = 0.1
    convergence_crit: float = 1e-5
    max_no_improvement: int = 500
    max_epochs: int = 10000
    mean_field: bool = True  # visible reconstruction as probabilities (else sampled)
    recon: str = "mse"  # reconstruction error measure: "mse" or "ce"
    direct_error: bool = False  # monitor the direct (mean-field) error instead of the fast one
    seed: int = 1

    def __post_init__(self) -> None:
        own = "RBM"
        ints = {
            "n_hidden": 1,
            "n_rand": 1,
            "n_batches": 1,
            "chain_start": 1,
            "chain_end": 1,
            "max_epochs": 1,
            "max_no_improvement": 0,
        }
        for name, low in ints.items():
            object.__setattr__(self, name, check_int(own, name, getattr(self, name), low, COUNT_LIMIT))
        object.__setattr__(self, "seed", check_int(own, "seed", self.seed, 0, SEED_LIMIT))
        for name in ("chain_rate", "momentum_start", "momentum_end", "sparsity_target"):
            object.__setattr__(self, name, check_real(own, name, getattr(self, name), 0.0, 1.0))
        lr_rule = (
            f"must be a finite number in (0, {ADAPT_LR_MAX:g}] (the adaptation keeps it within "
            f"[{ADAPT_LR_MIN:g}, {ADAPT_LR_MAX:g}])"
        )
        object.__setattr__(
            self,
            "learning_rate",
            check_real(
                own, "learning_rate", self.learning_rate, 0.0, ADAPT_LR_MAX, low_open=True, rule=lr_rule
            ),
        )
        for name in ("weight_penalty", "sparsity_penalty"):  # "small" (the book): above 1 they blow up
            object.__setattr__(self, name, check_real(own, name, getattr(self, name), 0.0, 1.0))
        for name in ("convergence_crit",):
            object.__setattr__(self, name, check_real(own, name, getattr(self, name), 0.0))
        for name in ("mean_field", "direct_error"):
            object.__setattr__(self, name, check_bool(own, name, getattr(self, name)))
        if self.recon not in RECON_KINDS:
            raise DBNConfigError(own, "recon", self.recon, f"must be one of {', '.join(RECON_KINDS)}")
