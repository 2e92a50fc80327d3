"""``neuronet live`` logs in with the account of the ``NEURONET_MT5_*`` variables or a private
``--credentials`` file, and never shows it (real subprocesses against the simulated terminal)."""

from __future__ import annotations

import os
import subprocess
import sys

from test_live.test_cli_live import _live_args, clock  # noqa: F401 - clock is a fixture

SECRET = "pw-Kx93-not-for-eyes"


def _run(*args, cwd, env=None):
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


def test_the_account_comes_from_the_environment_and_is_never_shown(port, clock, tmp_path):  # noqa: F811
    journal = tmp_path / "run.jsonl"
    env = {
        "NEURONET_MT5_LOGIN": "5012345",
        "NEURONET_MT5_PASSWORD": SECRET,
        "NEURONET_MT5_SERVER": "Sim-Demo",
    }
    res = _run(*_live_args(port, journal, "--max-bars", "2"), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    # initialize() got the account of the variables:
    assert "SmaCrossEA paper on EURUSD H1 at Sim-Demo" in res.stdout
    assert SECRET not in res.stdout + res.stderr + journal.read_text()
    assert "5012345" not in journal.read_text()


def test_a_credentials_file_others_may_read_is_refused(tmp_path):
    path = tmp_path / "account.toml"
    path.write_text(f'login = 5012345\npassword = "{SECRET}"\nserver = "Sim-Demo"\n')
    path.chmod(0o644)
    res = _run("live", "SmaCrossEA", "--credentials", str(path), "-o", "port=1", cwd=tmp_path)
    assert res.returncode == 2 and "chmod 600" in res.stderr and SECRET not in res.stderr
    res = _run("live", "SmaCrossEA", "--credentials", str(path), "-o", "login=1", cwd=tmp_path)
    assert res.returncode == 2 and "both name the account" in res.stderr


def test_half_the_variables_is_an_error_naming_them(tmp_path):
    res = _run("live", "SmaCrossEA", "-o", "port=1", cwd=tmp_path, env={"NEURONET_MT5_LOGIN": "5012345"})
    assert res.returncode == 2 and "NEURONET_MT5_PASSWORD" in res.stderr and "Traceback" not in res.stderr
