"""The README documents every key a report.json holds: top level, statistics, curve columns, trade fields."""

import json
import re
from pathlib import Path

from backtests import Backtest
from backtests.report import write_report
from datafeeds import read_sample
from strategies import SmaCrossEA

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_report_json_key_is_in_the_readme(tmp_path):
    write_report(Backtest(read_sample().iloc[:800], SmaCrossEA).run(), tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    text = README.read_text()
    # `x_a|b|c` in the README stands for `x_a`, `x_b` and `x_c` (e.g. `balance_drawdown_absolute|maximal`)
    documented = set(re.findall(r"`([a-z_]+)`", text))
    for group in re.findall(r"`([a-z_]+(?:\|[a-z_]+)+)`", text):
        first, *rest = group.split("|")
        stem = first.rsplit("_", 1)[0] + "_"
        documented |= {first, *(stem + r for r in rest)}
    keys = set(doc) | set(doc["stats"]) | set(doc["curves"]) | set(doc["trades"][0])
    assert not keys - documented, f"report.json keys missing from the README: {sorted(keys - documented)}"
