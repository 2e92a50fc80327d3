"""The one table of statistics: every figure the metrics compute has a key, a label, a section, a format and
a glossary line, and report.json, the HTML page, the glossary and the README all follow it."""

import html
import json
import re
from pathlib import Path

import pytest

from backtests import Backtest
from backtests.report import write_report
from backtests.statistics import BY_KEY, FORMATS, SECTIONS, TABLE, fmt, rows, series
from datafeeds import read_sample
from strategies import SmaCrossEA

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stats")
    result = Backtest(read_sample().iloc[:900], SmaCrossEA, forward="1/3").run(sl_points=150, tp_points=300)
    page = write_report(result, folder)
    return result, json.loads((folder / "report.json").read_text()), page.read_text()


def test_every_statistic_has_each_field():
    assert len(BY_KEY) == len(TABLE), "a key is in the table twice"
    for s in TABLE:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", s.key), s
        assert s.label.strip() and s.glossary.strip().endswith("."), s
        assert s.section in SECTIONS and s.fmt in FORMATS, s
        if s.joins is not None:  # shown in another row: that row is of the same section and not joined
            assert BY_KEY[s.joins].section == s.section and BY_KEY[s.joins].joins is None, s
    for section in SECTIONS:
        labels = [s.label for s in TABLE if s.section == section]
        assert len(labels) == len(set(labels)), f"two statistics share a label in {section}"


def test_the_metrics_compute_exactly_the_tables_statistics(report):
    _, doc, _ = report
    assert list(doc["stats"]) == [s.key for s in TABLE], "report.json's stats follow the table's order"


def test_the_page_shows_every_row_and_every_glossary_line(report):
    _, doc, page = report
    text = html.unescape(page)
    for section in SECTIONS:
        for label, value in rows(doc["stats"], section):
            assert f"<th>{label}</th><td>{value}</td>" in text, label
    for s in TABLE:
        assert s.glossary in text, f"no glossary line for {s.key}"
    for key in ("commission", "swap"):  # once without a glossary line
        assert f"<dt>{BY_KEY[key].label}</dt><dd>{BY_KEY[key].glossary}</dd>" in text


def test_the_readme_lists_every_statistic():
    text = README.read_text()
    documented = set(re.findall(r"`([a-z_0-9]+)`", text))
    for group in re.findall(r"`([a-z_]+(?:\|[a-z_]+)+)`", text):
        first, *rest = group.split("|")
        stem = first.rsplit("_", 1)[0] + "_"
        documented |= {first, *(stem + r for r in rest)}
    assert not {s.key for s in TABLE} - documented


def test_result_stats_is_a_series_in_the_tables_order(report):
    result, doc, _ = report
    assert list(result.stats.index) == [s.key for s in TABLE]
    assert result.stats["total_trades"] == doc["stats"]["total_trades"] == len(result.trades)
    assert series({"swap": 0.0, "bars": 3}).index.tolist() == ["bars", "swap"]


def test_joined_figures_are_printed_in_brackets_beside_their_row():
    stats = {"short_trades": 12, "short_won_pct": 41.66666, "z_score": -1.5, "z_score_probability_pct": 86.64}
    got = dict(rows(stats, "mt5"))
    assert got["Short Trades (won %)"] == "12 (41.67%)"
    assert got["Z-Score"] == "-1.50 (86.64%)"
    assert (
        fmt(None, "money") == "–"
        and fmt(1234.5, "money") == "1,234.50"
        and fmt(0.00123, "ratio") == "0.00123"
    )
