"""The example notebook, run end to end in a real Jupyter kernel (nbclient): the result shows as its HTML
summary, the statistics and trades as tables, and ``result.plot()`` as an interactive Bokeh chart with
every trade, BokehJS included inline (a notebook saved with its outputs opens offline)."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "explore.ipynb"

pytestmark = pytest.mark.slow  # a kernel start and a backtest: about ten seconds


def test_the_example_notebook_runs_and_shows_the_result_and_the_chart(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip: nbformat)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip: nbclient)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip: ipykernel)")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for cell in cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source

    def html(cell) -> str:
        return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)

    summary = html(cells[0])
    assert "<div class='neuronet-result'>" in summary and "Total Net Profit" in summary
    assert "SmaCrossEA · EURUSD H1" in summary
    assert "<table" in html(cells[2])  # the trades frame
    chart = "".join(json.dumps(o.get("data", {})) for o in cells[4].outputs)
    assert "application/vnd.bokehjs_exec.v0+json" in chart or "Bokeh" in chart
    assert re.search(r"entries", chart) and "#@ticket" in chart
    assert not list(tmp_path.glob("*.html"))  # shown in the notebook, no stray file written beside it
