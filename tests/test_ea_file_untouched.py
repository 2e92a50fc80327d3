"""Loading a user's EA file leaves their folder as it was, whatever the interpreter's bytecode setting."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuronet.commands.backtest import resolve_ea

EA = """
from strategies.base import ExpertAdvisor


class Mine(ExpertAdvisor):
    def on_bar(self):
        pass
"""


@pytest.mark.parametrize("target", ["mine.py", "mine.py:Mine", "mine.py:Nope"])
def test_loading_an_ea_file_writes_no_bytecode_beside_it(tmp_path: Path, monkeypatch, target: str):
    (tmp_path / "mine.py").write_text(EA)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a plain interpreter runs
    try:
        assert resolve_ea(str(tmp_path / target)).__name__ == "Mine"
    except LookupError as exc:
        assert "Nope" in str(exc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]
    assert sys.dont_write_bytecode is False  # the setting comes back
