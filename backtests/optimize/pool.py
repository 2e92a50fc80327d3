"""Local worker processes: one process pool, with the data every task needs installed in each worker once.

A local Dask cluster (a scheduler, a nanny per worker, workers that import pandas and the library anew)
took 1.7-3 s to start, longer than a whole 200-pass grid of a cheap EA on two cores, and its scheduler and
the client's event loop took CPU from the passes. A pool of plain processes starts in milliseconds when
forked, and a task costs a pickled message each way. Dask remains the engine for a running cluster
(``--scheduler``).

How workers start (``start_method``): forked on Linux where that is safe, as backtesting.py's pool is: the
children get the imported library and the shared data for nothing. Forking is safe when this process runs
no other Python thread (a notebook's, a progress bar's monitor, a Dask client's) and has loaded no GPU or
OpenCL driver (their threads and device handles do not exist in a forked child, which then hangs or fails
in its first kernel). Elsewhere workers start by "forkserver" (Linux) or "spawn" (macOS, Windows): each
imports the library, and the shared data reach it pickled, once. A start method set with
``multiprocessing.set_start_method`` is used as set.

Tasks and shared data travel with cloudpickle, so an EA class from a file the user named (a module a
worker cannot import by name) reaches the workers by value. Only this process's own objects take that
road, over the pipes between it and the workers it started (as every ``ProcessPoolExecutor`` message
does): nothing read from a file, a study store or the network is ever unpickled here. Model, report and
study files are read without pickle (``nn.io``, JSON, SQLite).

A worker that dies (killed, out of memory, a crash in a native library) breaks the pool: Python's pool
then fails every task in flight. The pool is started again and those tasks are submitted again, up to
``MAX_RESUBMITS`` times each. Ctrl-C reaches this process alone (workers ignore SIGINT); the tasks still
running are abandoned and their workers stopped at once, so a long pass does not hold the exit.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import cloudpickle

log = logging.getLogger(__name__)

MAX_RESUBMITS = 3  # times one task may be lost with its worker before the run gives up
# Shared libraries of GPU and OpenCL drivers (file names as loaded): a process holding one is not forked.
DRIVERS = ("libpocl", "libintelocl", "libnvidia-opencl", "libcuda.", "libamdocl", "libamdhip", "libze_")
PRELOAD = ["backtests.optimize.passes"]  # what a forkserver imports once for every worker it forks

_OBJECTS: dict[int, Any] = {}  # in a worker: the shared objects by key


class Payload:
    """An object that crosses to a worker with cloudpickle (by value where it is not importable by name);
    a forked worker inherits it without any pickling."""

    def __init__(self, obj: Any):
        self.obj = obj

    def __reduce__(self):
        return _unpack, (cloudpickle.dumps(self.obj),)


def _unpack(data: bytes) -> Payload:
    """In a worker: a payload this pool's own process pickled (see the module docstring)."""
    return Payload(cloudpickle.loads(data))


def _init_worker(objects: Payload) -> None:
    """Ctrl-C is the client's to handle; the shared objects become this worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _OBJECTS.clear()
    _OBJECTS.update(objects.obj)


def _call(task: Payload) -> Any:
    key, fn, args = task.obj
    return fn(_OBJECTS[key], *args)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: ``taskset``, a container's CPU set), else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def gpu_driver_loaded() -> bool:
    """Whether this process has loaded a GPU or OpenCL driver (Linux's map of the process; unreadable
    counts as loaded)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return True
    names = {line.rsplit("/", 1)[-1] for line in maps.splitlines() if ".so" in line}
    return any(name.startswith(DRIVERS) for name in names)


def start_method() -> str:
    """How the next pool starts its workers (see the module docstring)."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    if chosen is not None:
        return chosen
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods:
        if threading.active_count() == 1 and not gpu_driver_loaded():
            return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


class LocalPool:
    """``workers`` processes that run ``fn(shared object, *args)`` tasks."""

    def __init__(self, workers: int):
        self.workers = workers
        self.objects: dict[int, Any] = {}
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self._installed: set[int] = set()  # keys of the objects the running workers hold
        self.method: str | None = None  # the start method of the running workers

    def share(self, obj: Any) -> int:
        """Keep ``obj`` for every worker; the pool (re)starts now, so that workers are forked before this
        process starts other threads (a progress bar's)."""
        key = len(self.objects)
        self.objects[key] = obj
        self._start()
        return key

    def _start(self) -> None:
        if self._executor is not None and self._installed == set(self.objects):
            return
        self.close()
        self.method = start_method()
        context = multiprocessing.get_context(self.method)
        if self.method == "forkserver":
            context.set_forkserver_preload(PRELOAD)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:  # every worker starts now, inheriting an ignored Ctrl-C
            self._executor = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_init_worker, initargs=(Payload(self.objects),)
            )
            for f in [self._executor.submit(os.getpid) for _ in range(self.workers)]:
                f.result()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        self._installed = set(self.objects)
        log.debug("%d worker processes started by %s", self.workers, self.method)

    def stream(
        self, fn: Callable[..., Any], key: int, tasks: Iterable[tuple[Any, tuple]], limit: int
    ) -> Iterator[tuple[Any, Any]]:
        """``(tag, fn(shared object, *args))`` in completion order, ``limit`` tasks in flight. A task's
        exception ends the stream with it."""
        self._start()
        it = iter(tasks)
        live: dict[concurrent.futures.Future, tuple[Any, tuple, int]] = {}  # future -> (tag, args, losses)

        def submit(tag: Any, args: tuple, losses: int) -> None:
            try:
                future = self._executor.submit(_call, Payload((key, fn, args)))
            except BrokenProcessPool as exc:  # the pool broke since the last wait: fail it like the others
                future = concurrent.futures.Future()
                future.set_exception(exc)
            live[future] = (tag, args, losses)

        def submit_next() -> None:
            for tag, args in it:
                submit(tag, args, 0)
                return

        try:
            for _ in range(limit):
                submit_next()
            while live:
                done, _ = concurrent.futures.wait(live, return_when=concurrent.futures.FIRST_COMPLETED)
                failed = [f for f in done if f.exception() is not None]
                for future in done - set(failed):
                    tag, _, _ = live.pop(future)
                    submit_next()
                    yield tag, future.result()
                for future in failed:
                    if not isinstance(future.exception(), BrokenProcessPool):
                        future.result()  # the task's own exception
                if failed:
                    self._recover(live, submit)
        finally:
            if live:  # an exception or Ctrl-C: the running tasks are abandoned, their workers stopped
                self.close(stop=True)

    def _recover(self, live: dict, submit: Callable[[Any, tuple, int], None]) -> None:
        """A worker died: every task in flight failed with it; start the pool again and resubmit them."""
        lost = list(live.values())
        live.clear()
        self.close(stop=True)
        worst = max(losses for _, _, losses in lost) + 1
        if worst > MAX_RESUBMITS:
            raise OSError(f"a task was lost with its worker process {worst} times; giving up")
        log.warning("a worker process died; running the %d tasks in flight again", len(lost))
        self._start()
        for tag, args, losses in lost:
            submit(tag, args, losses + 1)

    def close(self, stop: bool = False) -> None:
        """Shut the workers down (``stop``: at once, abandoning what they run)."""
        executor, self._executor = self._executor, None
        self._installed = set()
        if executor is None:
            return
        if stop:
            _stop_workers(executor)
        executor.shutdown(wait=True, cancel_futures=True)


def _stop_workers(executor: concurrent.futures.ProcessPoolExecutor) -> None:
    """Terminate the pool's processes: Python 3.14's ``terminate_workers``; before it, its process table
    (no public handle on the processes exists)."""
    terminate = getattr(executor, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((executor._processes or {}).values()):
        process.terminate()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
