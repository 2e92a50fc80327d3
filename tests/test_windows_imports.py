"""Windows, where most MetaTrader users are, has no ``fcntl``, ``resource``, ``termios``, ``pwd`` or ``grp``:
no module of neuronet may import one when it is imported, only inside a function that falls back without it.

Every module of the six packages (not the ``__main__`` scripts, which run the program) is imported in a
fresh process in which an import of those names *by our code* fails as it would on Windows
(``builtins.__import__`` sees the importer's globals); third-party packages keep their own platform checks,
so their imports are left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("datafeeds", "opencl", "nn", "strategies", "backtests", "neuronet")
POSIX_ONLY = ("fcntl", "resource", "termios", "pwd", "grp")

PROBE = """
import builtins, importlib, json, pkgutil, sys

ours, posix_only = set(sys.argv[1].split(",")), set(sys.argv[2].split(","))
real_import = builtins.__import__

def windows_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if level == 0 and name.split(".")[0] in posix_only and importer.split(".")[0] in ours:
        raise ModuleNotFoundError(f"No module named {name!r} (as on Windows; imported by {importer})")
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = windows_import
failures, count = {}, 0
for package in sorted(ours):
    names = [package] + [m.name for m in pkgutil.walk_packages(importlib.import_module(package).__path__,
                                                                   package + ".")]
    for name in names:
        if name.endswith(".__main__"):  # running the program, not a module to import; cli.py is checked
            continue
        count += 1
        try:
            importlib.import_module(name)
        except Exception as exc:
            failures[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"count": count, "failures": failures}))
"""


def test_no_module_imports_a_posix_only_module_at_import_time():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(PACKAGES), ",".join(POSIX_ONLY)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["count"] > 100  # every module was tried, not just the packages
    assert result["failures"] == {}


def test_the_probe_catches_such_an_import(tmp_path):
    """The check itself: a module of ours that imports ``fcntl`` at the top is reported."""
    package = tmp_path / "neuronet_probe_case"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "locking.py").write_text("import fcntl\n")
    (package / "lazy.py").write_text("def lock():\n    import fcntl\n    return fcntl\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "neuronet_probe_case", ",".join(POSIX_ONLY)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["count"] == 3
    assert list(result["failures"]) == ["neuronet_probe_case.locking"]
    assert "as on Windows" in result["failures"]["neuronet_probe_case.locking"]
