"""``NEURONET_REQUIRE_OPENCL=1`` makes every skipped OpenCL test module or test a failure (one hook in
tests/conftest.py), so CI cannot pass without running the kernels; without it they skip as on a user's
machine. Each case runs a real pytest process on a module written here, with the project's conftest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
# The skip hooks are tested on their own: the session-start device check is replaced, so that these cases
# give the same outcomes on a machine with a usable device and on one without (tested apart, below).
HOOKS_ONLY = CONFTEST + "\n\ndef pytest_sessionstart(session):\n    pass\n"
# The session-start device check needs the runtime (checked without importing it here: pytester restores
# sys.modules after each test, and pyopencl's extension cannot be imported twice).
needs_pyopencl = pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None, reason="needs pyopencl")
# Both pip drivers made unusable through their own settings: PoCL refuses the build options, Intel's CPU
# runtime a target CPU it does not know. What a processor that neither compiles for looks like.
NO_USABLE_DEVICE = {"POCL_EXTRA_BUILD_FLAGS": "-mcpu=generic", "CL_CONFIG_CPU_TARGET_ARCH": "generic"}

MODULES = {
    "module_skip": """
import pytest
try:
    raise RuntimeError("kernel build failed")  # not a missing device: a bug the skip used to hide
except Exception as exc:
    pytest.skip(f"no OpenCL device ({exc})", allow_module_level=True)

def test_never_runs():
    pass
""",
    "skipif_mark": """
import pytest
pytestmark = pytest.mark.skipif(True, reason="no OpenCL device")

def test_marked():
    pass
""",
    "importorskip": """
import pytest
pytest.importorskip("pyopencl_that_is_not_installed")

def test_never_runs():
    pass
""",
}


OTHERS = {
    "test_plain": "def test_ok():\n    pass\n",
    "test_gemm_opencl": "import pytest\n\ndef test_gpu_layout():\n    pytest.skip('CPU kernel')\n",
    "test_online_opencl": "import pytest\n\n"
    "@pytest.mark.skipif(True, reason='runs on NVIDIA OpenCL GPUs only')\ndef test_fused():\n    pass\n",
}


def run(pytester, monkeypatch, required: str, conftest: str = HOOKS_ONLY):
    monkeypatch.setenv("NEURONET_REQUIRE_OPENCL", required)
    pytester.makeconftest(conftest)
    pytester.makepyfile(**{f"test_{name}_opencl": text for name, text in MODULES.items()}, **OTHERS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--continue-on-collection-errors")


def test_with_require_opencl_every_opencl_skip_fails(pytester, monkeypatch):
    result = run(pytester, monkeypatch, "1")
    assert result.ret != 0
    # Two module-level skips become collection errors, the skipif-marked test an error at setup; skips for
    # other reasons (a GPU-only test on a CPU device, an NVIDIA-only path) stay skips.
    result.assert_outcomes(passed=1, errors=3, skipped=2)
    assert result.stdout.str().count("NEURONET_REQUIRE_OPENCL=1, but this OpenCL test was skipped") >= 3


def test_without_it_they_skip(pytester, monkeypatch):
    result = run(pytester, monkeypatch, "0")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=5)


@needs_pyopencl
def test_with_require_opencl_a_machine_without_usable_device_fails_at_once(pytester, monkeypatch):
    """The session-start check: no test runs, and the one line says why each device was refused."""
    for name, value in NO_USABLE_DEVICE.items():
        monkeypatch.setenv(name, value)
    result = run(pytester, monkeypatch, "1", conftest=CONFTEST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "NEURONET_REQUIRE_OPENCL=1 but no usable OpenCL device" in err
    assert "self-check failed" in err and "pip install" in err


@needs_pyopencl
def test_without_a_usable_device_the_opencl_tests_skip(pytester, monkeypatch):
    """A user's machine where no driver compiles: the same project conftest lets the suite pass."""
    for name, value in NO_USABLE_DEVICE.items():
        monkeypatch.setenv(name, value)
    result = run(pytester, monkeypatch, "0", conftest=CONFTEST)
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=5)
