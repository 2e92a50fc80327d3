"""Reports side by side: the statistics of several report folders in one table and their equity curves
overlaid, on one self-contained page (``neuronet compare``).

What a researcher compares: a backtest with the paper and live runs of the same EA (``neuronet live
report`` writes the same report.json), two EAs on the same data, or one EA in two modelling modes. Each
report's curve is drawn as its return on its own deposit, so accounts of different sizes share one axis;
the table shows each figure as its report has it, in the statistics table's order and format.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from bokeh.models import HoverTool
from bokeh.plotting import figure

from backtests import statistics
from backtests.plots import TOOLS, ms
from backtests.webpage import embed, page
from neuronet.errors import NeuronetError
from neuronet.userfiles import open_regular

MAX_JSON_BYTES = 1 << 30  # a report.json of millions of bars is a few hundred MB
PALETTE = ("#264653", "#e76f51", "#2a9d8f", "#8338ec", "#fb5607", "#3a86ff", "#6a994e", "#ff006e")


class CompareError(NeuronetError, ValueError):
    """A report that cannot be compared: not a report folder, not a backtest's report.json, or unreadable."""


@dataclass(frozen=True)
class Report:
    """One report read for comparison: its name, what ran (EA, data, model, account) and its figures."""

    name: str
    doc: dict

    @property
    def label(self) -> str:
        d, ea = self.doc.get("data") or {}, self.doc.get("ea") or {}
        kind = "live journal" if d.get("journal") else d.get("model_name") or "Open prices only"
        return f"{self.name}: {ea.get('class')} {d.get('symbol')} {d.get('timeframe')}, {kind}"

    def curve(self) -> pd.Series:
        """Equity at each bar's close as % return on the deposit, by time (the start row first)."""
        c = self.doc.get("curves") or {}
        equity = np.asarray(c.get("equity") or [], dtype=np.float64)
        deposit = float((self.doc.get("account") or {}).get("deposit") or (equity[0] if len(equity) else 1.0))
        index = pd.DatetimeIndex(pd.to_datetime(c.get("time") or [], utc=True))
        return pd.Series((equity / deposit - 1.0) * 100.0, index=index)

    def checked(self, file: Path) -> Report:
        """This report, once its curve reads as numbers by time (a report.json edited by hand or written by
        another tool is refused in one line naming it, not met deep inside NumPy while drawing)."""
        curves = self.doc.get("curves")
        try:
            if curves is not None and not isinstance(curves, dict):
                raise TypeError(f"a table of columns, not {type(curves).__name__}")
            curve = self.curve()
            if curve.index.hasnans:
                raise ValueError("a time that is no time")
        except (TypeError, ValueError, OverflowError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CompareError(
                f"{file}: its curve (curves.time, curves.equity) is not equity by time: {first}"
            ) from None
        return self


def read_report(path: str | Path) -> Report:
    """A report folder (or its report.json): refused in one line when it is no backtest report."""
    path = Path(path)
    file = path / "report.json" if path.is_dir() else path
    if path.is_dir() and not file.exists():
        raise CompareError(
            f"{path}: no report.json in the folder; give a report folder of neuronet backtest, "
            "run or live report"
        )
    with open_regular(file, "report.json") as fh:
        raw = fh.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        raise CompareError(f"{file}: larger than {MAX_JSON_BYTES >> 20} MiB; not a report.json")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CompareError(f"{file}: not a report.json (not JSON: {exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stats"), dict) or "report_version" not in doc:
        raise CompareError(f"{file}: not a backtest report.json (no report_version and stats)")
    name = path.name if path.is_dir() else path.parent.name or path.name
    return Report(name, doc).checked(file)


def unique_names(reports: list[Report]) -> list[Report]:
    """The reports, numbered where two share a folder name."""
    names = [r.name for r in reports]
    return [
        Report(f"{r.name} ({k + 1})" if names.count(r.name) > 1 else r.name, r.doc)
        for k, r in enumerate(reports)
    ]


def stats_table(reports: list[Report]) -> pd.DataFrame:
    """Every statistic (rows, the table's labels) of every report (columns), printed in its format."""
    rows = {}
    for s in statistics.TABLE:
        rows[(statistics.SECTIONS[s.section], s.label)] = [
            statistics.fmt(r.doc["stats"].get(s.key), s.fmt) for r in reports
        ]
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=[r.name for r in reports])
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["section", "statistic"])
    return frame


def equity_figure(reports: list[Report]):
    """The reports' equity curves overlaid, each as % return on its own deposit."""
    fig = figure(
        height=360,
        sizing_mode="stretch_width",
        x_axis_type="datetime",
        tools=TOOLS,
        active_scroll="xwheel_zoom",
        title="Equity at bar closes, % return on each deposit",
        name="compare",
    )
    for k, r in enumerate(reports):
        curve = r.curve()
        if not len(curve):
            continue
        fig.line(
            ms(curve.index),
            curve.to_numpy(),
            color=PALETTE[k % len(PALETTE)],
            line_width=1.5,
            legend_label=r.name,
        )
    fig.add_tools(
        HoverTool(
            tooltips=[("time", "$x{%F %H:%M}"), ("return", "$y{0.00} %")], formatters={"$x": "datetime"}
        )
    )
    fig.legend.location = "top_left"
    fig.legend.click_policy = "hide"
    return fig


def compare_page(reports: list[Report]) -> str:
    """The whole comparison page."""
    reports = unique_names(reports)
    table = stats_table(reports)
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in reports)
    body = []
    for section in statistics.SECTIONS.values():
        body.append(f"<tr><th colspan='{len(reports) + 1}' class='section'>{html.escape(section)}</th></tr>")
        for label, values in table.loc[section].iterrows():
            cells = "".join(f"<td>{html.escape(v)}</td>" for v in values)
            body.append(f"<tr><th>{html.escape(str(label))}</th>{cells}</tr>")
    what = "".join(f"<li>{html.escape(r.label)}</li>" for r in reports)
    parts = [
        f"<h1>Comparison of {len(reports)} reports</h1><ul>{what}</ul>",
        embed(equity_figure(reports), "compare"),
        f"<h2>Statistics</h2><table class='compare'><tr><th></th>{head}</tr>{''.join(body)}</table>",
        "<p class='note'>Each figure as its report has it; definitions: the glossary of any report.html.</p>",
    ]
    return page("Comparison", "\n".join(parts), "th.section { background: #f0f0f0; text-align: left; }")
