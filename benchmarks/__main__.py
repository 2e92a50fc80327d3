"""Run every benchmark module of this package in turn (``python -m benchmarks``); results go to stdout."""

from __future__ import annotations

import importlib
import pkgutil

import benchmarks


def main() -> None:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_"))
    for mod in names:
        module = importlib.import_module(f"benchmarks.{mod}")
        if hasattr(module, "main"):
            print(f"== benchmarks.{mod}", flush=True)
            module.main([])


if __name__ == "__main__":
    main()
