"""The live runners are parts given to one engine (``engine.Chart``), not subclasses of it: each carries
every member of the interface with its signature, and none reaches the engine through inheritance."""

from __future__ import annotations

import inspect

import pytest

from neuronet.live.engine import Chart, LiveEngine
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.runner import LiveRunner

MEMBERS = [
    name for name, value in vars(Chart).items() if inspect.isfunction(value) and not name.startswith("_")
]


def test_the_interface_is_what_the_engine_calls():
    assert sorted(MEMBERS) == sorted(
        ["read_journal", "begin", "fetch_main", "closed", "open_new", "on_tick", "closing_quotes", "show",
         "positions", "terminal"]
    )  # fmt: skip
    source = inspect.getsource(LiveEngine)
    for name in MEMBERS:
        assert f"self.part.{name}(" in source, name


@pytest.mark.parametrize("runner", [LiveRunner, MultiLiveRunner])
def test_each_runner_is_a_chart_and_no_engine(runner):
    assert LiveEngine not in runner.__mro__ and runner.__mro__[1] is object
    for name in MEMBERS:
        mine, theirs = inspect.signature(getattr(runner, name)), inspect.signature(getattr(Chart, name))
        assert list(mine.parameters) == list(theirs.parameters), name
