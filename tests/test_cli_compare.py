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
