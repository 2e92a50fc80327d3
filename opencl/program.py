"""Kernel files: load ``opencl/kernels/<file>``, build once per (runtime, file, defines), keep the kernels.

``kernels(rt, "gemm.cl", TM=6)`` compiles with ``-D REAL=float|double`` (from ``rt.dtype``), one
``-D NAME=value`` per keyword and ``-I <kernels dir>`` (so ``#include "common.h"`` works), and returns a
``Kernels`` object whose attributes are kept ``cl.Kernel`` objects. Scalar argument dtypes are set once
from the compiler's argument info, so a call ``rt.launch(k.gemm, gsize, lsize, buf, 3, 1.5)`` costs
microseconds, not the ~55 µs of pyopencl's per-call type inference. pyopencl's binary cache (keyed by
source, includes, options and device) makes later processes skip compilation.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pyopencl as cl

from opencl.errors import KernelBuildError

log = logging.getLogger(__name__)

# OpenCL C scalar type names (as reported by clGetKernelArgInfo) -> NumPy dtypes for set_scalar_arg_dtypes.
_SCALARS = {
    "char": np.int8,
    "uchar": np.uint8,
    "unsigned char": np.uint8,
    "short": np.int16,
    "ushort": np.uint16,
    "unsigned short": np.uint16,
    "int": np.int32,
    "uint": np.uint32,
    "unsigned int": np.uint32,
    "long": np.int64,
    "ulong": np.uint64,
    "unsigned long": np.uint64,
    "float": np.float32,
    "double": np.float64,
}


def kernels_dir() -> Path:
    """The directory holding the ``.cl`` files (package data)."""
    return Path(str(resources.files("opencl").joinpath("kernels")))


class Kernels:
    """The kernels of one built program, by name (``k.gemm_nn``); ``names`` lists them."""

    def __init__(self, program: cl.Program, path: Path, source: str, real: str):
        self.program = program
        self.path = path
        self._kernels: dict[str, cl.Kernel] = {}
        self._dtypes: dict[str, list] = {}
        for kernel in program.all_kernels():
            try:
                dtypes = _arg_dtypes(kernel, path)
            except cl.Error:  # a driver without argument info: read the signature from the source
                dtypes = _signature_dtypes(kernel.function_name, _with_headers(source), real, path)
            kernel.set_scalar_arg_dtypes(dtypes)
            self._kernels[kernel.function_name] = kernel
            self._dtypes[kernel.function_name] = dtypes

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._kernels))

    def fresh(self, name: str) -> cl.Kernel:
        """A new kernel object of ``name`` with the same scalar argument dtypes, for a caller that keeps its
        own argument state (``opencl.plan.Launch`` sets the constant arguments once, not per launch)."""
        kernel = cl.Kernel(self.program, getattr(self, name).function_name)
        kernel.set_scalar_arg_dtypes(self._dtypes[name])
        return kernel

    def __getattr__(self, name: str) -> cl.Kernel:
        try:
            return self.__dict__["_kernels"][name]
        except KeyError:
            raise AttributeError(f"{self.__dict__.get('path')} defines no kernel {name!r}") from None

    def __getitem__(self, name: str) -> cl.Kernel:
        return getattr(self, name)


def _arg_dtypes(kernel: cl.Kernel, path: Path) -> list:
    dtypes: list = []
    for i in range(kernel.num_args):
        qualifier = kernel.get_arg_info(i, cl.kernel_arg_info.ADDRESS_QUALIFIER)
        if qualifier != cl.kernel_arg_address_qualifier.PRIVATE:
            dtypes.append(None)  # buffer or local memory
            continue
        type_name = kernel.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME).strip()
        if type_name.endswith("*"):
            dtypes.append(None)
            continue
        if type_name not in _SCALARS:
            raise KernelBuildError(
                f"{path}: kernel {kernel.function_name} argument {i} has type {type_name!r}; scalar kernel "
                f"arguments must be one of {', '.join(sorted(_SCALARS))}"
            )
        dtypes.append(_SCALARS[type_name])
    return dtypes


def _with_headers(source: str) -> str:
    """``source`` followed by the text of every header of ours it includes (a kernel may be declared in one,
    such as ``gemm_gpu_reduce.h``), each once."""
    seen: set[str] = set()
    pending = re.findall(r'#include "([^"]+)"', source)
    parts = [source]
    while pending:
        name = pending.pop()
        header = kernels_dir() / name
        if name in seen or not header.is_file():
            continue
        seen.add(name)
        text = header.read_text()
        parts.append(text)
        pending += re.findall(r'#include "([^"]+)"', text)
    return "\n".join(parts)


def _signature_dtypes(name: str, source: str, real: str, path: Path) -> list:
    """Scalar argument dtypes parsed from the kernel's declaration (``REAL`` resolved to ``real``)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    match = re.search(r"\bvoid\s+" + re.escape(name) + r"\s*\(([^)]*)\)", text)
    if match is None:
        raise KernelBuildError(f"{path}: cannot find the declaration of kernel {name}")
    dtypes: list = []
    for param in match.group(1).split(","):
        words = param.replace("*", " * ").split()
        if "*" in words or any(w in ("__global", "global", "__local", "local") for w in words):
            dtypes.append(None)
            continue
        type_name = " ".join(w for w in words[:-1] if w not in ("const", "__private", "private"))
        type_name = real if type_name == "REAL" else type_name
        if type_name not in _SCALARS:
            raise KernelBuildError(f"{path}: kernel {name} has an argument of unsupported type {type_name!r}")
        dtypes.append(_SCALARS[type_name])
    return dtypes


def build_options(rt, defines: dict[str, object]) -> list[str]:
    """Compiler options for ``rt``: REAL from the runtime's dtype, then the caller's defines."""
    values = {"REAL": rt.real, **defines}
    opts = [f"-D{name}={_value(v)}" for name, v in values.items()]
    if rt.real == "double":
        opts.append("-DREAL_IS_DOUBLE=1")
    opts += ["-cl-kernel-arg-info", "-I", str(kernels_dir())]
    return opts


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def kernels(rt, filename: str, **defines: object) -> Kernels:
    """Build (or fetch from the runtime's cache) ``kernels/<filename>`` with ``defines``."""
    fast_key = (filename, *defines.items())  # hot path: same call site, same keyword order
    cached = rt.programs.get(fast_key)
    if cached is not None:
        return cached
    key = (filename, tuple(sorted((k, _value(v)) for k, v in defines.items())))
    cached = rt.programs.get(key)
    if cached is not None:
        rt.programs[fast_key] = cached
        return cached
    path = kernels_dir() / filename
    try:
        source = path.read_text()
    except OSError as exc:
        raise KernelBuildError(f"cannot read kernel file {path}: {exc}") from None
    options = build_options(rt, defines)
    try:
        started = time.perf_counter()
        program = build_quietly(rt.context, source, options, path.name)
        rt.build_seconds += time.perf_counter() - started
    except cl.Error as exc:
        raise KernelBuildError(
            f"building {path} for {rt.info.name!r} failed\noptions: {' '.join(options)}\ncompiler log:\n{exc}"
        ) from None
    result = Kernels(program, path, source, rt.real)
    if not result.names and re.search(r"\b(__)?kernel\s+void\b", _with_headers(source)):
        # pip's PoCL on AMD Zen 4 reports a successful build of no kernels: every later call would fail
        # with "defines no kernel 'gemm_dot'", naming a file that does define it
        raise KernelBuildError(
            f"building {path} for {rt.info.name!r} gave no kernels: the driver's compiler failed without a "
            f"word\noptions: {' '.join(options)}"
        )
    rt.programs[key] = rt.programs[fast_key] = result
    return result


def build_quietly(context: cl.Context, source: str, options: list[str], name: str) -> cl.Program:
    """Build ``source``; raises ``cl.Error`` on failure. Every build of the library goes through here.

    A successful build's remarks (PoCL notes vector ABIs on AVX2, NVIDIA its register use) go to the debug
    log (--debug / NEURONET_DEBUG=1), not to every user as pyopencl's ``CompilerWarning``; other warnings
    pass through unchanged.
    """
    with warnings.catch_warnings(record=True) as remarks:
        warnings.simplefilter("always", cl.CompilerWarning)
        program = cl.Program(context, source).build(options=options)
    log.debug("built %s with %s", name, " ".join(options))
    for remark in remarks:
        if issubclass(remark.category, cl.CompilerWarning):
            log.debug("compiler output for %s: %s", name, remark.message)
        else:
            warnings.warn_explicit(remark.message, remark.category, remark.filename, remark.lineno)
    return program
