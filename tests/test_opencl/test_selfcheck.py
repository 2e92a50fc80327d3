"""The self-check every device passes before it is chosen (``opencl.selfcheck``), on the real devices."""

from __future__ import annotations

from opencl import memory, selfcheck


def test_every_usable_device_passes_and_is_timed(rt32):
    result = selfcheck.verdict(rt32.info, fresh=True)
    assert result.usable and result.seconds > 0 and not result.cached


def test_wrong_numbers_fail_the_check_with_what_differed(rt32, monkeypatch):
    """A driver that compiles but computes wrong products (here: one that leaves its output at 0.25)."""

    def wrong(rt, A, B, C, **options):
        memory.fill(C, 0.25)

    monkeypatch.setattr(selfcheck, "gemm", wrong)
    result = selfcheck._run(rt32.info)
    assert result.problem.startswith("wrong results: GEMM x·wᵀ + b, tanh differs from NumPy by")
    assert result.seconds is None


def test_a_driver_error_is_the_reason_in_one_line(rt32, monkeypatch):
    def failing(rt, A, B, C, **options):
        raise RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES\nmore detail")

    monkeypatch.setattr(selfcheck, "gemm", failing)
    assert selfcheck._run(rt32.info).problem == "clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES"
