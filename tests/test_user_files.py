"""Files a user makes by running the README's commands from the checkout stay out of the project: git
ignores them and ``ruff`` (``make test``'s lint) does not read them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What the README's examples write at the root: an EA file, journals, DEEP's log and model, pictures,
# data files, a study store, MNIST.
USER_FILES = [
    "my_eas.py",
    "journals/demo.jsonl",
    "DEEP.LOG",
    "model.dbn",
    "fractal.nnz",
    "samples.png",
    "fields.png",
    "act.txt",
    "synth.csv",
    "EURUSD_M1.csv",
    "EURUSD_ticks.csv",
    "ETTh1.csv",
    "broken.csv",
    "study.db",
    "train-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte.gz",
    "reports/x/report.html",
    "runs/etth1/metrics.json",
]


def test_git_ignores_what_the_readme_commands_write():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", *USER_FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sorted(out.stdout.split()) == sorted(USER_FILES)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    ignored_tracked = subprocess.run(
        ["git", "check-ignore", "--no-index", *tracked.split()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert ignored_tracked == []  # no file of the project's own is caught by those patterns


def test_ruff_lints_the_project_not_a_users_ea_file(tmp_path):
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "neuronet").mkdir()
    (tmp_path / "neuronet" / "bad.py").write_text("import os\n")
    (tmp_path / "my_eas.py").write_text("import os\nx=1 ;  y = 2\n")
    (tmp_path / "journals").mkdir()
    (tmp_path / "journals" / "notes.py").write_text("import sys\n")
    out = subprocess.run(
        [str(ruff), "check", "--output-format", "concise", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "neuronet/bad.py" in out.stdout
    assert "my_eas.py" not in out.stdout and "journals" not in out.stdout


def test_every_output_the_readme_commands_name_is_ignored():
    """Each ``--out``, ``--journal``, ``--model``, ``--log`` and ``--activations`` path of the README's
    commands, and each folder its Python examples write a report to, is one git ignores: following the
    README from the checkout leaves ``git status`` clean (``--out rep`` did not)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    options = r"--(?:out|journal|model|log|activations|fields)\s+([\w./-]+)"
    written = set(re.findall(options, readme))
    written |= set(
        re.findall(r"(?:write_report|analyze_report|export)\((?:result|[\w.]+), \"([\w./-]+)\"", readme)
    )
    written |= set(re.findall(r"(?:write_report|analyze_report)\(\"([\w./-]+)\"", readme))
    paths = sorted(
        f"{w}/report.html" if "." not in Path(w).name else w
        for w in written
        if not re.fullmatch(r"[A-Z]+", Path(w).stem)  # DIR, FILE, PAGE.html: placeholders
        and w not in {"open", "ohlc1m", "ticks", "dense", "dbn", "patchtst", "atfnet"}
    )
    assert len(paths) > 10, paths  # the README's commands were found
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert sorted(set(paths) - set(out.stdout.split())) == []
