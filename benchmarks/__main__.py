"""Run every benchmark module of this package in turn (``python -m benchmarks [--tiny]``); results go to
stdout. ``--tiny`` runs each at a toy size, in seconds: a check that none has rotted, not a measurement.

On a machine without a usable OpenCL device the benchmarks of the OpenCL code are skipped with a note (the
reason ``neuronet devices`` gives) and the others still run: there is nothing of ours to time against the
peers there. So is a benchmark that refuses an unfair comparison (a peer that would run on more CPUs than
this process was given), with its reason."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks
from benchmarks._machine import UnfairComparison
from opencl import NoDeviceError


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_"))
    for mod in names:
        module = importlib.import_module(f"benchmarks.{mod}")
        if hasattr(module, "main"):
            print(f"== benchmarks.{mod}", flush=True)
            try:
                module.main(args)
            except NoDeviceError as exc:
                print(f"skipped benchmarks.{mod}: no usable OpenCL device ({exc})", flush=True)
            except UnfairComparison as exc:
                print(f"skipped benchmarks.{mod}: {exc}", flush=True)


if __name__ == "__main__":
    main()
