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
    k = kernels(rt32, "elementwise.cl")
    x = memory.to_device(rt32, np.zeros(9))
    rt32.launch(k.fill, (7,), None, x.base_data, 2, 1.5, 7)  # uint offset, REAL value, int count
    np.testing.assert_array_equal(x.get(), [0, 0, *[1.5] * 7])


def test_build_failure_shows_file_options_and_log(rt32):
    with pytest.raises(KernelBuildError) as err:
        kernels(rt32, "gemm.cl", TM="(")
    text = str(err.value)
    assert "gemm.cl" in text and "-DTM=(" in text and "error" in text.lower()


def test_missing_file_and_missing_kernel(rt32):
    with pytest.raises(KernelBuildError, match=r"no_such_file\.cl"):
        kernels(rt32, "no_such_file.cl")
    with pytest.raises(AttributeError, match="no kernel 'nope'"):
        _ = kernels(rt32, "elementwise.cl").nope


def test_signature_parser_agrees_with_driver_argument_info(rt):
    """The fallback for drivers without argument info reads the same dtypes from the source.

    Each program is compiled afresh (a define no build had before): Intel's CPU runtime keeps no argument
    info in programs made from binaries, such as pyopencl's binary cache returns, where the library uses
    the fallback."""
    import uuid

    from opencl.program import _arg_dtypes, _signature_dtypes, _with_headers, kernels_dir

    tiles = {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 4}
    for filename, defines in (
        ("gemm.cl", {"TM": 4}),
        ("gemm_gpu.cl", {**tiles, "TRANS_A": 0, "TRANS_B": 1, "EVEN": 0}),  # its reduction: in a header
        (
            "gemm_gpu_pair.cl",
            {
                **tiles,
                "TRANS_A1": 1,
                "TRANS_B1": 0,
                "SPLIT1": 1,
                "EVEN1": 0,
                "VEC_A1": 0,
                "VEC_B1": 0,
                "TRANS_A2": 0,
                "TRANS_B2": 0,
                "SPLIT2": 0,
                "EVEN2": 0,
                "VEC_A2": 0,
                "VEC_B2": 0,
            },
        ),
    ):
        k = kernels(rt, filename, **defines, FRESH_BUILD=uuid.uuid4().int % 2**31)
        source = _with_headers((kernels_dir() / filename).read_text())
        for name in k.names:
            assert _signature_dtypes(name, source, rt.real, k.path) == _arg_dtypes(k[name], k.path)


def test_successful_builds_stay_quiet(rt, caplog):
    """A build whose compiler prints remarks raises no pyopencl CompilerWarning (they go to the debug log),
    for the library's programs, the device self-check and a source that certainly has compiler output."""
    import logging
    import warnings

    from opencl.program import build_quietly
    from opencl.selfcheck import verdict

    source = '#warning "a remark from the compiler"\n__kernel void k(__global float *x) { x[0] = 1.0f; }\n'
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger="opencl.program"):
        warnings.simplefilter("error")
        build_quietly(rt.context, source, [], "remark.cl")
        kernels(rt, "elementwise.cl", QUIET_BUILD_TEST=1)  # a fresh build, not the runtime's memo
        assert verdict(rt.info, fresh=True).usable
    assert any("remark.cl" in r.getMessage() for r in caplog.records)


def test_a_build_that_gives_no_kernels_is_a_build_error(rt32, monkeypatch):
    """pip's PoCL on AMD Zen 4 reports gemm.cl built with no kernels in it: the self-check said
    "gemm.cl defines no kernel 'gemm_dot'" and a run with that device chosen by NEURONET_DEVICE ended
    with "AttributeError: .../gemm.cl defines no kernel 'gemm_dot'", naming a file that does define it.
    The build is refused as such, with the device and options."""
    import opencl.program as program

    real = program.build_quietly
    monkeypatch.setattr(program, "build_quietly", lambda ctx, src, opts, name: real(ctx, "", opts, name))
    with pytest.raises(KernelBuildError, match=r"gemm\.cl for .* gave no kernels"):
        kernels(rt32, "gemm.cl", TM=3)
