"""Optimisation criteria: MetaTrader's choices, read from a pass's final statistics.

Each criterion names the ``backtests.metrics.trade_stats`` field it reads and whether higher is better.
``custom`` is the EA's ``on_tester(stats)`` value (MetaTrader's "Custom max"). A pass whose figure is
undefined (no trades for a drawdown, no losing trade for the profit factor) ranks last.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from backtests.optimize.errors import OptimizeError


@dataclass(frozen=True)
class Criterion:
    name: str
    field: str | None  # trade_stats key; None = the EA's on_tester value
    maximize: bool
    label: str

    @property
    def direction(self) -> str:
        return "maximize" if self.maximize else "minimize"

    def value(self, stats: dict, custom: float | None) -> float | None:
        """The pass's figure, or None where it is undefined."""
        if self.field is None:
            raw = custom
        elif not self.maximize and not stats.get("total_trades"):
            raw = None  # a pass that never trades has no drawdown and must not win "min drawdown"
        else:
            raw = stats.get(self.field)
        if raw is None or not math.isfinite(float(raw)):
            return None
        return float(raw)

    def worst(self) -> float:
        """What the sampler is told for an undefined figure: last in the ranking."""
        return -math.inf if self.maximize else math.inf

    def better(self, a: float | None, b: float | None) -> bool:
        """Whether ``a`` beats ``b`` (None never beats anything)."""
        if a is None:
            return False
        if b is None:
            return True
        return a > b if self.maximize else a < b


CRITERIA: dict[str, Criterion] = {
    c.name: c
    for c in (
        Criterion("balance", "final_balance", True, "Balance max"),
        Criterion("profit_factor", "profit_factor", True, "Profit factor max"),
        Criterion("sharpe", "sharpe_ratio", True, "Sharpe ratio max (per trade, as MetaTrader)"),
        Criterion("recovery_factor", "recovery_factor", True, "Recovery factor max"),
        Criterion("expected_payoff", "expected_payoff", True, "Expected payoff max"),
        Criterion("min_drawdown", "equity_drawdown_relative_pct", False, "Minimal equity drawdown %"),
        Criterion("custom", None, True, "Custom max (the EA's on_tester)"),
    )
}

# The figures kept for every pass in the results table (besides the criterion).
PASS_STATS = (
    "final_balance",
    "total_net_profit",
    "profit_factor",
    "expected_payoff",
    "recovery_factor",
    "sharpe_ratio",
    "equity_drawdown_relative_pct",
    "equity_drawdown_maximal",
    "total_trades",
    "return_ann_pct",
    "sharpe_ratio_ann",
)


def get_criterion(name: str) -> Criterion:
    """A criterion by name, with a suggestion for a misspelt one."""
    key = name.strip().lower().replace("-", "_")
    if key in CRITERIA:
        return CRITERIA[key]
    close = difflib.get_close_matches(key, list(CRITERIA), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise OptimizeError(f"unknown criterion {name!r}: {hint}choose from {', '.join(CRITERIA)}")
