"""Device listing and choice: argument > NEURONET_DEVICE > first GPU > first CPU, with clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opencl import DeviceChoiceError, DtypeError, choose_device, get_runtime, list_devices
from opencl.choice import ENV_DEVICE
from opencl.device import Runtime

from .conftest import USABLE

ROOT = Path(__file__).resolve().parents[2]


def test_list_devices_reports_capabilities():
    infos = list_devices()
    assert infos
    for d in infos:
        assert d.index.count(":") == 1
        assert d.kind in ("gpu", "cpu", "accelerator", "other")
        assert d.compute_units >= 1 and d.global_mem_bytes > 0 and d.max_work_group_size >= 1
        assert d.base_align_bytes >= 4
        assert d.alignment(np.float32) == max(1, d.base_align_bytes // 4)


def test_default_prefers_gpu_then_cpu(monkeypatch):
    monkeypatch.delenv(ENV_DEVICE, raising=False)
    choice = choose_device()
    kinds = [d.kind for d in USABLE]
    expected = "gpu" if "gpu" in kinds else "cpu"
    assert choice.info.kind == expected
    assert choice.reason.startswith("default")


def test_argument_beats_environment(monkeypatch):
    target = USABLE[-1]
    monkeypatch.setenv(ENV_DEVICE, "no-such-device-name")
    assert choose_device(target.index).info == target
    assert "argument" in choose_device(target.index).reason


def test_environment_forms(monkeypatch):
    target = USABLE[0]
    for spec in (target.index, target.kind.upper(), target.name[2:8].lower()):
        monkeypatch.setenv(ENV_DEVICE, spec)
        choice = choose_device()
        assert choice.info.kind == target.kind
        assert ENV_DEVICE in choice.reason


def test_unknown_device_lists_what_exists(monkeypatch):
    monkeypatch.delenv(ENV_DEVICE, raising=False)
    with pytest.raises(DeviceChoiceError, match=r"available: .*0:0") as err:
        choose_device("nonexistent-accelerator-9000")
    assert isinstance(err.value, ValueError)
    with pytest.raises(DeviceChoiceError):
        choose_device("7:7")


def test_float64_only_with_fp64():
    for d in USABLE:
        if d.fp64:
            rt = Runtime(d, np.float64)
            assert rt.real == "double" and rt.alignment == max(1, d.base_align_bytes // 8)
        else:
            with pytest.raises(DtypeError, match="cl_khr_fp64"):
                Runtime(d, np.float64)
    with pytest.raises(DtypeError):
        Runtime(USABLE[0], np.int32)


def test_runtime_is_shared_per_device_and_dtype():
    d = USABLE[0]
    assert get_runtime(d) is get_runtime(d)
    assert get_runtime(d, np.float32) is not get_runtime(d, np.float32, profile=True)


def test_no_usable_device_message_names_the_fix(tmp_path):
    """With the system's OpenCL vendors hidden: a device still works, or the error says what to install."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path), "PYTHONPATH": path}
    env.pop(ENV_DEVICE, None)
    code = (
        "from opencl import choose_device, NoDeviceError\n"
        "try:\n    print('ok', choose_device().info.name)\n"
        "except NoDeviceError as e:\n    print('error', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ") or ("pocl" in out.stdout.lower() and "install" in out.stdout)
