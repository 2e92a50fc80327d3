"""What every benchmark prints first, and the comparisons it refuses.

A figure means something only next to the machine it ran on, the CPUs the process was given (its CPU
affinity: ``taskset -c 0,1`` gives two of a larger host) and how many processes and threads each contestant
ran. A peer allowed more processes × threads than the CPUs given either competes with itself for them or,
on a larger host, runs on CPUs the others were not given: backtesting.py's pool takes one process per CPU
of the host (``os.cpu_count()``), not per CPU given, which made an earlier optimisation figure look better
than it was. ``header`` prints all of it and raises ``UnfairComparison`` for such a peer.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass


class UnfairComparison(SystemExit):
    """A peer would run on more CPUs than were given; the message says which and how to size it."""


@dataclass(frozen=True)
class Contestant:
    """One side of a comparison: its processes and the threads each runs at once."""

    name: str
    processes: int = 1
    threads: int = 1  # per process: BLAS, OpenMP or OpenCL CPU device threads
    peer: bool = True  # another library's figure (ours are printed, not checked)
    note: str = ""

    @property
    def width(self) -> int:
        return self.processes * self.threads

    def describe(self) -> str:
        procs = f"{self.processes} process{'es' if self.processes > 1 else ''}"
        text = f"{self.name}: {procs} x {self.threads} thread{'s' if self.threads > 1 else ''}"
        return text + (f" ({self.note})" if self.note else "")


def cpus_given() -> list[int]:
    """The CPUs this process may run on (all of them where the OS has no affinity call)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def machine() -> str:
    """CPU model, host CPUs and memory, OS and Python."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        import psutil

        memory = f", {psutil.virtual_memory().total / 2**30:.0f} GiB"
    except ImportError:
        memory = ""
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}"
    )


def pinning() -> str:
    """The CPUs given, as ``taskset`` writes them, and whether that is the whole host."""
    given, total = cpus_given(), os.cpu_count() or 1
    listed = ",".join(map(str, given))
    if len(given) == total:
        return f"all {total} CPUs ({listed}; not pinned)"
    return f"CPUs {listed}: {len(given)} of the host's {total} (CPU affinity)"


def load() -> str:
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return "{:.2f} {:.2f} {:.2f} (1, 5, 15 min)".format(*os.getloadavg())


def blas_threads() -> int:
    """Threads of the BLAS that NumPy calls (threadpoolctl's view; 1 where none is found)."""
    from threadpoolctl import threadpool_info

    counts = [info["num_threads"] for info in threadpool_info() if info.get("user_api") == "blas"]
    return max(counts, default=1)


def opencl_threads(rt) -> tuple[int, str]:
    """Host threads of an OpenCL runtime's device: a CPU device's compute units (its thread pool); one
    host thread that feeds a GPU."""
    device = rt.info.device
    if rt.is_cpu:
        return int(device.max_compute_units), f"OpenCL CPU device {rt.info.name}"
    return 1, f"OpenCL GPU {rt.info.name}"


CLOCKS = ("wall", "cpu")


def use_clock(name: str) -> None:
    """Time with ``name``'s clock (one of ``CLOCKS``, as the option's choices check) from here on.

    ``cpu``: every ``time.perf_counter`` in this process (the library's own phase timings included) reads
    the process's CPU time (``time.process_time``), so on a shared machine the other jobs stay out of a
    ratio whose contestants all run in this one process, one after the other; a contestant with worker
    processes is not measured this way."""
    if name == "cpu":
        time.perf_counter = time.process_time
    print(f"clock: {'CPU seconds of this process (time.process_time)' if name == 'cpu' else 'wall clock'}")


def header(contestants: Sequence[Contestant]) -> None:
    """Print the machine, the pinning, the load and each contestant's processes and threads; refuse
    (``UnfairComparison``) where a peer's would exceed the CPUs given."""
    given = len(cpus_given())
    print(f"machine: {machine()}")
    print(f"pinning: {pinning()}; load average {load()}")
    for c in contestants:
        print(f"  {c.describe()}")
    for c in contestants:
        if c.peer and c.width > given:
            raise UnfairComparison(
                f"refusing to compare: {c.name} would run {c.processes} x {c.threads} at once on the "
                f"{given} CPUs given; size it to them (or pin this process to more CPUs)"
            )


def numpy_contestant(name: str = "NumPy", peer: bool = True) -> Contestant:
    """NumPy's products: one process and its BLAS's threads."""
    return Contestant(name, threads=blas_threads(), peer=peer, note="BLAS threads")


def torch_contestant(torch, device: str) -> Contestant:
    """PyTorch on the CPU (its intra-op threads) or on CUDA (one host thread feeding the GPU)."""
    if device == "cuda":
        return Contestant(f"PyTorch {torch.__version__} CUDA", note=torch.cuda.get_device_name())
    return Contestant(f"PyTorch {torch.__version__} CPU", threads=torch.get_num_threads(), note="intra-op")


def opencl_contestant(rt, name: str = "neuronet OpenCL") -> Contestant:
    threads, note = opencl_threads(rt)
    return Contestant(name, threads=threads, peer=False, note=note)


def python_contestant(name: str, peer: bool) -> Contestant:
    """A pure-Python loop: one process, one thread at a time."""
    return Contestant(name, peer=peer)
