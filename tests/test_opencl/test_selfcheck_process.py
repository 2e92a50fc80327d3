"""The self-check runs in a process of its own (``opencl.selfcheck_process``): a driver that crashes,
hangs or prints garbage fails its device's check and never takes the user's process down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencl import selfcheck
from opencl.device import DeviceInfo

ROOT = Path(__file__).resolve().parents[2]
INFO = DeviceInfo(
    "0:0", "Some CL", "OpenCL 3.0", "some cpu", "cpu", 2, 2**30, 2**16, 1024, True, "1.0", 128, None
)


def child(monkeypatch, script: str) -> tuple[str | None, float | None]:
    """The verdict ``selfcheck`` takes from a child that runs ``script`` instead of the real check."""
    monkeypatch.setattr(selfcheck, "_child_command", lambda info: [sys.executable, "-c", script])
    return selfcheck._in_child(INFO)


def test_a_device_whose_driver_aborts_the_process_at_exit_fails_the_check(monkeypatch):
    """pip's PoCL on a CPU its LLVM does not know prints its verdict, then aborts at exit ("still have
    references to IRs"): a process that used it would end with SIGABRT after its work, so it is not used."""
    problem, seconds = child(
        monkeypatch, 'import os; print(\'{"problem": null, "seconds": 0.01}\', flush=True); os.abort()'
    )
    assert seconds is None
    assert problem.startswith("the driver crashed the process at its exit (")


def test_a_failed_check_keeps_its_reason_and_says_the_crash_after_it(monkeypatch):
    script = (
        'import os; print(\'{"problem": "no kernel gemm_dot", "seconds": null}\', flush=True); os._exit(3)'
    )
    assert child(monkeypatch, script) == (
        "no kernel gemm_dot; then the driver crashed the process at its exit (exit status 3)",
        None,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_driver_that_kills_the_check_is_the_reason_in_its_own_words(monkeypatch):
    script = (
        "import os, signal, sys; sys.stderr.write('3 warnings generated.\\nLLVM ERROR: unknown target CPU\\n"
        "PLEASE submit a bug report\\n'); sys.stderr.flush(); os.kill(os.getpid(), signal.SIGSEGV)"
    )
    assert child(monkeypatch, script) == (
        "the driver ended the self-check's process (signal SIGSEGV): LLVM ERROR: unknown target CPU",
        None,
    )


def test_a_check_that_hangs_is_not_waited_for_beyond_its_deadline(monkeypatch):
    monkeypatch.setattr(selfcheck, "CHILD_DEADLINE", 1.0)
    assert child(monkeypatch, "import time; time.sleep(60)") == (
        "the self-check did not finish in 1 s (the driver hangs)",
        None,
    )


@pytest.mark.parametrize(
    "printed",
    [
        "garbage",
        '{"problem": null, "seconds": -1}',
        '{"problem": null, "seconds": NaN}',
        '{"problem": null, "seconds": null}',
        '{"problem": 5, "seconds": null}',
        '{"seconds": 0.1}',
    ],
)
def test_a_verdict_that_does_not_read_as_one_fails_the_check(monkeypatch, printed):
    problem, seconds = child(monkeypatch, f"print({printed!r})")
    assert seconds is None
    assert problem == "the self-check's process ended without a verdict"


def test_a_verdict_printed_after_the_drivers_chatter_is_read(monkeypatch):
    script = 'print("pocl: some notice"); print(\'{"problem": null, "seconds": 0.02}\')'
    assert child(monkeypatch, script) == (None, 0.02)


def test_where_no_process_can_start_the_check_runs_here(rt32, monkeypatch):
    monkeypatch.setattr(selfcheck, "_child_command", lambda info: [str(ROOT / "no-such-python")])
    problem, seconds = selfcheck._in_child(rt32.info)
    assert problem is None and seconds > 0


def test_the_real_check_in_its_own_process_passes_the_device_in_use(rt32):
    problem, seconds = selfcheck._in_child(rt32.info)
    assert problem is None and seconds > 0


def test_a_first_run_on_a_fresh_machine_ends_with_status_zero(tmp_path):
    """Every driver's first self-check happens on an empty cache; whatever a driver does to its process
    (PoCL on AMD Zen 4 aborts it at exit), the user's process chooses a device and ends well."""
    script = "from opencl import get_runtime; print(get_runtime())"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "NEURONET_CACHE": str(tmp_path / "cache"), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("Runtime(")


def test_a_module_of_the_users_in_the_current_folder_does_not_fail_the_check(rt32, tmp_path, monkeypatch):
    """`neuronet devices` run from a folder holding the user's own `dataclasses.py` failed every device's
    check ("the driver ended the self-check's process (exit status 1): ...") and kept the verdict for every
    later run from anywhere: the check's `python -c` had the current folder first on its path. It runs
    without it."""
    (tmp_path / "dataclasses.py").write_text('raise SystemExit("the user\'s own dataclasses.py")\n')
    monkeypatch.chdir(tmp_path)
    problem, seconds = selfcheck._in_child(rt32.info)
    assert problem is None and seconds > 0
