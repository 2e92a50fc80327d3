"""Kernel programs: built once per runtime and defines, kept kernels, clear build errors."""

from __future__ import annotations

import numpy as np
import pytest

from opencl import KernelBuildError, kernels, memory


def test_programs_are_memoised_per_defines(rt32):
    a = kernels(rt32, "gemm.cl", TM=4)
    assert kernels(rt32, "gemm.cl", TM=4) is a
    assert kernels(rt32, "gemm.cl", TM=2) is not a
    assert a.gemm_tile is a.gemm_tile  # kept objects, not re-created per access
    assert {"gemm_pack_b", "gemm_tile"} <= set(a.names)


def test_scalar_arguments_take_python_numbers(rt32):
    k = kernels(rt32, "probe.cl")
    x = memory.to_device(rt32, np.zeros(7))
    rt32.launch(k.probe, (7,), None, x.base_data)
    np.testing.assert_array_equal(x.get(), np.ones(7))


def test_build_failure_shows_file_options_and_log(rt32):
    with pytest.raises(KernelBuildError) as err:
        kernels(rt32, "gemm.cl", TM="(")
    text = str(err.value)
    assert "gemm.cl" in text and "-DTM=(" in text and "error" in text.lower()


def test_missing_file_and_missing_kernel(rt32):
    with pytest.raises(KernelBuildError, match=r"no_such_file\.cl"):
        kernels(rt32, "no_such_file.cl")
    with pytest.raises(AttributeError, match="no kernel 'nope'"):
        _ = kernels(rt32, "probe.cl").nope


def test_signature_parser_agrees_with_driver_argument_info(rt):
    """The fallback for drivers without argument info reads the same dtypes from the source."""
    from opencl.program import _arg_dtypes, _signature_dtypes, kernels_dir

    for filename, defines in (("gemm.cl", {"TM": 4}), ("gemm_gpu.cl", {"BM": 32, "BN": 32, "BK": 16, "TM": 2,
                                                                        "TN": 2, "TRANS_A": 0, "TRANS_B": 1,
                                                                        "EVEN": 0})):
        k = kernels(rt, filename, **defines)
        source = (kernels_dir() / filename).read_text()
        for name in k.names:
            assert _signature_dtypes(name, source, rt.real, k.path) == _arg_dtypes(k[name], k.path)


def test_successful_builds_stay_quiet(rt, caplog):
    """A build whose compiler prints remarks raises no pyopencl CompilerWarning (they go to the debug log),
    for the library's programs, the device probe and a source that certainly has compiler output."""
    import logging
    import warnings

    from opencl.device import _probe_results, probe
    from opencl.program import build_quietly

    source = '#warning "a remark from the compiler"\n__kernel void k(__global float *x) { x[0] = 1.0f; }\n'
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger="opencl.program"):
        warnings.simplefilter("error")
        build_quietly(rt.context, source, [], "remark.cl")
        kernels(rt, "probe.cl", QUIET_BUILD_TEST=1)  # a fresh build, not the runtime's memo
        _probe_results.pop(rt.info.index, None)
        assert probe(rt.info) is None
    assert any("remark.cl" in r.getMessage() for r in caplog.records)
