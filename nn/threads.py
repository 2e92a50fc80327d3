"""How many threads the NumPy backend's BLAS (OpenBLAS, MKL, BLIS) may use, set once per process.

OpenBLAS starts one thread per CPU, and its threads wait for each other by spinning. When other processes
keep the CPUs busy, a product split over all of them waits for the slowest thread, which the scheduler
keeps off its CPU: on a 2-core machine with both cores busy, a Fractal epoch on the NumPy backend went from
0.29 s to 0.70 s (and to 5 s under heavier load, against 1.1 s on one thread). The products of these
networks are small (a batch of 256 by a few hundred units), so a second thread gains little even on an idle
machine. The backend therefore gives BLAS the CPUs that are idle when it starts: the CPUs this process may
run on, less their share of the load average (at least one), through ``threadpoolctl``. A thread count the
user set (``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``BLIS_NUM_THREADS``, ``OMP_NUM_THREADS``) is kept
as it is. ``neuronet devices`` shows the plan.

The thread count does not change the numbers: OpenBLAS and MKL split a product by rows and columns of the
result, never along the summed dimension, so every element is summed in the same order.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from threadpoolctl import threadpool_info, threadpool_limits

USER_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class BlasPlan:
    """BLAS threads for this process and why: ``threads`` None means left as the user set them."""

    threads: int | None
    cpus: int
    why: str


def plan() -> BlasPlan:
    """The thread count the NumPy backend uses, from the environment and the machine's load (see above)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for name in USER_VARIABLES:
        if os.environ.get(name, "").strip():
            return BlasPlan(None, cpus, f"as set by {name}={os.environ[name].strip()}")
    if not hasattr(os, "getloadavg"):
        return BlasPlan(cpus, cpus, "one per CPU (the load is unknown here)")
    load = os.getloadavg()[0]
    busy_share = min(1.0, load / (os.cpu_count() or cpus))
    threads = max(1, min(cpus, math.floor(cpus * (1.0 - busy_share) + 0.5)))
    return BlasPlan(threads, cpus, f"the idle share of {cpus} CPUs at load {load:.1f}")


_applied: list[BlasPlan] = []


def size_blas_threads() -> BlasPlan:
    """Apply ``plan()`` once per process (the first NumPy backend does) and return it."""
    if not _applied:
        chosen = plan()
        if chosen.threads is not None:
            threadpool_limits(limits=chosen.threads, user_api="blas")
        _applied.append(chosen)
    return _applied[0]


def _threads(n: int | None) -> str:
    return f"{n} thread{'' if n == 1 else 's'}"


def describe_blas() -> str:
    """One line: the BLAS libraries NumPy loaded, their threads now, and the plan with its reason."""
    chosen = _applied[0] if _applied else plan()
    libs = [
        f"{lib.get('internal_api', '?')} {lib.get('version') or ''} ({lib.get('architecture') or '?'}), "
        f"{_threads(lib.get('num_threads'))} now"
        for lib in threadpool_info()
        if lib.get("user_api") == "blas"
    ]
    target = "the threads as set" if chosen.threads is None else f"{_threads(chosen.threads)}"
    return f"{'; '.join(libs) or 'no BLAS library loaded'}; the NumPy backend uses {target}: {chosen.why}"
