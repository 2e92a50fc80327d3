"""Which OpenCL device neuronet uses, and why.

Order (first that applies): an explicit ``device`` argument, the ``NEURONET_DEVICE`` environment variable,
the fastest GPU that passes the self-check, the fastest CPU that passes it (then accelerators, then other
devices). A specification is ``"gpu"``, ``"cpu"``, ``"P:D"`` (platform index, device index, as
``neuronet devices`` lists them) or a case-insensitive substring of the device or platform name. An
explicit choice is never second-guessed: among the devices it matches, the one chosen is the fastest that
passes the self-check, else the first it matches (its failure then comes from the driver, in full).

"Passes" and "fastest" are ``opencl.selfcheck``'s verdicts, measured once per driver and kept: with pip's
PoCL and Intel's CPU runtime both installed, the CPU device is the faster of the two on this processor, or
the one that compiles where the other cannot (pip's PoCL on CPUs newer than its LLVM).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from opencl.device import DeviceInfo, Runtime, install_hint, list_devices, shared_runtime
from opencl.errors import DeviceChoiceError, NoDeviceError
from opencl.selfcheck import Verdict, verdict

log = logging.getLogger(__name__)

ENV_DEVICE = "NEURONET_DEVICE"
KIND_ORDER = ("gpu", "cpu", "accelerator", "other")


@dataclass(frozen=True)
class Rejected:
    """A device passed over, and why (a failed self-check, or a slower one of the same kind)."""

    info: DeviceInfo
    reason: str


@dataclass(frozen=True)
class Choice:
    """The chosen device, why it was chosen, and the devices passed over (shown by ``neuronet devices``)."""

    info: DeviceInfo
    reason: str
    rejected: tuple[Rejected, ...] = ()


def _match(spec: str, devices: list[DeviceInfo]) -> list[DeviceInfo]:
    s = spec.strip().lower()
    if s in KIND_ORDER:
        return [d for d in devices if d.kind == s]
    if ":" in s and all(part.strip().isdigit() for part in s.split(":", 1)):
        p, d = (int(part) for part in s.split(":", 1))
        return [x for x in devices if x.index == f"{p}:{d}"]
    return [d for d in devices if s in d.name.lower() or s in d.platform.lower()]


def _speed(v: Verdict) -> str:
    return f"{v.seconds * 1e3:.2f} ms" if v.seconds is not None else "?"


def _rank(devices: list[DeviceInfo]) -> tuple[DeviceInfo | None, list[Rejected], dict[str, Verdict]]:
    """The fastest device of ``devices`` that passes the self-check (None if none does), the others and
    why, and every verdict by device index."""
    verdicts = {d.index: verdict(d) for d in devices}
    usable = sorted((d for d in devices if verdicts[d.index].usable), key=lambda d: verdicts[d.index].seconds)
    best = usable[0] if usable else None
    rejected = [
        Rejected(
            d,
            f"self-check failed: {verdicts[d.index].problem}"
            if not verdicts[d.index].usable
            else f"slower: {_speed(verdicts[d.index])} per timed step against {_speed(verdicts[best.index])}",
        )
        for d in devices
        if d is not best
    ]
    return best, rejected, verdicts


def choose_device(device: str | DeviceInfo | None = None) -> Choice:
    """Pick the device by argument > ``NEURONET_DEVICE`` > fastest usable GPU > fastest usable CPU."""
    if isinstance(device, DeviceInfo):
        return Choice(device, "given as an argument")
    devices = list_devices()
    env = os.environ.get(ENV_DEVICE, "").strip()
    for spec, origin in ((device, "the device argument"), (env or None, f"{ENV_DEVICE}={env}")):
        if spec is None:
            continue
        found = _match(str(spec), devices)
        if not found:
            listing = ", ".join(f"{d.index} {d.name} ({d.kind})" for d in devices)
            raise DeviceChoiceError(
                f"no OpenCL device matches {spec!r} (from {origin}); available: {listing}. "
                "Use 'gpu', 'cpu', 'P:D' or part of a device name"
            )
        best, rejected, _ = _rank(found)
        if best is None:  # never second-guessed: the driver's own error will say what is wrong
            return Choice(found[0], f"chosen by {origin}, although it failed the self-check", tuple(rejected))
        return Choice(
            best,
            f"chosen by {origin}" + (", the fastest it matches" if len(found) > 1 else ""),
            tuple(rejected),
        )
    rejected: list[Rejected] = []
    for kind in KIND_ORDER:
        of_kind = [d for d in devices if d.kind == kind]
        if not of_kind:
            continue
        best, passed_over, verdicts = _rank(of_kind)
        rejected += passed_over
        if best is not None:
            name = kind.upper()
            which = f"the fastest of {len(of_kind)} {name}s" if len(of_kind) > 1 else f"the {name}"
            speed = _speed(verdicts[best.index])
            reason = f"default: {which} that passes the self-check ({speed} per timed step)"
            return Choice(best, reason, tuple(rejected))
    skipped = "; ".join(f"{r.info.index} {r.info.name}: {r.reason}" for r in rejected)
    raise NoDeviceError(f"no OpenCL device passes the self-check: {skipped}. {install_hint(True)}")


def get_runtime(
    device: str | DeviceInfo | None = None, dtype: np.dtype | type | str | None = None, profile: bool = False
) -> Runtime:
    """The shared ``Runtime`` for the chosen device and dtype (created on first use).

    ``profile=True`` gives a profiling runtime, a separate one (its queue records event times, which costs
    a little per launch).
    """
    choice = choose_device(device)
    rt = shared_runtime(choice.info, dtype, profile)
    log.info(
        "OpenCL runtime on %s %s (%s), %s", choice.info.index, choice.info.name, choice.reason, rt.dtype.name
    )
    return rt
