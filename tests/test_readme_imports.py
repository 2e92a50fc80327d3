"""Every name the README imports, in its code blocks and in its prose (``from datafeeds import X``), is
importable: a new user who copies a line gets the object, not an ImportError."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
OURS = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")
# `from pkg[.mod] import a, b`, in a code block or in prose: both are promises.
FROM_IMPORT = re.compile(rf"from ((?:{'|'.join(OURS)})(?:\.\w+)*) import ([\w, ]+)")


def _imports() -> list[tuple[str, str]]:
    found = set()
    for module, names in FROM_IMPORT.findall(README):
        for name in names.split(","):
            if name.strip():
                found.add((module, name.strip()))
    return sorted(found)


def test_the_readme_imports_something():
    assert ("datafeeds", "load_candles") in _imports()


@pytest.mark.parametrize(("module", "name"), _imports(), ids=lambda v: str(v))
def test_every_readme_import_resolves(module, name):
    assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"


def test_the_tick_functions_the_readme_names_are_in_datafeeds():
    """The README lists them as ``datafeeds``' own in a sentence, not an import line."""
    import datafeeds

    for name in ("load_ticks", "synthetic_ticks", "bars_from_ticks", "write_tick_csv"):
        assert name in datafeeds.__all__ and callable(getattr(datafeeds, name))
