"""Which OpenCL device is chosen (``opencl.choice``) and how self-checks are kept (``opencl.selfcheck``),
on simulated devices and verdicts: the processors this machine is not (an AMD Zen 4 where pip's PoCL cannot
compile, a GPU beside two CPU drivers) are cases here. The real drivers are made to fail in
``tests/test_opencl/test_vendors.py``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyopencl")

from opencl import choice, selfcheck
from opencl.device import DeviceInfo
from opencl.errors import NoDeviceError
from opencl.selfcheck import Verdict


def fake(
    index: str,
    name: str,
    kind: str = "cpu",
    platform: str = "Portable Computing Language",
    driver: str = "3.0",
) -> DeviceInfo:
    return DeviceInfo(
        index,
        platform,
        f"OpenCL 3.0 {platform}",
        name,
        kind,
        2,
        2**33,
        2**16,
        1024,
        True,
        driver,
        128,
        device=None,
    )


POCL = fake("1:0", "pthread-AMD EPYC 9454 48-Core Processor")
INTEL = fake("0:0", "AMD EPYC 9454 48-Core Processor", platform="Intel(R) OpenCL", driver="2026.22.10.0")
GPU = fake("2:0", "NVIDIA H100", kind="gpu", platform="NVIDIA CUDA", driver="580.1")
ZEN4 = "error: unknown target CPU 'generic'"


@pytest.fixture
def machine(monkeypatch):
    """``machine(devices, verdicts)``: the devices listed and each one's self-check (problem or seconds)."""

    def setup(devices: list[DeviceInfo], verdicts: dict[str, str | float]) -> None:
        monkeypatch.delenv(choice.ENV_DEVICE, raising=False)
        monkeypatch.setattr(choice, "list_devices", lambda: list(devices))

        def fake_verdict(info: DeviceInfo, fresh: bool = False) -> Verdict:
            v = verdicts[info.index]
            return Verdict(v, None, "now") if isinstance(v, str) else Verdict(None, v, "now")

        monkeypatch.setattr(choice, "verdict", fake_verdict)

    return setup


def test_the_fastest_cpu_that_passes_is_chosen(machine):
    machine([INTEL, POCL], {"0:0": 0.004, "1:0": 0.003})
    chosen = choice.choose_device()
    assert chosen.info is POCL
    assert "fastest of 2 CPUs" in chosen.reason and "3.00 ms" in chosen.reason
    assert [(r.info, r.reason) for r in chosen.rejected] == [
        (INTEL, "slower: 4.00 ms per timed step against 3.00 ms")
    ]


def test_pip_pocl_that_cannot_compile_for_the_cpu_leaves_intels_runtime(machine):
    """The AMD Zen 4 case: PoCL's LLVM 14 does not know the CPU, Intel's runtime compiles for it."""
    machine([INTEL, POCL], {"0:0": 0.004, "1:0": ZEN4})
    chosen = choice.choose_device()
    assert chosen.info is INTEL and chosen.reason.startswith("default: the fastest of 2 CPUs")
    assert [r.info for r in chosen.rejected] == [POCL]
    assert chosen.rejected[0].reason == f"self-check failed: {ZEN4}"


def test_a_gpu_wins_over_faster_cpus(machine):
    machine([INTEL, POCL, GPU], {"0:0": 0.001, "1:0": 0.001, "2:0": 0.05})
    chosen = choice.choose_device()
    assert chosen.info is GPU and "the GPU" in chosen.reason


def test_a_gpu_that_fails_leaves_a_cpu_and_says_why(machine):
    machine([GPU, INTEL, POCL], {"0:0": 0.004, "1:0": ZEN4, "2:0": "Context failed: DEVICE_NOT_AVAILABLE"})
    chosen = choice.choose_device()
    assert chosen.info is INTEL
    assert {r.info.index: r.reason for r in chosen.rejected} == {
        "2:0": "self-check failed: Context failed: DEVICE_NOT_AVAILABLE",
        "1:0": f"self-check failed: {ZEN4}",
    }


def test_no_device_that_passes_is_one_error_naming_each_and_the_fix(machine):
    machine([INTEL, POCL], {"0:0": "Context failed: DEVICE_NOT_AVAILABLE", "1:0": ZEN4})
    with pytest.raises(NoDeviceError) as err:
        choice.choose_device()
    text = str(err.value)
    assert isinstance(err.value, OSError) and "\n" not in text
    assert "0:0 AMD EPYC 9454 48-Core Processor: self-check failed: Context failed" in text
    assert ZEN4 in text and "pip install intel-opencl-rt" in text and "--backend numpy" in text


def test_an_explicit_choice_is_never_second_guessed(machine, monkeypatch):
    machine([INTEL, POCL], {"0:0": 0.004, "1:0": ZEN4})
    monkeypatch.setenv(choice.ENV_DEVICE, "1:0")
    chosen = choice.choose_device()
    assert (
        chosen.info is POCL
        and "NEURONET_DEVICE=1:0" in chosen.reason
        and "failed the self-check" in chosen.reason
    )


def test_a_kind_or_name_matching_several_takes_the_fastest_that_passes(machine):
    machine([INTEL, POCL], {"0:0": 0.004, "1:0": 0.003})
    assert choice.choose_device("cpu").info is POCL
    assert choice.choose_device("epyc").info is POCL  # both names hold it
    assert choice.choose_device("intel(r) opencl").info is INTEL  # the platform's name
    assert "the fastest it matches" in choice.choose_device("cpu").reason


# --- the kept verdicts ----------------------------------------------------------------------------------


@pytest.fixture
def counted_runs(monkeypatch):
    """Self-checks that count how often they really ran, and a process memo emptied first."""
    runs: list[str] = []

    def run(info: DeviceInfo) -> Verdict:
        runs.append(info.index)
        return Verdict(None, 0.002, "2026-01-01T00:00:00+00:00")

    monkeypatch.setattr(selfcheck, "_run", run)
    monkeypatch.setattr(selfcheck, "_memo", {})
    return runs


def test_a_verdict_is_kept_for_the_next_process(counted_runs, monkeypatch):
    first = selfcheck.verdict(POCL)
    assert counted_runs == ["1:0"] and not first.cached
    monkeypatch.setattr(selfcheck, "_memo", {})  # a new process: only the file is left
    again = selfcheck.verdict(POCL)
    assert counted_runs == ["1:0"] and again.cached and again.seconds == first.seconds
    selfcheck.verdict(POCL, fresh=True)  # neuronet devices --recheck
    assert counted_runs == ["1:0", "1:0"]


def test_another_driver_version_or_setting_is_checked_again(counted_runs, monkeypatch):
    selfcheck.verdict(POCL)
    selfcheck.verdict(fake("1:0", POCL.name, driver="3.1"))
    monkeypatch.setenv("POCL_EXTRA_BUILD_FLAGS", "-O0")
    selfcheck.verdict(POCL)
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")
    selfcheck.verdict(POCL)
    assert counted_runs == ["1:0", "1:0", "1:0"]


def test_a_damaged_or_foreign_verdict_file_is_replaced(counted_runs, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path))
    path = tmp_path / "opencl" / "devices.json"
    path.parent.mkdir()
    for content in ("{not json", "[1, 2]", json.dumps({"k": {"problem": None}}), "\x00\xff"):
        path.write_text(content, encoding="latin-1")
        monkeypatch.setattr(selfcheck, "_memo", {})
        assert selfcheck.verdict(POCL).usable
    assert len(counted_runs) == 4
    assert json.loads(path.read_text())  # rewritten as ours


def test_a_device_choice_does_not_flip_with_the_load(counted_runs, monkeypatch):
    """Once timed, two processes choose the same CPU device whatever the machine's load is later."""
    monkeypatch.setattr(choice, "list_devices", lambda: [INTEL, POCL])
    monkeypatch.delenv(choice.ENV_DEVICE, raising=False)
    timings = {"0:0": 0.003, "1:0": 0.004}
    monkeypatch.setattr(selfcheck, "_run", lambda info: Verdict(None, timings[info.index], "now"))
    assert choice.choose_device().info is INTEL
    timings.update({"0:0": 0.009, "1:0": 0.001})  # what a busier machine would measure now
    monkeypatch.setattr(selfcheck, "_memo", {})
    assert choice.choose_device().info is INTEL
