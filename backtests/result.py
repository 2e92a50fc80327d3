"""What ``Backtest(...).run()`` returns: a run's tables, figures and curves, short to print, rich in a
notebook, and one call from an interactive chart (``plot()``).

As backtesting.py's ``stats`` is a pandas Series, so is ``Result.stats`` (report.json's keys, in the order of
``backtests.statistics.TABLE``); ``trades``, ``orders``, ``deals`` and ``equity`` are DataFrames with their
times. Printing a result gives a summary of a few dozen lines, never the tables themselves.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from backtests import statistics
from strategies.base import ExpertAdvisor, ReportSection


class _OnRead:
    """A table of ``Result`` given as itself or as the function that builds it, built on its first read and
    kept: MetaTrader's orders and deals tables (a hundred thousand rows each at a million bars), the trades
    table and the curves of a million bars cost as much as the statistics, and a run read only for its
    statistics never builds them. ``empty`` makes the value of a table not given (an empty table of its own
    for each result, or None); ``required``: the field has no default (``dataclasses`` asks the class for
    one, and this refuses)."""

    def __init__(self, empty: Callable[[], pd.DataFrame | None] = pd.DataFrame, *, required: bool = False):
        self._empty, self._required = empty, required

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_table"

    def __get__(self, obj: object, owner: type | None = None) -> pd.DataFrame | _OnRead | None:
        if obj is None:
            if self._required:
                raise AttributeError(self._slot)  # no default: the field is required
            return self  # the dataclass's default: an empty table of its own for each result
        value = obj.__dict__.get(self._slot, self)
        if value is self:
            value = self._empty()
        elif callable(value):
            value = value()
        obj.__dict__[self._slot] = value
        return value

    def __set__(self, obj: object, value: pd.DataFrame | Callable[[], pd.DataFrame] | _OnRead | None) -> None:
        obj.__dict__[self._slot] = value


@dataclass
class Result:
    """Everything a run produced; ``backtests.report`` writes it to disk.

    ``equity`` is given as the equity at each forward bar's close, ``(F,)``, and kept as a DataFrame indexed
    by those bars' times: ``equity`` and ``balance`` at the close, ``equity_worst`` (every open position at
    its worst price of the bar), ``margin_level`` (%) and ``drawdown_pct`` (the equity at the close below its
    running peak, the deposit included, in %, as backtesting.py's ``DrawdownPct`` but in percent)."""

    ea: dict
    data: dict
    account: dict
    periods: dict
    trades: pd.DataFrame = _OnRead(required=True)  # the trades table (or what builds it on first read)
    time: pd.DatetimeIndex  # forward bars
    balance: np.ndarray  # (F,) at each forward bar's close
    equity: pd.DataFrame = _OnRead(required=True)  # given as (F,) arrays, or what builds the table
    stats: pd.Series
    predictions: dict | None
    training: list[dict]
    timings: dict
    rejected: list[dict]
    complete: bool
    seed: int
    custom_criterion: float | None = None
    chart_data: dict = field(default_factory=dict)
    section: ReportSection | None = None
    ea_instance: ExpertAdvisor | None = None
    interrupted: str | None = None  # the phase Ctrl-C cut short: "on_init", "on_study" or "replay"
    orders: pd.DataFrame = _OnRead()  # MetaTrader's orders table (or what builds it on first read)
    deals: pd.DataFrame = _OnRead()  # MetaTrader's deals table (likewise)
    curves: pd.DataFrame | None = _OnRead(lambda: None)  # scoring.Curve.frame: the start row, then one row
    # per forward bar (or what builds it on first read)
    equity_path: pd.DataFrame | None = None  # the skeleton of the equity at every modelled price
    symbol_charts: dict = field(default_factory=dict)  # several symbols: each traded one's chart_data

    def __post_init__(self) -> None:
        if not isinstance(self.stats, pd.Series):
            self.stats = statistics.series(self.stats, name=self.ea.get("class"))
        given = self.__dict__["_equity_table"]
        if not (isinstance(given, pd.DataFrame) or callable(given)):  # the equity at each close: the table
            self.equity = lambda: equity_frame(self.time, self.balance, given, self.curves, self.account)

    # -- printing ----------------------------------------------------------------------------------------
    def headline(self) -> list[tuple[str, str]]:
        """(label, value) of the figures a summary shows first (``statistics.HEADLINE``)."""
        cur = self.account.get("currency", "")
        out = []
        for key in statistics.HEADLINE:
            s = statistics.BY_KEY[key]
            text = statistics.fmt(self.stats.get(key), s.fmt)
            out.append((s.label, f"{text} {cur}" if s.fmt == "money" and text != "–" else text))
        return out

    def settings(self) -> list[tuple[str, str]]:
        """The run's settings in a few lines: data, period, model, account and the EA's inputs."""
        d, a = self.data, self.account
        inputs = ", ".join(f"{k}={v}" for k, v in (self.ea.get("params") or {}).items()) or "none"
        first, last = (statistics.fmt(d.get(k), "time") for k in ("forward_first", "forward_last"))
        fwd = f"{first} .. {last}"
        rule = self.periods.get("forward_rule")
        rows = [
            ("Expert", f"{self.ea.get('class')} ({inputs})"),
            (
                "Symbol",
                f"{d.get('symbol')} {d.get('timeframe')}, {d.get('bars')} bars ({d.get('source') or '-'})",
            ),
            ("Forward", fwd + (f"; {rule}" if rule else "")),
            ("Modelling", d.get("model_name") or "Open prices only"),
            (
                "Account",
                f"{statistics.fmt(a.get('deposit'), 'money')} {a.get('currency')}, 1:{a.get('leverage'):g}",
            ),
        ]
        if d.get("spread"):
            rows.append(("Spread", str(d["spread"])))
        return rows

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"INCOMPLETE (interrupted in {self.interrupted})"
        lines = [
            f"<backtests.Result {self.ea.get('class')} {self.data.get('symbol')} "
            f"{self.data.get('timeframe')}, {state}>"
        ]
        width = max(len(k) for k, _ in [*self.settings(), *self.headline()])
        lines += [f"  {k:<{width}}  {v}" for k, v in self.settings()]
        lines.append("")
        lines += [f"  {k:<{width}}  {v}" for k, v in self.headline()]
        pred = self.predictions
        if pred is not None:
            ba = pred["model"].get("balanced_accuracy")
            shown = "–" if ba is None else f"{100 * ba:.1f}%"
            lines.append(f"  {'Balanced accuracy':<{width}}  {shown} on {pred['bars']} forward bars")
        lines.append("")
        lines.append(
            f"  .stats ({len(self.stats)} figures), .trades ({len(self.trades)}), "
            f".orders ({len(self.orders)}), "
            f".deals ({len(self.deals)}), .equity ({len(self.equity)} bars); .plot() draws them"
        )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The notebook's view: the settings and the headline figures, two small tables."""

        def table(rows: list[tuple[str, str]]) -> str:
            body = "".join(
                f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:right'>"
                f"{html.escape(v)}</td></tr>"
                for k, v in rows
            )
            return f"<table class='neuronet-result'>{body}</table>"

        title = f"{self.ea.get('class')} · {self.data.get('symbol')} {self.data.get('timeframe')}"
        warn = "" if self.complete else "<p><b>INCOMPLETE</b>: the run was interrupted.</p>"
        return (
            f"<div class='neuronet-result'><h4>{html.escape(title)}</h4>{warn}{table(self.settings())}"
            f"{table(self.headline())}<p><code>.stats</code>: {len(self.stats)} figures, "
            f"<code>.trades</code>: {len(self.trades)}, <code>.plot()</code>: the interactive chart</p></div>"
        )

    # -- charts ------------------------------------------------------------------------------------------
    def plot(self, filename: str | Path | None = None, *, show: bool | None = None, max_candles: int = 5000):
        """The interactive chart (Bokeh): candles (at most ``max_candles`` drawn: longer runs are
        downsampled, each drawn candle spanning its bars' open, high, low and close), every trade's entry
        and exit with its SL/TP, pending orders, predicted and true classes, the indicators the EA declared,
        equity and drawdown, all sharing one time axis. ``filename``: save a self-contained HTML file there
        (offline: BokehJS inline); ``show``: open it (default: in a notebook, or when no file is given).
        Returns the Bokeh layout."""
        from backtests.plots import result_layout, save_or_show

        layout = result_layout(self, max_candles=max_candles)
        return save_or_show(layout, filename, show, title=f"{self.ea.get('class')} {self.data.get('symbol')}")


def equity_frame(time, balance, equity, curves: pd.DataFrame | None, account: dict) -> pd.DataFrame:
    """The forward bars' balance and equity (at each close) with their times, the worst equity and margin
    level of each bar where the curve has them, and the drawdown from the running peak in %."""
    equity = np.asarray(equity, dtype=np.float64)
    columns = {"equity": equity, "balance": np.asarray(balance, dtype=np.float64)}
    if curves is not None and len(curves) == len(equity) + 1:  # the curve's first row is the start
        columns["equity_worst"] = curves["equity_worst"].to_numpy()[1:]
        columns["margin_level"] = curves["margin_level"].to_numpy()[1:]
    deposit = float(account.get("deposit") or (equity[0] if len(equity) else 0.0))
    peak = np.maximum.accumulate(np.concatenate(([deposit], equity)))[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        columns["drawdown_pct"] = np.where(peak > 0, (peak - equity) / peak * 100.0, 0.0)
    frame = pd.DataFrame(columns, index=time)  # one table made once, not a column at a time
    frame.index.name = "time"
    return frame


@dataclass
class PassFigures:
    """What an optimisation pass keeps of a run (``Backtest.run_pass``): its statistics (those asked for,
    or all), its ``on_tester`` value, and its equity at each forward bar's close (``time``, ``equity``)
    and on the report's curve (``curve_time``, ``curve_equity``: the start row, the deposit, first)."""

    stats: dict
    custom_criterion: float | None
    time: pd.DatetimeIndex
    equity: np.ndarray
    curve_time: pd.DatetimeIndex
    curve_equity: np.ndarray
    complete: bool
    interrupted: str | None = None

    @classmethod
    def of_result(cls, result: Result) -> PassFigures:
        """A full run's (several symbols run in full)."""
        curves = result.curves
        return cls(
            stats=dict(result.stats),
            custom_criterion=result.custom_criterion,
            time=result.time,
            equity=result.equity["equity"].to_numpy(dtype=np.float64),
            curve_time=pd.DatetimeIndex(curves.index),
            curve_equity=curves["equity"].to_numpy(dtype=np.float64),
            complete=result.complete,
            interrupted=result.interrupted,
        )
