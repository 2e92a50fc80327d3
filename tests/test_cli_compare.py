"""``neuronet compare``: two report folders on one page, statistics side by side and equity overlaid."""

import json

import pytest
from cli_inprocess import cli


@pytest.fixture(scope="module")
def two_reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    for name, fast in (("fast5", "5"), ("fast12", "12")):
        assert (
            cli("backtest", "sma", "--to", "2017-06-01", "-p", f"fast={fast}", "--out", str(root / name)) == 0
        )
    return root


def test_compare_puts_two_reports_side_by_side(two_reports, capsys):
    page = two_reports / "cmp.html"
    assert cli("compare", str(two_reports / "fast5"), str(two_reports / "fast12"), "--out", str(page)) == 0
    text = page.read_text()
    a, b = (json.loads((two_reports / n / "report.json").read_text())["stats"] for n in ("fast5", "fast12"))
    row = f"<th>Total Trades</th><td>{a['total_trades']:,}</td><td>{b['total_trades']:,}</td>"
    assert row in text and 'data-chart="compare"' in text and "<script src=" not in text
    assert cli("compare", str(two_reports / "fast5"), str(two_reports / "fast12"), "--out", str(page)) == 2
    assert "--force" in capsys.readouterr().err


def test_compare_refuses_what_is_not_a_report(two_reports, tmp_path, capsys):
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": 1}')
    code = cli("compare", str(two_reports / "fast5"), str(notes), "--out", str(tmp_path / "c.html"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"{notes}: not a backtest report.json" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "c.html").exists()


@pytest.mark.parametrize(
    "curves",
    [
        {"time": ["2017-01-02"], "equity": ["a"]},
        {"time": ["2017-01-02", "2017-01-03"], "equity": [10_000.0]},
        {"time": ["not a time"], "equity": [10_000.0]},
        {"time": ["2017-01-02"], "equity": {"x": 1}},
        ["a list"],
    ],
    ids=["text equity", "lengths differ", "bad time", "equity a table", "curves a list"],
)
def test_compare_refuses_a_report_json_whose_curve_is_not_one(two_reports, tmp_path, capsys, curves):
    """A report.json edited or written by another tool with a curve that is not numbers by time was an
    "internal error: ValueError" (exit 1) from deep inside NumPy; it is one line naming the file (exit 2)."""
    doc = json.loads((two_reports / "fast5" / "report.json").read_text())
    doc["curves"] = curves
    bad = tmp_path / "edited"
    bad.mkdir()
    (bad / "report.json").write_text(json.dumps(doc))
    code = cli("compare", str(two_reports / "fast5"), str(bad), "--out", str(tmp_path / "c.html"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and str(bad / "report.json") in err and "curve" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "c.html").exists()
