"""One device's self-check in a process of its own: ``python -m opencl.selfcheck_process P:D NAME``.

A driver can take down the process that uses it, not only fail a call: pip's PoCL 3.0, asked to compile for
a CPU its LLVM 14 does not know (AMD Zen 4), leaves its compiler's state behind and aborts the process at
exit ("still have references to IRs - can't release LLVM context"), once the work is done and the report
written. The self-check is where neuronet first meets a driver, so it runs here (``opencl.selfcheck``
starts this module and waits for it): a crash during the check or at this process's exit is the reason the
device is passed over, and the user's process only ever compiles with drivers that have passed.

Prints the verdict as one line of JSON, ``{"problem": ..., "seconds": ...}``, and exits with 0.
"""

from __future__ import annotations

import json
import sys

from opencl.device import DeviceInfo, list_devices
from opencl.selfcheck import check_here


def _device(index: str, name: str) -> DeviceInfo | None:
    """The device the parent process listed as ``index`` with ``name`` (this process lists the same drivers
    in the same order: the registration is inherited through ``OCL_ICD_VENDORS``)."""
    return next((d for d in list_devices() if d.index == index and d.name == name), None)


def main(argv: list[str]) -> int:
    index, name = argv
    info = _device(index, name)
    if info is None:
        problem, seconds = f"device {index} {name!r} is not listed by a new process", None
    else:
        problem, seconds = check_here(info)
    print(json.dumps({"problem": problem, "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
