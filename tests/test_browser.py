"""Each kind of report page in a real headless Chromium, offline: it loads without a console error, every
plot paints its canvas, and hovering a trade shows its ticket.

``NEURONET_SCREENSHOTS=docs`` also saves a screenshot of each page there (the README's pictures).
"""

import os
from pathlib import Path

import pytest
from browser import browser

from backtests import Backtest
from backtests.compare import compare_page, read_report
from backtests.optimize import optimize, walk_forward
from backtests.optimize.report import write_report as write_optimisation
from backtests.report import write_report
from backtests.robustness import analyze
from backtests.robustness.analysis import Options
from datafeeds import read_sample
from datafeeds.files import atomic_write_text
from strategies import ForecastEA, FractalEA, SmaCrossEA

pytestmark = pytest.mark.slow  # a browser start and a page load each take seconds


def _shot(page, name: str) -> None:
    folder = os.environ.get("NEURONET_SCREENSHOTS")
    if folder:
        first = '[data-chart="forecast_vs_actual"]' if name == "report-forecast" else ".chart"
        page.page.evaluate(  # that chart at the top, else the page's top
            "(s) => { const c = document.querySelector(s); c ? c.scrollIntoView() : scrollTo(0, 0); }", first
        )
        page.page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pages")
    df = read_sample().iloc[:1200]
    bt = Backtest(df, SmaCrossEA)
    sma = bt.run(sl_points=150, tp_points=300)
    rob = analyze(sma, bt, Options(monte_carlo=200, seed=1), workers=0)
    sma12 = Backtest(df, SmaCrossEA).run(fast=12, slow=30, sl_points=150, tp_points=300)
    tiny = {"hidden": "12", "epochs": 2, "backend": "numpy", "batch_size": 64, "validation": 0}
    fractal = Backtest(read_sample(spread=10).iloc[:900], FractalEA, seed=7).run(**tiny)
    small = {
        "seq_len": 32,
        "pred_len": 8,
        "d_model": 8,
        "n_heads": 2,
        "d_ff": 16,
        "epochs": 1,
        "batch_size": 32,
    }
    forecast = Backtest(read_sample(spread=10).iloc[:600], ForecastEA, seed=1).run(backend="numpy", **small)
    out = {
        "report": write_report(sma, root / "sma", robustness=rob),
        "report-classifier": write_report(fractal, root / "fractal"),
        "report-forecast": write_report(forecast, root / "forecast"),
        "plot": root / "plot.html",
        "compare": root / "compare.html",
    }
    write_report(sma12, root / "sma12")
    sma.plot(out["plot"], show=False)
    atomic_write_text(out["compare"], compare_page([read_report(root / "sma"), read_report(root / "sma12")]))
    space = {"fast": "5:15:5", "slow": "20:40:10"}
    table = optimize(df, SmaCrossEA, space, method="grid", workers=0, store_path=str(root / "o.db"))
    out["optimisation"] = write_optimisation(root / "opt", table, ["fast", "slow"], {"ea": "SmaCrossEA"})
    wf = walk_forward(df, SmaCrossEA, space, 400, 200, workers=0, store_path=str(root / "wf.db"))
    last = wf.passes[wf.passes["window"] == wf.passes["window"].max()]  # as neuronet optimize shows it
    info = {"ea": "SmaCrossEA", "currency": "USD"}
    out["walk-forward"] = write_optimisation(root / "wf", last, ["fast", "slow"], info, wf=wf)
    out["trades"] = sma.trades
    return out


@pytest.mark.parametrize(
    "kind",
    ["report", "report-classifier", "report-forecast", "plot", "compare", "optimisation", "walk-forward"],
)
def test_the_page_loads_offline_and_every_plot_paints(pages, kind):
    with browser() as page:
        page.open(pages[kind])
        painted = page.painted()
        _shot(page, kind)
        assert not page.errors, page.errors
    assert painted and all(n > 0 for _, n in painted), painted
    names = {name for name, _ in painted}
    want = {
        "report": {"price", "equity", "drawdown", "fan_trades", "fan_returns"},
        "plot": {"price", "equity", "drawdown"},
        "report-forecast": {"price", "horizon_error", "harmonic_weight", "forecast_example"},
        "optimisation": {"heatmap", "parallel"},
        "walk-forward": {"oos_equity", "is_vs_oos"},
    }
    assert want.get(kind, set()) <= names, names


@pytest.mark.parametrize("kind", ["report", "plot"])
@pytest.mark.parametrize("glyph", ["entries", "exits"])
def test_hovering_a_trade_shows_its_ticket(pages, kind, glyph):
    trades = pages["trades"]
    row = len(trades) // 2
    with browser() as page:
        page.open(pages[kind])
        ticket, tips = page.hover("price", glyph, row)
        assert not page.errors, page.errors
    assert ticket == int(trades["ticket"].iloc[row])
    assert any(f"#{ticket} " in tip for tip in tips), tips
