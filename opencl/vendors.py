"""OpenCL drivers installed from PyPI, made visible to the ICD loader before the first OpenCL call.

An OpenCL program talks to drivers through an ICD loader, which reads *vendor files* (``*.icd``, one line
naming a driver library) from ``/etc/OpenCL/vendors``, or from the folder ``OCL_ICD_VENDORS`` names
instead of it. pyopencl's wheels bundle the ocl-icd loader, which also reads its own folder, where pip's
PoCL (``pocl-binary-distribution``) puts its vendor file: PoCL needs nothing here. PoCL 3.0 on PyPI is built
on LLVM 14, though, which does not know some recent CPUs (AMD Zen 4 answers ``unknown target CPU
'generic'``), so neuronet also depends on Intel's oneAPI CPU runtime (``intel-opencl-rt`` with
``intel-cmplr-lib-rt`` and ``tbb``), which compiles for any x86-64 CPU with SSE4.2, Intel's or AMD's. Its
wheel puts ``libintelocl.so`` under ``<prefix>/lib`` and a vendor file naming a placeholder path of its build
machine, so no loader finds it as installed.

``register()`` fixes that from Python, without root: it writes a vendors folder in the user cache holding

- ``neuronet-intel-cpu.icd``, naming ``libintelocl.so`` by absolute path, and
- a copy of every vendor file the loader would have read otherwise (the folder of an ``OCL_ICD_VENDORS``
  already set, else ``/etc/OpenCL/vendors``), so GPU and system drivers are still seen alongside ours,

and points ``OCL_ICD_VENDORS`` at it. The loader reads the variable at the first OpenCL call, not when
pyopencl is imported, so ``opencl`` calls this when it is imported and again before listing platforms.

The driver's own libraries find each other through its RUNPATH (``$ORIGIN``) when pip put them in one
folder, as it does for a virtual environment, ``--user`` and system installs alike. Where they are split
over several folders (a virtual environment over system site-packages), the loader's ``dlopen`` would not
find them, and a change of ``LD_LIBRARY_PATH`` after the process started does not reach ``dlopen``: the
dependencies in other folders (``DEPENDENCIES``) are then loaded first, by absolute path and in dependency
order (a library already loaded satisfies a later dependency on its name). Registering loads nothing else:
the loader loads the driver at the first OpenCL call, and one that cannot load is skipped there without a
word, so ``neuronet devices`` loads it itself to say why (``load_problem``).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import logging
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronet.atomic import replace_atomically
from neuronet.cachedir import cache_root

log = logging.getLogger(__name__)

ENV_VENDORS = "OCL_ICD_VENDORS"
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
OUR_ICD = "neuronet-intel-cpu.icd"
INTEL_LIBRARY = "libintelocl.so"
# What libintelocl.so and libcommon_clang.so (its compiler, beside it) load from other distributions
# (their ELF NEEDED entries), each library after the ones it needs, with the distribution that ships it.
DEPENDENCIES = {
    "libintlc.so.5": "intel-cmplr-lib-rt",
    "libimf.so": "intel-cmplr-lib-rt",
    "libsvml.so": "intel-cmplr-lib-rt",
    "libirng.so": "intel-cmplr-lib-rt",
    "libtbb.so.12": "tbb",
}
MAX_VENDOR_LINE = 4096  # a vendor file is one line naming a library
SHARED_LIBRARY = re.compile(r"lib[\w+.-]*?\.so(\.\d+)*")  # libtbb.so.12, not libintelocl.so-gdb.py


@dataclass(frozen=True)
class Registration:
    """What ``register`` did: the vendors folder in force, the pip drivers registered, and why not others.

    ``folder`` is None when nothing was changed (not Linux, or no pip driver to add). ``runtimes`` names
    each registered driver with its library; ``problems`` says why an installed one is not registered.
    """

    folder: Path | None
    runtimes: tuple[str, ...]
    problems: tuple[str, ...]
    inherited: tuple[str, ...]  # vendor files copied from the folder the loader would have read
    libraries: tuple[str, ...] = ()  # the registered drivers' libraries (``load_problem`` tries them)


_done: list[Registration] = []  # the first registration of this process (the loader reads it once)


def register() -> Registration:
    """Register the pip-installed drivers with the ICD loader (once per process; see the module doc)."""
    if not _done:
        _done.append(
            _register(os.environ.get(ENV_VENDORS, ""))
            if sys.platform.startswith("linux")
            else Registration(None, (), (), ())
        )
        if _done[0].folder is not None:
            os.environ[ENV_VENDORS] = str(_done[0].folder)
    return _done[0]


def _register(previous: str) -> Registration:
    """The vendors folder for Intel's runtime plus what ``previous`` (``OCL_ICD_VENDORS``) or the system
    folder holds; nothing when the runtime is not installed or lacks the libraries it loads."""
    library, problem = _intel_library()
    if library is None:
        return Registration(None, (), (problem,) if problem else (), ())
    entries = _vendor_files(Path(previous) if previous else SYSTEM_VENDORS)
    entries = {name: lib for name, lib in entries.items() if lib != str(library)}
    folder = _write_folder({**entries, OUR_ICD: str(library)})
    if folder is None:
        return Registration(None, (), (f"no writable folder for a vendor file naming {library}",), ())
    log.debug("OpenCL vendors folder %s: %s", folder, ", ".join([*sorted(entries), OUR_ICD]))
    runtime = f"Intel oneAPI CPU runtime {_version('intel-opencl-rt')} ({library})"
    return Registration(folder, (runtime,), (), tuple(sorted(entries)), (str(library),))


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _libraries(distribution: str) -> list[Path]:
    """The shared libraries (``lib*.so*``) a distribution installed, by absolute path; [] if absent."""
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = []
    for f in files:
        if SHARED_LIBRARY.fullmatch(f.name):
            found.append(Path(os.path.normpath(f.locate())))
    return found


def _intel_library() -> tuple[Path | None, str | None]:
    """``libintelocl.so`` of ``intel-opencl-rt``, or None and why not (no reason: not installed). Its
    dependencies that pip put in another folder than it are loaded first (see the module doc)."""
    libs = {p.name: p for p in _libraries("intel-opencl-rt")}
    library = libs.get(INTEL_LIBRARY)
    if library is None or not library.is_file():
        return None, None  # not installed (not Linux x86-64, or removed on purpose)
    found = {p.name: p for d in sorted(set(DEPENDENCIES.values())) for p in _libraries(d) if p.is_file()}
    missing = sorted({dist for name, dist in DEPENDENCIES.items() if name not in found})
    if missing:
        return None, (
            f"Intel's OpenCL CPU runtime {_version('intel-opencl-rt')} is installed without the libraries it "
            f"loads ({', '.join(missing)}): pip install {' '.join(missing)}"
        )
    for name in DEPENDENCIES:
        if found[name].parent != library.parent:
            try:
                ctypes.CDLL(str(found[name]))
            except OSError as exc:
                return None, f"Intel's OpenCL CPU runtime needs {found[name]}, which does not load ({exc})"
    return library, None


def load_problem(registration: Registration) -> str | None:
    """Why a registered driver library does not load (``dlopen`` here, as the ICD loader would, which
    skips such a library without a word), or None when it loads. ``neuronet devices`` asks; nothing else
    pays for loading a driver it may not use."""
    for library in registration.libraries:
        try:
            ctypes.CDLL(library)
        except OSError as exc:
            return (
                f"Intel's OpenCL CPU runtime {_version('intel-opencl-rt')} is registered but does not load "
                f"({exc}); reinstall it with its libraries: pip install --force-reinstall intel-opencl-rt "
                "intel-cmplr-lib-rt tbb"
            )
    return None


def _vendor_files(source: Path) -> dict[str, str]:
    """``{file name: library}`` of the vendor files the loader would read from ``source`` (a folder, or
    one ``.icd`` file as ocl-icd also accepts). Only regular files are opened (a FIFO would block) and only
    their first line is read (``MAX_VENDOR_LINE`` bytes at most); unreadable entries are skipped, as the
    loader skips them."""
    try:
        paths = sorted(source.glob("*.icd")) if source.is_dir() else [source]
    except OSError:
        return {}
    out = {}
    for path in paths:
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                continue
            with path.open("rb") as f:
                first = f.read(MAX_VENDOR_LINE).split(b"\n", 1)[0]
        except OSError:
            continue
        library = first.decode("utf-8", errors="replace").strip()
        if library and "\x00" not in library and path.name != OUR_ICD:
            out[path.name] = library
    return out


def _write_folder(entries: dict[str, str]) -> Path | None:
    """The vendors folder holding ``entries``, named after them and written atomically where it differs
    (several processes may start at once); in the user cache, else the temporary folder; None if neither
    is writable or safe.

    The loader loads every library a vendor file in the folder names, so the folder is used only when it
    holds no vendor file but ours and nobody else can add one: a folder of this user (not a link) that
    others cannot write, and in the shared temporary folder a parent of the same kind. Another user of the
    machine who made ``/tmp/neuronet-<uid>`` first would otherwise run code in our processes."""
    key = hashlib.sha256("\n".join(f"{k}={v}" for k, v in sorted(entries.items())).encode()).hexdigest()
    shared = Path(tempfile.gettempdir()) / f"neuronet-{os.getuid()}"
    for root in (cache_root() / "opencl", shared):
        folder = root / f"vendors-{key[:16]}"
        try:
            if root == shared:
                root.mkdir(mode=0o700, exist_ok=True)
                _refuse_unless_private(root)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _refuse_unless_private(folder)
            foreign = sorted(p.name for p in folder.glob("*.icd") if p.name not in entries)
            if foreign:
                raise PermissionError(f"vendor files that are not ours: {', '.join(foreign)}")
            for name, lib in entries.items():
                path = folder / name
                if not path.is_file() or path.read_text(encoding="utf-8") != lib + "\n":
                    replace_atomically(path, lambda f, lib=lib: f.write((lib + "\n").encode()))
            return folder
        except OSError as exc:
            log.debug("cannot use the OpenCL vendors folder %s (%s)", folder, exc)
    return None


def _refuse_unless_private(folder: Path) -> None:
    """PermissionError unless ``folder`` is a real folder of this user; one that its group or others may
    write (made under a umask of 002) is closed to them first (what they may have put there is then
    found by the caller's look for foreign vendor files)."""
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise PermissionError(f"{folder} is not a folder of this user")
    if st.st_mode & 0o022:
        folder.chmod(stat.S_IMODE(st.st_mode) & ~0o022)
