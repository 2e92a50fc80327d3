"""Prepared launches: the host work of a repeated product done once, so each later call costs a few µs.

A training step repeats the same products on new buffers: the same shapes, transpositions, scalars and
kernel variants, only the arrays differ. Worked out on every call (validation, tile and variant choice,
program lookup by defines, packing 20-odd kernel arguments) that host work cost about 24 µs per product on
an H200's host, against cuBLAS's 15, which made the 14 small products of a batch-256 Fractal step slower
than cuBLAS although each kernel is within 10 % of it (benchmarks/RESULTS.md, GEMM). A ``Plan`` holds the
outcome for one operand layout: its ``Launch`` objects each own a kernel object whose constant arguments
were set once, so a call sets only the operands' buffers (and their offsets when the views moved) and
enqueues. OpenCL copies a kernel's arguments at enqueue time, so changing them afterwards never touches a
launch already queued.

An argument list is written with ``Operand`` placeholders where an operand's buffer goes, followed by its
element offset (the ``(buffer, offset)`` convention of ``opencl.memory``).
"""

from __future__ import annotations

from typing import NamedTuple

import pyopencl as cl

from opencl.program import Kernels


class Operand(NamedTuple):
    """Where an operand's buffer goes in an argument list: 0..3 the call's arrays (A, B, C, bias), 4 the
    plan's scratch buffer (its offset is set in the template), 5..8 the second product's arrays of a pair
    (``opencl.blas.gemm_pair``)."""

    slot: int


OP_A, OP_B, OP_C, OP_BIAS, SCRATCH, OP_A2, OP_B2, OP_C2, OP_BIAS2 = (Operand(i) for i in range(9))
_SCRATCH = SCRATCH.slot
_enqueue = cl.enqueue_nd_range_kernel


def operand(slot: Operand, array) -> tuple[Operand, int]:
    """The two kernel arguments of ``array`` with its buffer left as a placeholder."""
    return slot, array.offset // array.dtype.itemsize


class Launch:
    """One kernel launch of a plan: its own kernel object, grid and argument template."""

    __slots__ = ("_offsets", "_template", "buffers", "global_size", "kernel", "local_size", "name")

    def __init__(
        self,
        kernels: Kernels,
        name: str,
        global_size: tuple[int, ...],
        local_size: tuple[int, ...] | None,
        *args,
    ) -> None:
        self.kernel = kernels.fresh(name)
        self.name = name
        self.global_size = tuple(int(g) for g in global_size)
        self.local_size = None if local_size is None else tuple(int(v) for v in local_size)
        # (argument index of the buffer, operand slot) for each operand of this launch
        self.buffers = tuple((i, a.slot) for i, a in enumerate(args) if isinstance(a, Operand))
        self._template = list(args)
        self._offsets: tuple | None = None  # the operands' byte offsets the kernel's arguments were set for

    def run(self, queue: cl.CommandQueue, buffers: tuple, offsets: tuple, itemsize: int) -> cl.Event:
        """Set this call's buffers (every argument when the views' offsets changed since the last call)
        and enqueue."""
        kernel = self.kernel
        if offsets == self._offsets:
            for index, slot in self.buffers:
                kernel.set_arg(index, buffers[slot])
        else:
            args = self._template
            for index, slot in self.buffers:
                args[index] = buffers[slot]
                if slot != _SCRATCH:
                    args[index + 1] = offsets[slot] // itemsize
            kernel.set_args(*args)
            for index, _ in self.buffers:  # keep no buffer alive through the template
                args[index] = None
            self._offsets = offsets
        return _enqueue(queue, kernel, self.global_size, self.local_size)


class Plan:
    """The launches of one product for one operand layout, and the scratch they share (elements)."""

    __slots__ = ("_allocator", "_itemsize", "_profiler", "_queue", "launches", "scratch")

    def __init__(self, rt, launches: list[Launch], scratch: int = 0) -> None:
        self.launches = tuple(launches)
        self.scratch = scratch * rt.dtype.itemsize
        self._allocator, self._queue, self._profiler = rt.allocator, rt.queue, rt.profiler
        self._itemsize = rt.dtype.itemsize

    def _buffers(self, a, b, c, bias, second: tuple) -> tuple[tuple, tuple]:
        buffers = (
            a.base_data,
            b.base_data,
            c.base_data,
            bias.base_data,
            self._allocator(self.scratch) if self.scratch else None,
        )
        offsets = (a.offset, b.offset, c.offset, bias.offset, 0)
        if second:  # a pair's second product: slots 5..8
            a2, b2, c2, bias2 = second
            buffers += (a2.base_data, b2.base_data, c2.base_data, bias2.base_data)
            offsets += (a2.offset, b2.offset, c2.offset, bias2.offset)
        return buffers, offsets

    def device_seconds(self, queue: cl.CommandQueue, a, b, c, bias, reps: int, second: tuple = ()) -> float:
        """Device seconds per call, run ``reps`` times back to back on ``queue`` (a profiling queue of the
        same context, such as ``Runtime.timing_queue``) after an untimed call: from the first launch's start
        to the last one's end, over ``reps``. Back to back as in a training step, so what the device spends
        between launches (a launch's fixed cost, the gap before a split-K reduction) counts; one call's own
        events on an idle queue are mostly that fixed cost (about 8 µs on an H200), whatever the kernel.
        ``second``: a pair's second (A, B, C, bias)."""
        buffers, offsets = self._buffers(a, b, c, bias, second)

        def call() -> list[cl.Event]:
            return [launch.run(queue, buffers, offsets, self._itemsize) for launch in self.launches]

        call()
        queue.finish()
        first = last = call()
        for _ in range(reps - 1):
            last = call()
        queue.finish()
        return (last[-1].profile.end - first[0].profile.start) * 1e-9 / reps

    def __call__(self, a, b, c, bias, *second) -> None:
        """Launch on these arrays (of the layout the plan was made for: the caller checked); a pair's plan
        takes the second product's (A, B, C, bias) after the first's."""
        buffers, offsets = self._buffers(a, b, c, bias, second)
        profiler = self._profiler
        for launch in self.launches:
            event = launch.run(self._queue, buffers, offsets, self._itemsize)
            if profiler.enabled:
                profiler.record(launch.name, event)
