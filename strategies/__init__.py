"""Expert advisors: the base class users subclass, indicators with MetaTrader's definitions, built-in EAs."""

from strategies.bars import BarFeed, Bars, Line
from strategies.base import Account, ExpertAdvisor, Order, Position, ReportSection, Tick, call_hook
from strategies.basket_spread import BasketSpreadEA
from strategies.errors import EAError, EARuntimeError
from strategies.forecast import ForecastEA
from strategies.fractal import FractalEA
from strategies.onnx_ea import OnnxEA
from strategies.sma import SmaCrossEA
from strategies.trend_filter import TrendFilterEA

# Built-in EAs by the names the command line accepts (class name or short alias, case-insensitive).
BUILTIN: dict[str, type[ExpertAdvisor]] = {
    "fractalea": FractalEA,
    "fractal": FractalEA,
    "forecastea": ForecastEA,
    "forecast": ForecastEA,
    "smacrossea": SmaCrossEA,
    "sma": SmaCrossEA,
    "onnxea": OnnxEA,
    "onnx": OnnxEA,
    "trendfilterea": TrendFilterEA,
    "trend": TrendFilterEA,
    "basketspreadea": BasketSpreadEA,
    "basket": BasketSpreadEA,
}

__all__ = [
    "BUILTIN",
    "Account",
    "BarFeed",
    "Bars",
    "BasketSpreadEA",
    "EAError",
    "EARuntimeError",
    "ExpertAdvisor",
    "ForecastEA",
    "FractalEA",
    "Line",
    "OnnxEA",
    "Order",
    "Position",
    "ReportSection",
    "SmaCrossEA",
    "Tick",
    "TrendFilterEA",
    "call_hook",
]
