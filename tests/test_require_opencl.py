"""``NEURONET_REQUIRE_OPENCL=1`` makes every skipped OpenCL test module or test a failure (one hook in
tests/conftest.py), so CI cannot pass without running the kernels; without it they skip as on a user's
machine. Each case runs a real pytest process on a module written here, with the project's conftest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
# The session-start device check of the conftest needs the runtime (checked without importing it here:
# pytester restores sys.modules after each test, and pyopencl's extension cannot be imported twice).
needs_pyopencl = pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None, reason="needs pyopencl")

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


def run(pytester, monkeypatch, required: str):
    monkeypatch.setenv("NEURONET_REQUIRE_OPENCL", required)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**{f"test_{name}_opencl": text for name, text in MODULES.items()}, **OTHERS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--continue-on-collection-errors")


@needs_pyopencl
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
