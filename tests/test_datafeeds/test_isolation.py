"""Tests never touch the user's real cache: ``tests/conftest.py`` points ``NEURONET_CACHE`` at a fresh
temporary folder for every test (``test_terminal_bridge.py`` used to leave a series in ~/.cache/neuronet)."""

from __future__ import annotations

import os
from pathlib import Path

from datafeeds.store import cache_root


def test_the_cache_of_a_test_is_a_temporary_folder(tmp_path_factory):
    assert Path(tmp_path_factory.getbasetemp()).resolve() in cache_root().resolve().parents
    assert os.environ["NEURONET_CACHE"] == str(cache_root())  # what a subprocess of the test sees too
