"""The live runners are parts given to one engine (``engine.Chart``), not subclasses of it: each carries
every member of the interface with its signature, and none reaches the engine through inheritance, nor
through anything but what ``Chart.attach`` gives it once (``shared_state``: the shared state, typed field by
field, and the engine's ``Lifecycle``)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest
from test_live.multi_eas import EachOnce

from datafeeds.timeframes import Timeframe
from neuronet.live import multi_market
from neuronet.live.engine import Chart, LiveEngine
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.runner import LiveRunner
from neuronet.live.shared_state import Lifecycle, LiveSettings, SharedState
from strategies.sma import SmaCrossEA

MEMBERS = [
    name for name, value in vars(Chart).items() if inspect.isfunction(value) and not name.startswith("_")
]


def test_the_interface_is_what_the_engine_calls():
    assert sorted(MEMBERS) == sorted(
        ["attach", "read_journal", "begin", "fetch_main", "closed", "open_new", "on_tick", "close_on_exit",
         "show", "positions", "terminal"]
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


def _members(protocol: type) -> set[str]:
    return {
        name
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


SHARED = {f.name for f in dataclasses.fields(SharedState)} | _members(SharedState)
LIFECYCLE = _members(Lifecycle)


def test_attach_gives_the_typed_shared_state_and_the_lifecycle():
    hints = typing.get_type_hints(Chart.attach)
    assert hints == {"shared": SharedState, "lifecycle": Lifecycle, "return": type(None)}
    for runner in (LiveRunner, MultiLiveRunner):
        assert typing.get_type_hints(runner.attach) == hints, runner.__name__


def test_the_engine_is_the_lifecycle_it_gives():
    for name in LIFECYCLE:
        mine, theirs = (
            inspect.signature(getattr(LiveEngine, name)),
            inspect.signature(getattr(Lifecycle, name)),
        )
        assert list(mine.parameters) == list(theirs.parameters), name


def _reaches(tree: ast.AST) -> list[tuple[str, str, int, str]]:
    """Every ``self.<via>.<name>`` (and ``x.<name>`` where ``x = self.<via>``) in the class's methods, with
    the method it is in: (via, name, line, method)."""
    found = []
    for method in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        aliases = {
            t.id: node.value.attr
            for node in ast.walk(method)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "self"
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(method):
            if not isinstance(node, ast.Attribute):
                continue
            base = node.value
            if (
                isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name)
                and base.value.id == "self"
            ):
                found.append((base.attr, node.attr, node.lineno, method.name))
            elif isinstance(base, ast.Name) and base.id in aliases:
                found.append((aliases[base.id], node.attr, node.lineno, method.name))
            if isinstance(base, ast.Name) and base.id == "self" and node.attr in ("engine", "_engine"):
                found.append(("self", node.attr, node.lineno, method.name))
    return found


@pytest.mark.parametrize("runner", [LiveRunner, MultiLiveRunner])
def test_a_part_reaches_the_engine_only_through_what_attach_gives_it(runner):
    """The parts read and wrote the engine's state as ``self.engine.<anything>``: what a part depended on
    was nowhere declared. Now every use is a field of ``SharedState`` or a member of ``Lifecycle``, and the
    engine itself is only run."""
    tree = ast.parse(Path(inspect.getsourcefile(runner)).read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == runner.__name__]
    reaches = _reaches(cls)
    assert {name for via, name, *_ in reaches if via == "shared"} <= SHARED
    assert {name for via, name, *_ in reaches if via == "lifecycle"} <= LIFECYCLE
    engine = [
        (name, method) for via, name, _, method in reaches if via == "self" and name in ("engine", "_engine")
    ]
    assert engine == [("_engine", "__init__"), ("_engine", "run")], engine
    assert {via for via, *_ in reaches if via in ("shared", "lifecycle")} == {"shared", "lifecycle"}


def test_the_multi_symbol_quotes_are_given_the_state_and_the_retries_they_use():
    assert list(inspect.signature(multi_market.SymbolQuotes).parameters)[:2] == ["shared", "retrying"]
    source = inspect.getsource(multi_market)
    assert "engine" not in source.replace("``engine.", "")


@pytest.mark.parametrize(("runner", "ea"), [(LiveRunner, SmaCrossEA), (MultiLiveRunner, EachOnce)])
def test_the_engine_attaches_its_own_state_once_and_the_settings_have_one_owner(runner, ea, tmp_path):
    settings = LiveSettings("EURUSD", Timeframe.H1, tmp_path / "j.jsonl")
    part = runner(ea, {}, None, settings)
    engine = part._engine
    assert part.shared is engine.shared and part.lifecycle is engine
    assert part.shared.settings is settings and part.s is settings and part.summary is part.shared.summary
    later = dataclasses.replace(settings, close_on_exit=True)
    part.s = later  # what the command line and tests set on the part is what the engine reads
    assert engine.shared.settings is later and not hasattr(engine, "s")
