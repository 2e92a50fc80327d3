"""The self-check a device passes before it is chosen automatically, and its speed, cached per driver.

Some drivers list a device but cannot compile for it (pip's PoCL 3.0 on a CPU newer than its LLVM 14:
``unknown target CPU 'generic'``), refuse to open it (a CPU runtime on a processor it does not support), or
compile code that computes wrong numbers. So before a device is chosen without being named, it builds the
library's own GEMM kernels (``opencl.blas``: ``gemm.cl`` on CPUs, ``gemm_gpu.cl`` on GPUs) and computes a
product with a fused bias and tanh, and a transposed one, on awkward sizes, checked against NumPy in
float64; then it times the 14 products of one training step of the Fractal network (batch 256, 240 → 500 → 250
→ 125 → 62 → 3: forward with bias and tanh, weight and input gradients), which weigh both the arithmetic
of the large layers and the cost of a launch, which decides the small ones. A device that fails gets
the reason (``neuronet devices`` shows it); among those that pass, the fastest of a kind is chosen. The check
runs in a process of its own (``opencl.selfcheck_process``): a driver can also crash the process that uses it
(pip's PoCL on AMD Zen 4 aborts it at exit, after failing to compile), which fails the check and leaves the
caller standing.

The verdict is kept in ``<cache>/opencl/devices.json``, keyed by the platform, device and driver names and
versions, the drivers' settings in the environment (``POCL_*``, ``CL_CONFIG_*``) and the kernels' source:
the next process reuses it (no compile, no timing), and the choice between two CPU devices does not flip
with the machine's load from one run to the next, which would change the float32 figures of a run with the
same seed. A new driver, device, setting or kernel source is checked again;
``verdict(info, fresh=True)`` (``neuronet devices --recheck``) checks again on demand.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from neuronet.atomic import replace_atomically
from neuronet.cachedir import cache_root
from opencl import memory
from opencl.blas import gemm
from opencl.device import DeviceInfo, shared_runtime
from opencl.program import kernels_dir

log = logging.getLogger(__name__)

CHECK_VERSION = 1  # bump when what is checked or timed changes: cached verdicts are then redone
KERNEL_FILES = ("gemm.cl", "gemm_gpu.cl", "common.h")
# Environment variables that change what a driver compiles (PoCL's, Intel's CPU runtime's): part of the key.
DRIVER_SETTINGS = ("POCL_", "CL_CONFIG_")
TOLERANCE = 1e-4  # float32 products of K = 29 terms of size ~1, against float64
TIMED = (256, (240, 500, 250, 125, 62, 3))  # batch and layer sizes of the Fractal network
CACHE_BYTES = 4 * 2**20  # the most of devices.json read: a verdict is about 200 bytes
LOCK_WAIT = 300.0  # seconds another process's self-checks are waited for
ROUNDS, STEPS = 3, 4  # best of ROUNDS rounds of STEPS training steps' products
# Seconds a device's check may take in its own process (a compile of the GEMM kernels on a slow CPU driver
# takes tens of seconds; one that hangs is not waited for beyond this).
CHILD_DEADLINE = 600.0


@dataclass(frozen=True)
class Verdict:
    """A device's self-check: ``problem`` is None when it passed; ``seconds`` is one timed step's products
    (lower is faster; None when it failed); ``checked`` is when (ISO time, UTC), ``cached`` whether this
    process read it from the cache."""

    problem: str | None
    seconds: float | None
    checked: str
    cached: bool = False

    @property
    def usable(self) -> bool:
        return self.problem is None


_memo: dict[str, Verdict] = {}
_lock = threading.Lock()


def verdict(info: DeviceInfo, fresh: bool = False) -> Verdict:
    """The self-check of ``info``: from this process, the cache, or run now (``fresh``: always run now)."""
    key = _key(info)
    with _lock:
        if not fresh and key in _memo:
            return _memo[key]
        with _cache_lock():
            found = None if fresh else _read_cache().get(key)
            result = found if found is not None else _run(info)
            if found is None:
                _write_cache(key, result)
        _memo[key] = result
        return result


@contextlib.contextmanager
def _cache_lock():
    """Hold ``devices.json.lock`` while a verdict is looked up, run and kept, so processes that start
    together on an empty cache run each device's check once and all choose by the same timings (each
    timing its own, under the load of the others, could choose another device, and so give other float32
    figures). A cache where the lock cannot be made (read-only, full) is used without it; a check held by
    another process longer than ``LOCK_WAIT`` seconds is not waited for."""
    with warnings.catch_warnings():  # "only soft file lock is available" where fcntl is missing
        warnings.simplefilter("ignore")
        import filelock
    path = _cache_file().with_name("devices.json.lock")
    lock = filelock.FileLock(str(path), timeout=LOCK_WAIT)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except (OSError, filelock.Timeout) as exc:
        log.debug("device self-check without the cache lock %s: %s", path, exc)
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _key(info: DeviceInfo) -> str:
    """Identity of what the verdict depends on: the driver and its settings, the device, the kernels' source,
    this check."""
    digest = hashlib.sha256()
    for name in KERNEL_FILES:
        digest.update((kernels_dir() / name).read_bytes())
    parts = [
        info.platform,
        info.platform_version,
        info.name,
        info.kind,
        info.driver_version,
        str(CHECK_VERSION),
        digest.hexdigest(),
        *sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(DRIVER_SETTINGS)),
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _run(info: DeviceInfo) -> Verdict:
    """The check of ``info`` in a process of its own (``opencl.selfcheck_process``: a driver that crashes
    its process, during the check or at its exit, fails the check instead of taking the caller down)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.perf_counter()
    problem, seconds = _in_child(info)
    log.info(
        "self-check of %s %s: %s in %.2f s",
        info.index,
        info.name,
        problem or f"{seconds * 1e3:.2f} ms",
        time.perf_counter() - started,
    )
    return Verdict(problem, seconds, now)


def check_here(info: DeviceInfo) -> tuple[str | None, float | None]:
    """The check itself, in this process: what was wrong (None: nothing) and the timed step's seconds."""
    try:
        rt = shared_runtime(info, np.float32, False)
        problem = _wrong_numbers(rt)
        return problem, (None if problem else _timed(rt))
    except Exception as exc:  # any driver failure is the reason this device is not used
        return _reason(exc), None


def _in_child(info: DeviceInfo) -> tuple[str | None, float | None]:
    """``check_here`` run by ``opencl.selfcheck_process``, given ``CHILD_DEADLINE`` seconds; where no
    process can be started (a sandbox), in this one."""
    try:
        done = subprocess.run(
            _child_command(info),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=CHILD_DEADLINE,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"the self-check did not finish in {CHILD_DEADLINE:.0f} s (the driver hangs)", None
    except OSError as exc:
        log.warning("self-check of %s %s in this process: none other starts (%s)", info.index, info.name, exc)
        return check_here(info)
    return _outcome(done.returncode, done.stdout, done.stderr)


def _child_command(info: DeviceInfo) -> list[str]:
    """This Python running ``opencl.selfcheck_process`` on ``info``, with the folder this package lies in
    first on its path (a checkout run without installing finds it) and without the current folder that
    ``-c`` puts there: a user's ``dataclasses.py`` beside their data failed every device's check as "the
    driver ended the self-check's process", kept for every later run. The environment is inherited (the
    drivers registered, the cache folder, the drivers' settings)."""
    here = str(Path(__file__).resolve().parents[1])
    run = "import sys; sys.path[:] = [sys.argv.pop(1)] + [p for p in sys.path if p]; "
    run += "from opencl.selfcheck_process import main; "
    run += "sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", run, here, info.index, info.name]


def _outcome(returncode: int, stdout: str, stderr: str) -> tuple[str | None, float | None]:
    """The verdict the child printed, unless it did not end well: a device whose driver crashes the process
    (during the check, or at its exit after it) is not used, whatever it computed."""
    found = _printed(stdout)
    if returncode == 0 and found is not None:
        return found
    if found is None and returncode == 0:
        return "the self-check's process ended without a verdict", None
    ended = _ending(returncode)
    if found is None:
        words = _last_words(stderr)
        return f"the driver ended the self-check's process ({ended})" + (f": {words}" if words else ""), None
    crash = f"the driver crashed the process at its exit ({ended})"
    return (f"{found[0]}; then {crash}" if found[0] else crash), None


def _ending(returncode: int) -> str:
    """How a process ended, in words: the signal that killed it (POSIX), else its exit status."""
    try:
        return f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit status {returncode}"
    except ValueError:  # a signal number this Python has no name for
        return f"signal {-returncode}"


def _printed(stdout: str) -> tuple[str | None, float | None] | None:
    """The child's verdict line, or None where it printed none that reads as one."""
    for line in reversed(stdout.splitlines()):
        try:
            raw = json.loads(line)
            problem, seconds = raw["problem"], raw["seconds"]
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(problem, str) and seconds is None:
            return problem, None
        if problem is None and isinstance(seconds, int | float) and math.isfinite(seconds) and seconds > 0:
            return None, float(seconds)
    return None


def _last_words(stderr: str) -> str:
    """The line of a crashed child's error output that says most: its last, less the crash reporters'
    boilerplate and the compiler's warnings."""
    noise = ("warning", "please submit", "stack dump", "traceback")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if not any(n in ln.lower() for n in noise)]
    return (said or lines or [""])[-1][:300]


def _wrong_numbers(rt) -> str | None:
    """None if the products match NumPy, else what differed."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (37, 29)).astype(np.float32)
    w = rng.uniform(-1, 1, (45, 29)).astype(np.float32)
    b = rng.uniform(-1, 1, 45).astype(np.float32)
    dz = rng.uniform(-1, 1, (37, 45)).astype(np.float32)
    y, gw = memory.poison(memory.empty(rt, (37, 45))), memory.poison(memory.empty(rt, (45, 29)))
    gemm(
        rt,
        memory.to_device(rt, x),
        memory.to_device(rt, w),
        y,
        trans_b=True,
        bias=memory.to_device(rt, b),
        activation="tanh",
    )
    gemm(rt, memory.to_device(rt, dz), memory.to_device(rt, x), gw, trans_a=True)
    x64, w64, dz64 = x.astype(np.float64), w.astype(np.float64), dz.astype(np.float64)
    expected = (("x·wᵀ + b, tanh", y, np.tanh(x64 @ w64.T + b)), ("dzᵀ·x", gw, dz64.T @ x64))
    for name, out, want in expected:
        got = out.get()
        err = float(np.max(np.abs(got - want) / (1.0 + np.abs(want)))) if np.all(np.isfinite(got)) else np.inf
        if not err <= TOLERANCE:
            return f"wrong results: GEMM {name} differs from NumPy by {err:.3g} (tolerance {TOLERANCE:g})"
    return None


def _timed(rt) -> float:
    """Best time (s) of the products of one training step of the timed network (see ``TIMED``)."""
    rng = np.random.default_rng(0)
    batch, sizes = TIMED
    acts = [memory.to_device(rt, rng.standard_normal((batch, sizes[0])).astype(np.float32))]
    acts += [memory.empty(rt, (batch, n)) for n in sizes[1:]]
    grads = [memory.empty(rt, (batch, n)) for n in sizes]
    layers = []
    for n_in, n_out in itertools.pairwise(sizes):
        w = rng.standard_normal((n_out, n_in)).astype(np.float32) / np.sqrt(n_in)
        layers.append((memory.to_device(rt, w), memory.zeros(rt, n_out), memory.empty(rt, (n_out, n_in))))

    def step() -> None:
        for i, (w, b, _) in enumerate(layers):  # forward: y = tanh(x·wᵀ + b)
            gemm(rt, acts[i], w, acts[i + 1], trans_b=True, bias=b, activation="tanh")
        for i in reversed(range(len(layers))):  # backward: weight gradient, then the input's (not the data's)
            w, _, gw = layers[i]
            gemm(rt, acts[i + 1], acts[i], gw, trans_a=True)
            if i:
                gemm(rt, acts[i + 1], w, grads[i])

    step()
    rt.synchronize()
    best = np.inf
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(STEPS):
            step()
        rt.synchronize()
        best = min(best, (time.perf_counter() - started) / STEPS)
    return float(best)


def _reason(exc: Exception) -> str:
    """One line out of a driver's or compiler's message: its last line that mentions an error or a failure
    (the compiler's own words come after the library's "building ... failed")."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower() or "failed" in ln.lower()]
    return (lines[-1] if lines else text.splitlines()[0])[:300]


def _cache_file():
    return cache_root() / "opencl" / "devices.json"


def _read_cache() -> dict[str, Verdict]:
    """The kept verdicts; none where the file is missing, unreadable or not ours, and where it is not a
    regular file of at most ``CACHE_BYTES`` (a FIFO there hung every command; a link to ``/dev/zero`` read
    until the process was killed)."""
    try:
        fd = os.open(_cache_file(), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            status = os.fstat(f.fileno())
            if not stat.S_ISREG(status.st_mode) or status.st_size > CACHE_BYTES:
                return {}
            raw = json.loads(f.read(CACHE_BYTES + 1).decode("utf-8"))
        return {k: _verdict(v) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none yet, or not ours: start afresh
        return {}


def _verdict(v: dict) -> Verdict:
    """A kept verdict, its fields of the types a new one has (``ValueError`` otherwise)."""
    problem, seconds, checked = v["problem"], v["seconds"], v["checked"]
    if not (problem is None or isinstance(problem, str)) or not isinstance(checked, str):
        raise ValueError("not a verdict")
    if seconds is not None and (type(seconds) not in (int, float) or not math.isfinite(seconds)):
        raise ValueError("not a verdict")
    if problem is None and seconds is None:  # a pass is ranked by its time
        raise ValueError("not a verdict")
    return Verdict(problem, seconds, checked, cached=True)


def _write_cache(key: str, result: Verdict) -> None:
    fields = ("problem", "seconds", "checked")
    entries = {k: {f: getattr(v, f) for f in fields} for k, v in {**_read_cache(), key: result}.items()}
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, lambda f: f.write(json.dumps(entries, indent=1).encode()))
    except OSError as exc:  # a read-only cache: the check is simply run again next time
        log.debug("cannot keep the device self-check in %s: %s", path, exc)
