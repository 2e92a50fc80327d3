"""The user cache folder of neuronet, shared by every layer (candle store, OpenCL device verdicts).

``$NEURONET_CACHE`` when set, else the platform's cache folder: ``$XDG_CACHE_HOME/neuronet`` or
``~/.cache/neuronet`` on Linux, ``~/Library/Caches/neuronet`` on macOS, ``%LOCALAPPDATA%\\neuronet`` on
Windows. Nothing is created here; writers create what they need.

Why it lives here: ``datafeeds`` and ``opencl`` both keep files in it and neither may import the other, so,
like ``neuronet.errors`` and ``neuronet.atomic``, this module imports nothing of ours (the layering test
checks it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (see the module docstring); not created until something is written."""
    env = os.environ.get("NEURONET_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "neuronet"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "neuronet"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuronet"
