"""Device time per kernel name, from OpenCL profiling events.

Enabled by ``get_runtime(profile=True)`` (the queue must be created with profiling
on). Launches made through ``Runtime.launch`` are recorded; event times are read lazily, after the queue has
drained, so recording adds no host/device synchronisation to a training step. ``device_seconds()`` is the
cumulative device time, which the model samples at epoch boundaries (device time per epoch = difference).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl


@dataclass
class KernelStat:
    name: str
    calls: int = 0
    seconds: float = 0.0


class Profiler:
    """Collects ``(kernel name, event)`` pairs and aggregates their device time by name."""

    def __init__(self, queue: cl.CommandQueue, enabled: bool):
        self.queue = queue
        self.enabled = enabled
        self._pending: list[tuple[str, cl.Event]] = []
        self._stats: dict[str, KernelStat] = {}

    def record(self, name: str, event: cl.Event) -> None:
        self._pending.append((name, event))

    def _resolve(self) -> None:
        if not self._pending:
            return
        self.queue.finish()
        for name, event in self._pending:
            stat = self._stats.get(name)
            if stat is None:
                stat = self._stats[name] = KernelStat(name)
            stat.calls += 1
            stat.seconds += (event.profile.end - event.profile.start) * 1e-9
        self._pending.clear()

    def device_seconds(self) -> float | None:
        """Total device time of recorded launches so far (waits for the queue); ``None`` when disabled."""
        if not self.enabled:
            return None
        self._resolve()
        return sum(s.seconds for s in self._stats.values())

    def stats(self) -> list[KernelStat]:
        """Per-kernel totals, most expensive first."""
        self._resolve()
        return sorted(self._stats.values(), key=lambda s: -s.seconds)

    def reset(self) -> None:
        self._resolve()
        self._stats.clear()

    def table(self) -> str:
        """A plain-text report: kernel, calls, total ms, mean µs."""
        lines = [f"{'kernel':<32} {'calls':>8} {'total ms':>10} {'mean us':>9}"]
        for s in self.stats():
            mean_us = s.seconds / s.calls * 1e6
            lines.append(f"{s.name:<32} {s.calls:>8} {s.seconds * 1e3:>10.2f} {mean_us:>9.1f}")
        return "\n".join(lines)
