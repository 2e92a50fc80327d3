"""Strategy optimisation (MetaTrader's Strategy Tester optimisation, forward test) and walk-forward analysis.

Samplers are Optuna's, the study store is Optuna's RDB storage (SQLite by default), passes run on Dask
distributed: local worker processes by default, any running cluster by address.
"""

from backtests.optimize.api import optimize
from backtests.optimize.criteria import CRITERIA, Criterion, get_criterion
from backtests.optimize.engine import Engine
from backtests.optimize.search import METHODS, Plan
from backtests.optimize.space import ParamSpace, SpaceError, parse_space
from backtests.optimize.walkforward import WalkForwardResult, walk_forward

__all__ = [
    "CRITERIA",
    "METHODS",
    "Criterion",
    "Engine",
    "ParamSpace",
    "Plan",
    "SpaceError",
    "WalkForwardResult",
    "get_criterion",
    "optimize",
    "parse_space",
    "walk_forward",
]
