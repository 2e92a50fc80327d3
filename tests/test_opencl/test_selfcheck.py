"""The self-check every device passes before it is chosen (``opencl.selfcheck``), on the real devices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencl import memory, selfcheck
from opencl.device import DeviceInfo

ROOT = Path(__file__).resolve().parents[2]


def test_every_usable_device_passes_and_is_timed(rt32):
    result = selfcheck.verdict(rt32.info, fresh=True)
    assert result.usable and result.seconds > 0 and not result.cached


def test_wrong_numbers_fail_the_check_with_what_differed(rt32, monkeypatch):
    """A driver that compiles but computes wrong products (here: one that leaves its output at 0.25)."""

    def wrong(rt, A, B, C, **options):
        memory.fill(C, 0.25)

    monkeypatch.setattr(selfcheck, "gemm", wrong)
    problem, seconds = selfcheck.check_here(rt32.info)
    assert problem.startswith("wrong results: GEMM x·wᵀ + b, tanh differs from NumPy by")
    assert seconds is None


def test_a_driver_error_is_the_reason_in_one_line(rt32, monkeypatch):
    def failing(rt, A, B, C, **options):
        raise RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES\nmore detail")

    monkeypatch.setattr(selfcheck, "gemm", failing)
    assert selfcheck.check_here(rt32.info) == ("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES", None)


CHECK_IN_TWO_PROCESSES = """
import os, sys, time
from opencl import selfcheck
from opencl.device import DeviceInfo

def slow_check(info):  # each process times the device differently, as under each other's load
    time.sleep(1.5)
    return selfcheck.Verdict(None, float(os.getpid()), "now")

selfcheck._run = slow_check
info = DeviceInfo("0:0", "Some CL", "OpenCL 3.0", "some cpu", "cpu", 2, 2**30, 2**16, 1024, True, "1.0", 128,
                  None)
print(selfcheck.verdict(info).seconds)
"""


def test_processes_starting_together_on_an_empty_cache_choose_by_one_self_check(tmp_path):
    """Two commands started at once on a fresh machine: the second waits for the first's self-check and
    uses it, so both choose the same device (a timing of each, taken under the other's load, could pick
    different devices and so give different float32 figures)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "NEURONET_CACHE": str(tmp_path / "cache"), "PYTHONPATH": path}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHECK_IN_TWO_PROCESSES],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    timings = {out.strip() for out, _ in outs}
    assert len(timings) == 1, timings
    assert str(float(procs[0].pid)) in timings or str(float(procs[1].pid)) in timings


def test_a_read_only_cache_checks_the_device_without_the_lock(tmp_path, monkeypatch):
    """Where the lock file cannot be made (the cache is a file here, as a read-only or full one refuses
    it), the check still runs and its verdict is returned."""
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("NEURONET_CACHE", str(blocked))
    monkeypatch.setattr(selfcheck, "_memo", {})
    monkeypatch.setattr(selfcheck, "_run", lambda info: selfcheck.Verdict(None, 0.25, "now"))
    info = DeviceInfo("0:0", "P", "v", "d", "cpu", 1, 1, 1, 1, True, "1", 128, None)
    assert selfcheck.verdict(info).seconds == 0.25


def _checked_anew(tmp_path, monkeypatch) -> tuple[DeviceInfo, Path]:
    """A device whose check, run now, passes in 0.25 s, and where its kept verdict would be."""
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(selfcheck, "_memo", {})
    monkeypatch.setattr(selfcheck, "_run", lambda info: selfcheck.Verdict(None, 0.25, "now"))
    kept = tmp_path / "cache" / "opencl" / "devices.json"
    kept.parent.mkdir(parents=True)
    return DeviceInfo("0:0", "P", "v", "d", "cpu", 1, 1, 1, 1, True, "1", 128, None), kept


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.timeout(60)
def test_a_cache_file_that_is_not_a_regular_file_is_not_read(tmp_path, monkeypatch):
    """devices.json as a FIFO hung `neuronet devices` (killed by `timeout 120`, status 124); as a link to
    /dev/zero it read until the process was killed (status 137; not tried here, it would fill the memory
    of a machine without the fix). Only a regular file is read: the device is checked again."""
    info, kept = _checked_anew(tmp_path, monkeypatch)
    os.mkfifo(kept)
    assert selfcheck.verdict(info).seconds == 0.25


@pytest.mark.parametrize("seconds", ['"fast"', "null", "[1]", "NaN", "true"])
def test_a_kept_pass_without_a_time_is_checked_again(tmp_path, monkeypatch, seconds):
    """A pass kept with its time edited into text, null or a list ended `neuronet devices` with "internal
    error: TypeError: unsupported operand type(s) for *: 'NoneType' and 'float'" (status 1); NaN was
    ranked as "nan ms per timed step". Such a verdict is not ours: the device is checked again."""
    info, kept = _checked_anew(tmp_path, monkeypatch)
    kept.write_text(
        f'{{"{selfcheck._key(info)}": {{"problem": null, "seconds": {seconds}, "checked": "x"}}}}'
    )
    assert selfcheck.verdict(info).seconds == 0.25
