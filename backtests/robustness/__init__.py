"""Is the edge real? Monte Carlo of a finished run, permutation tests of an EA, the Deflated Sharpe Ratio,
the Probability of Backtest Overfitting and the SPA test of an optimisation, and confidence intervals and
tests of predictions against their baselines.

Names are imported on first use (PEP 562): ``backtests.optimize`` uses the optimisation statistics, and
the permutation test runs on the optimisation engine, so an eager import would go round in a circle.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Robustness": "backtests.robustness.analysis",
    "analyze": "backtests.robustness.analysis",
    "analyze_report": "backtests.robustness.analysis",
    "RobustnessError": "backtests.robustness.errors",
    "MonteCarloPlan": ("backtests.robustness.montecarlo", "Plan"),
    "MonteCarloRun": ("backtests.robustness.montecarlo", "Run"),
    "monte_carlo": "backtests.robustness.montecarlo",
    "PermutationJob": ("backtests.robustness.permutation", "Job"),
    "PermutationTest": "backtests.robustness.permutation",
    "permutation_test": "backtests.robustness.permutation",
    "permute_candles": "backtests.robustness.permute",
    "deflated_sharpe": "backtests.robustness.sharpe",
    "probabilistic_sharpe": "backtests.robustness.sharpe",
    "expected_max_sharpe": "backtests.robustness.sharpe",
    "probability_of_overfitting": "backtests.robustness.pbo",
    "data_snooping": "backtests.robustness.snooping",
    "stationary_indices": "backtests.robustness.bootstrap",
    "mcnemar": "backtests.robustness.compare",
    "diebold_mariano": "backtests.robustness.compare",
    "prediction_robustness": "backtests.robustness.predictions",
    "optimisation_robustness": "backtests.robustness.optimisation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'backtests.robustness' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
