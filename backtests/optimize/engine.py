"""Where passes run: local worker processes (``backtests.optimize.pool``), a running Dask cluster, or inline.

The client sends the shared data (the candles) to every worker once and streams tasks, each a batch of
passes, keeping a few tasks per worker in flight so no worker waits on the client. On a Dask cluster, when
a worker dies mid-task the scheduler runs its tasks again elsewhere (Dask's own recovery;
``allowed-failures`` bounds retries), so a lost worker costs only the passes it was running; local
workers recover as ``backtests.optimize.pool`` says.

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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from backtests.optimize.errors import ClusterError, OptimizeError
from backtests.optimize.pool import MAX_RESUBMITS, LocalPool, usable_cpus

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0  # seconds to reach a --scheduler address, its handshake included
MAX_WORKERS_PER_CORE = 4  # local worker processes; the passes are CPU-bound, so more only add overhead


class Engine:
    """Runs ``fn(shared, *args)`` tasks and yields ``(tag, result)`` in completion order.

    ``workers=0`` runs tasks inline in this process (debugging, tiny studies); otherwise a pool of
    ``workers`` local processes (default: one per CPU this process may run on, which ``taskset`` or a
    container may make fewer than the machine's), or the Dask cluster at ``scheduler`` (``tcp://HOST:8786``).
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None):
        cores = usable_cpus()
        if workers is not None and not 0 <= workers <= MAX_WORKERS_PER_CORE * cores:
            raise OptimizeError(
                f"--workers {workers}: give 0 (inline) or a count up to {MAX_WORKERS_PER_CORE * cores} "
                f"({MAX_WORKERS_PER_CORE} processes per CPU of the {cores} this process may run on; more "
                "only slow the passes)"
            )
        if workers is not None and scheduler:
            raise OptimizeError("give --workers or --scheduler, not both")
        self.workers = cores if workers is None and not scheduler else workers
        self.scheduler = scheduler_address(scheduler) if scheduler else None
        self._client = None  # the Dask client of a running cluster
        self._pool: LocalPool | None = None

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
            self._pool = LocalPool(self.workers)
        if logging.getLogger().getEffectiveLevel() > logging.INFO:  # Dask's INFO chatter unless --debug
            logging.getLogger("distributed").setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
        if self._pool is not None:
            self._pool.close(stop=exc[0] is not None)
        self._client = self._pool = None

    @property
    def size(self) -> int:
        """Workers available now (1 inline)."""
        if self._pool is not None:
            return self._pool.workers
        if self._client is None:
            return 1
        return max(1, len(self._client.scheduler_info(n_workers=-1)["workers"]))

    @property
    def where(self) -> str:
        if self._pool is not None:
            return f"local worker processes ({self.size})"
        if self._client is None:
            return "inline (this process)"
        return f"Dask cluster {self.scheduler} ({self.size} workers)"

    # -- work ------------------------------------------------------------------------------------------
    def share(self, obj: Any) -> Shared:
        """Send ``obj`` to every worker once; tasks then receive it by reference."""
        shared = Shared(obj)
        if self._pool is not None:
            shared.key = self._pool.share(obj)
        elif self._client is not None:
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
        limit = inflight or 2 * self.size
        if self._pool is not None:
            yield from self._pool.stream(fn, shared.key, it, limit)
            return
        if self._client is None:
            for tag, args in it:
                yield tag, fn(shared.obj, *args)
            return
        from distributed import as_completed

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


class Shared:
    """Data every task needs: the object itself and where the workers hold it (the local pool's key, or
    on a cluster the future of its scattered copies)."""

    def __init__(self, obj: Any):
        self.obj = obj
        self.key: int | None = None
        self.future: Any = None
