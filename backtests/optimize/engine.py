"""Where passes run: a Dask distributed cluster (local worker processes or a running scheduler), or inline.

The client scatters the candles to every worker once and streams tasks, each a batch of passes, keeping
a few tasks per worker in flight so no worker waits on the client. When a worker dies mid-task the
scheduler runs its tasks again elsewhere (Dask's own recovery; ``allowed-failures`` bounds retries), so a
lost worker costs only the passes it was running.

Reaching a running scheduler has one deadline, ``CONNECT_TIMEOUT``, for the TCP connection and Dask's
handshake together. Dask's own ``timeout`` bounds the connection but not the handshake that follows it
(a peer that accepts and then says nothing, or drips bytes, holds ``Client()`` for ever), so the
handshake is first made under that deadline by ``reach`` and only a peer that completes it is handed
to ``Client``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from backtests.optimize.errors import ClusterError, OptimizeError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0  # seconds to reach a --scheduler address, its handshake included
MAX_WORKERS_PER_CORE = 4  # local worker processes; the passes are CPU-bound, so more only add overhead
MAX_RESUBMITS = 3  # times one task may be cancelled by the cluster (lost data) before the run gives up


class Engine:
    """Runs ``fn(shared, *args)`` tasks and yields ``(tag, result)`` in completion order.

    ``workers=0`` runs tasks inline in this process (debugging, tiny studies); otherwise a Dask
    ``LocalCluster`` of ``workers`` single-threaded processes (default: one per core), or the cluster at
    ``scheduler`` (``tcp://HOST:8786``).
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None):
        cores = os.cpu_count() or 1
        if workers is not None and not 0 <= workers <= MAX_WORKERS_PER_CORE * cores:
            raise OptimizeError(
                f"--workers {workers}: give 0 (inline) or a count up to {MAX_WORKERS_PER_CORE * cores} "
                f"({MAX_WORKERS_PER_CORE} processes per core of the {cores} here; more only slow the passes)"
            )
        if workers is not None and scheduler:
            raise OptimizeError("give --workers or --scheduler, not both")
        self.workers = (os.cpu_count() or 1) if workers is None and not scheduler else workers
        self.scheduler = scheduler_address(scheduler) if scheduler else None
        self._client = None
        self._cluster = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def __enter__(self) -> Engine:
        if self.scheduler:
            from distributed import Client

            reach(self.scheduler, CONNECT_TIMEOUT)
            try:
                self._client = Client(self.scheduler, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise ClusterError(f"cannot reach the Dask scheduler at {self.scheduler}: {exc}") from None
        elif self.workers:
            from distributed import Client, LocalCluster

            with _workers_ignore_ctrl_c():
                self._cluster = LocalCluster(
                    n_workers=self.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    scheduler_kwargs={"dashboard": False},
                    silence_logs=logging.ERROR,
                )
            self._client = Client(self._cluster)
        if logging.getLogger().getEffectiveLevel() > logging.INFO:  # Dask's INFO chatter unless --debug
            logging.getLogger("distributed").setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    @property
    def size(self) -> int:
        """Workers available now (1 inline)."""
        if self._client is None:
            return 1
        return max(1, len(self._client.scheduler_info(n_workers=-1)["workers"]))

    @property
    def where(self) -> str:
        if self._client is None:
            return "inline (this process)"
        if self.scheduler:
            return f"Dask cluster {self.scheduler} ({self.size} workers)"
        return f"local Dask cluster ({self.size} worker processes)"

    # -- work ------------------------------------------------------------------------------------------
    def share(self, obj: Any) -> Shared:
        """Send ``obj`` to every worker once; tasks then receive it by reference."""
        shared = Shared(obj)
        if self._client is not None:
            shared.future = self._client.scatter(obj, broadcast=True, hash=False)
        return shared

    def stream(
        self,
        fn: Callable[..., Any],
        shared: Shared,
        tasks: Iterable[tuple[Any, tuple]],
        inflight: int | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """Run ``fn(shared, *args)`` for each ``(tag, args)``; tasks are drawn lazily as slots free up.

        A task cancelled by the cluster (its worker died holding the only copy of the shared data: Dask's
        memory manager keeps one replica of scattered data, and scattered data cannot be recomputed) is
        submitted again, after the data is scattered again if it was lost, up to ``MAX_RESUBMITS`` times.
        On an exception (Ctrl-C included) the tasks still in flight are cancelled before it propagates.
        """
        it = iter(tasks)
        if self._client is None:
            for tag, args in it:
                yield tag, fn(shared.obj, *args)
            return
        from distributed import as_completed

        limit = inflight or 2 * self.size
        pending = as_completed()
        live: dict[str, tuple[Any, Any, tuple, int]] = {}  # future key -> (future, tag, args, resubmits)

        def submit(tag: Any, args: tuple, tries: int) -> None:
            future = self._client.submit(fn, shared.future, *args, pure=False)
            live[future.key] = (future, tag, args, tries)
            pending.add(future)

        def submit_next() -> bool:
            for tag, args in it:
                submit(tag, args, 0)
                return True
            return False

        try:
            for _ in range(limit):
                if not submit_next():
                    break
            for future in pending:
                _, tag, args, tries = live.pop(future.key)
                if future.status == "cancelled":
                    if tries >= MAX_RESUBMITS:
                        raise OSError(f"a task was cancelled by the cluster {tries + 1} times; giving up")
                    log.warning("a task was lost with its worker; submitting it again")
                    if shared.future.status != "finished":
                        shared.future = self._client.scatter(shared.obj, broadcast=True, hash=False)
                    submit(tag, args, tries + 1)
                    continue
                result = future.result()
                submit_next()
                yield tag, result
        finally:
            if live:
                self._client.cancel([entry[0] for entry in live.values()])


def scheduler_address(text: str) -> str:
    """``--scheduler`` as Dask's ``SCHEME://HOST:PORT`` (``HOST:PORT`` means ``tcp://``); anything else is
    refused in one line before a connection is tried."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    address = text.strip() if "://" in text else f"tcp://{text.strip()}"
    try:
        scheme, location = parse_address(address, strict=True)
        _, port = parse_host_port(location)
    except ValueError:
        port, scheme = None, ""
    if scheme not in set(registry.backends) - {"inproc"} or port is None or not 0 < port < 65536:
        raise OptimizeError(f"--scheduler {text!r}: not a Dask scheduler address; give tcp://HOST:PORT")
    return address


def reach(address: str, seconds: float) -> None:
    """Connect to ``address`` and complete Dask's handshake within ``seconds`` in all, or raise
    ``ClusterError``. Runs on a thread of its own, so it works where an event loop is already running
    (a notebook)."""
    from distributed.comm import connect

    async def handshake() -> None:
        # Dask retries a refused connection until its own timeout; ending that first keeps its reason
        # ("Connection refused") in the message, while the deadline still bounds a silent handshake.
        comm = await connect(address, timeout=0.9 * seconds)
        await comm.close()

    def attempt() -> None:
        asyncio.run(asyncio.wait_for(handshake(), seconds))

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reach-scheduler") as pool:
        try:
            pool.submit(attempt).result()
        except TimeoutError:  # asyncio.wait_for at the deadline
            raise ClusterError(
                f"cannot reach the Dask scheduler at {address}: no Dask handshake within {seconds:g} s"
            ) from None
        except OSError as exc:  # refused, reset, unreachable
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ClusterError(f"cannot reach the Dask scheduler at {address}: {reason}") from None
        except Exception as exc:  # whatever a peer's bytes make Dask's decoder raise: not a scheduler
            reason = str(exc).splitlines()[0][:200] if str(exc) else ""
            raise ClusterError(
                f"{address} does not answer as a Dask scheduler ({type(exc).__name__}: {reason})"
            ) from None


@contextmanager
def _workers_ignore_ctrl_c():
    """Worker processes started inside inherit an ignored SIGINT: Ctrl-C reaches the client alone, which
    stops the search, keeps the finished passes and closes the cluster (no traceback from every worker)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Shared:
    """Data every task needs: the object itself and, on a cluster, the future of its scattered copies."""

    def __init__(self, obj: Any):
        self.obj = obj
        self.future: Any = None
