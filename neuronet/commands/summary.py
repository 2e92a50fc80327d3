"""The console summary of ``run``/``backtest``: what trained where, the predictions against every
baseline the report holds, the trading figures and the timings."""

from __future__ import annotations

from pathlib import Path

import typer

from backtests import Result
from backtests.page import history_quality
from backtests.report import training_outcome


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def print_summary(result: Result, page: Path, trained_on: str | None = None, robustness=None) -> None:
    """The console lines after a run: training, predictions against the baselines, trading, timings, and
    the robustness analysis when there is one."""
    s = result.stats
    if result.training:
        wall = [r["wall_s"] for r in result.training]
        dev = [r["device_s"] for r in result.training if r.get("device_s") is not None]
        device = f", device {sum(dev):.2f} s" if dev else ""
        per_epoch = sum(wall) / len(wall)
        typer.echo(
            f"training: {len(wall)} epochs in {sum(wall):.2f} s ({per_epoch:.3f} s/epoch{device}), "
            f"final loss {_num(result.training[-1]['loss'])}"
            + (f", on {trained_on}" if trained_on else "")
            + (f"; {outcome}" if (outcome := training_outcome(result.training)) else "")
        )
    pred = result.predictions
    if pred is not None:
        m, base = pred["model"], pred["baselines"]
        first = str(pred["classes"][0]).replace("_", " ")  # the "no signal" class the constant baseline says
        names = {"always_undefined": f"always {first}"}
        others = ", ".join(
            f"{names.get(k, k.replace('_', ' '))} {_pct(b['balanced_accuracy'])}" for k, b in base.items()
        )
        line = f"predictions on {pred['bars']} forward bars: "
        line += f"balanced accuracy {_pct(m['balanced_accuracy'])} ({others})"
        if "undefined" in pred["classes"]:  # the fractal classifier's own figures
            line += (
                f"; hit rate {_pct(m['hit_rate'])} (prior random {_pct(base['prior_random']['hit_rate'])}); "
                f"missed fractals {_pct(m['missed_rate'])}"
            )
        typer.echo(line)
    pf = s["profit_factor"]
    typer.echo(
        f"trading: net profit {s['total_net_profit']:.2f} {result.account['currency']}, "
        f"{s['total_trades']} trades, "
        f"profit factor {'n/a' if pf is None else f'{pf:.2f}'}, max equity drawdown "
        f"{s['equity_drawdown_relative_pct']:.2f}%, buy & hold {s['buy_and_hold_return_pct']:.2f}%"
    )
    stopped = int((result.trades["exit_reason"] == "stop out").sum()) if len(result.trades) else 0
    if stopped or result.rejected:
        reasons = sorted({r["reason"] for r in result.rejected})
        typer.echo(
            f"account: {stopped} positions stopped out, {len(result.rejected)} orders rejected"
            + (f" ({'; '.join(reasons)})" if reasons else "")
        )
    if result.data.get("history_quality") is not None:
        typer.echo(f"model: {result.data['model_name']}, history quality {history_quality(result.data)}")
    if result.data.get("spread"):
        typer.echo(f"spread: {result.data['spread']}")
    t = result.timings
    if t:  # a report made from a live journal has no replay timings
        typer.echo("timings: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in t.items()))
    if robustness is not None:
        from neuronet.commands.robustness import print_robustness

        print_robustness(robustness.to_dict())
    if not result.complete:
        typer.echo("INCOMPLETE: interrupted; the report covers the bars replayed so far", err=True)
    typer.echo(f"report: {page}")
