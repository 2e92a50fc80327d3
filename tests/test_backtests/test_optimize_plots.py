"""The optimisation's interactive charts: each heat-map cell is the best pass of its pair (with its pass
number), every defined pass is one line of the parallel coordinates, and the file saved opens offline."""

import re

import numpy as np
import pandas as pd

from backtests.optimize.plots import heatmap, parallel, plot_passes


def _table(criterion="balance"):
    t = pd.DataFrame(
        {
            "pass": [0, 1, 2, 3, 4],
            "fast": [5, 5, 10, 10, 15],
            "slow": [20, 20, 20, 30, 30],
            "lots": [0.1, 0.2, 0.1, 0.1, 0.1],
            "criterion": [100.0, 150.0, 90.0, np.nan, 120.0],  # pass 3 refused: no cell, no line
        }
    )
    t.attrs["criterion"] = criterion
    return t


def test_each_cell_is_the_best_pass_of_its_pair():
    data = heatmap(_table(), "fast", "slow", "Balance", maximize=True).renderers[0].data_source.data
    cells = {
        (x, y): (c, p)
        for x, y, c, p in zip(data["x"], data["y"], data["criterion"], data["pass"], strict=True)
    }
    assert cells == {("5", "20"): (150.0, 1), ("10", "20"): (90.0, 2), ("15", "30"): (120.0, 4)}
    low = heatmap(_table(), "fast", "slow", "Drawdown", maximize=False).renderers[0].data_source.data
    assert dict(zip(zip(low["x"], low["y"], strict=True), low["pass"], strict=True))[("5", "20")] == 0


def test_every_defined_pass_is_one_line_scaled_per_axis():
    data = parallel(_table(), ["fast", "slow", "lots"], "Balance", True).renderers[0].data_source.data
    assert list(data["pass"]) == [0, 1, 2, 4]
    assert data["ys"][1] == [0.0, 0.0, 1.0, 1.0]  # fast 5 (lowest), slow 20, lots 0.2 (highest), best
    assert data["ys"][2][3] == 0.0  # the lowest criterion


def test_plot_passes_saves_an_offline_page(tmp_path):
    out = tmp_path / "passes.html"
    plot_passes(_table(), filename=out, show=False)
    page = out.read_text()
    assert not re.findall(r"<script[^>]*\ssrc=|<link\b", page)
    assert '"heatmap"' in page and '"parallel"' in page
