"""The main job gives the same figures on every usable OpenCL device: pip's PoCL and Intel's CPU runtime
(and a GPU, where there is one) train the Fractal EA to the same trades and money, to the cent."""

from __future__ import annotations

import pytest

from backtests import Backtest
from datafeeds import load_candles
from strategies import FractalEA

from .conftest import USABLE

pytestmark = pytest.mark.slow


def test_the_fractal_run_is_the_same_on_every_device():
    if len(USABLE) < 2:
        pytest.skip("fewer than two usable OpenCL devices here: nothing to compare")
    figures = {}
    for d in USABLE:
        result = Backtest(load_candles(), FractalEA, forward="1/3").run(backend=f"opencl:{d.index}")
        stats = result.stats
        figures[f"{d.index} {d.name}"] = (
            stats["total_trades"],
            round(stats["total_net_profit"], 2),
            round(stats["profit_factor"], 2),
        )
    assert len(set(figures.values())) == 1, figures
