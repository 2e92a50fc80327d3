"""The frame of every HTML page neuronet writes (backtest, optimisation, robustness, comparison reports):
one stylesheet, BokehJS inline in the head, charts embedded where they stand, tables from plain rows.

A page is one file that opens offline: nothing is fetched from elsewhere (no CDN, no fonts), so a report
mailed or archived years later still draws its charts.
"""

from __future__ import annotations

import html

import pandas as pd
from bokeh.embed import components

from backtests.plots import RESOURCES

CSS = """body { font: 14px system-ui, sans-serif; margin: 24px auto; max-width: 1180px; padding: 0 12px;
  color: #222; }
table { border-collapse: collapse; margin: 8px 16px 16px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e5e5e5; text-align: left; }
td { text-align: right; font-variant-numeric: tabular-nums; }
table.rows td, table.rows th { font-size: 12px; padding: 2px 6px; }
.cols { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 8px; }
img { max-width: 100%; display: block; margin: 8px 0; }
.warn { background: #fde2e1; padding: 8px; border-left: 4px solid #c00; }
.note { color: #555; font-size: 13px; }
.chart { margin: 8px 0 16px 0; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 13px; }
dt { font-weight: 600; } dd { margin: 0; }"""


def embed(model, name: str = "chart") -> str:
    """A Bokeh model where it stands on the page: its div and the script that draws it (BokehJS itself is
    in the head, once)."""
    script, div = components(model)
    return f'<div class="chart" data-chart="{html.escape(name)}">{div}</div>\n{script}'


def kv_table(rows: list[tuple[str, str]], cls: str = "kv") -> str:
    """A two-column table: a label and its value per row."""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def frame_table(df: pd.DataFrame, limit: int | None = None, cls: str = "rows") -> str:
    """A DataFrame as a table (values as the frame prints them, blanks for missing ones); with ``limit``,
    its first ``limit`` rows and a line saying how many more there are."""
    shown = df if limit is None else df.head(limit)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in shown.itertuples(index=False)
    )
    more = len(df) - len(shown)
    note = f'<p class="note">… and {more:,} more rows.</p>' if more > 0 else ""
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>{note}'


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT:
        return ""
    return str(v)


def page(title: str, body: str, css: str = "") -> str:
    """The whole HTML document: ``body`` under a head with the stylesheet and BokehJS inline."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
        f"<style>\n{CSS}\n{css}</style>\n{RESOURCES.render()}\n</head><body>\n{body}\n</body></html>\n"
    )
