"""The drivers pip installed, registered with the ICD loader (``opencl.vendors``), and the choice between
them with the real drivers made to fail through their own settings, in fresh processes (the loader reads
its vendors once per process): pip's PoCL refusing to compile as it does on CPUs newer than its LLVM (AMD
Zen 4), Intel's CPU runtime refusing the processor, system vendor files beside ours."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencl import vendors

ROOT = Path(__file__).resolve().parents[2]
try:
    INTEL = importlib.metadata.version("intel-opencl-rt")
except importlib.metadata.PackageNotFoundError:
    INTEL = None
needs_intel = pytest.mark.skipif(
    INTEL is None, reason="Intel's CPU runtime (intel-opencl-rt) is not installed"
)
POCL_FAILS = {"POCL_EXTRA_BUILD_FLAGS": "-mcpu=generic"}  # the build is refused, as LLVM 14 refuses Zen 4
INTEL_FAILS = {"CL_CONFIG_CPU_TARGET_ARCH": "generic"}  # the runtime refuses to open the device


def neuronet(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``neuronet ARGS`` in a new process with a cache of its own (no kept self-checks) and ``env``."""
    cache = tmp_path / f"cache-{len(list(tmp_path.glob('cache-*')))}"
    full = {**os.environ, "NEURONET_CACHE": str(cache), **env}
    full.pop("NEURONET_DEVICE", None)
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


@needs_intel
def test_intels_runtime_is_a_device_without_any_system_vendor_file(tmp_path):
    empty = tmp_path / "no-vendors"
    empty.mkdir()
    out = neuronet(tmp_path, "devices", OCL_ICD_VENDORS=str(empty))
    assert out.returncode == 0, out.stderr
    assert f"registered from pip: Intel oneAPI CPU runtime {INTEL}" in out.stdout
    assert "Intel(R) OpenCL" in out.stdout and "self-check passed" in out.stdout


@needs_intel
def test_system_vendor_files_are_still_seen_beside_ours(tmp_path):
    """A driver the system registered (here pip's PoCL library, named by a vendor file as a distribution
    package would) is listed as well as Intel's runtime and pyopencl's own PoCL."""
    system = tmp_path / "system-vendors"
    system.mkdir()
    pocl = next((Path(sys.modules["pyopencl"].__file__).parent / ".libs").glob("libpocl*.so*"), None)
    if pocl is None:
        pytest.skip("pip's PoCL is not installed")
    (system / "pocl-system.icd").write_text(f"{pocl}\n")
    out = neuronet(tmp_path, "devices", OCL_ICD_VENDORS=str(system))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Portable Computing Language (") == 2 and "Intel(R) OpenCL (" in out.stdout


@needs_intel
def test_when_pip_pocl_cannot_compile_intels_runtime_is_used(tmp_path):
    out = neuronet(tmp_path, "devices", **POCL_FAILS)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1].startswith("neuronet uses ") and "Intel(R) OpenCL" not in lines[-1]
    assert "pthread" not in lines[-1]  # pip's PoCL names its device "pthread-<CPU>"
    assert any(
        ln.startswith("passed over ")
        and "pthread" in ln
        and "self-check failed" in ln
        and "INVALID_BUILD_OPTIONS" in ln
        for ln in lines
    )


@pytest.fixture(scope="module")
def pocl_compiles_here(tmp_path_factory) -> None:
    """Skips where pip's PoCL fails its own self-check on this processor (AMD Zen 4, newer than its LLVM
    14): then no setting can make it the device that is left when Intel's runtime refuses the CPU."""
    out = neuronet(tmp_path_factory.mktemp("pocl"), "devices")
    pocl = [ln for ln in out.stdout.splitlines() if " cpu  pthread-" in ln]
    verdicts = out.stdout.split(pocl[0], 1)[1].splitlines()[2] if pocl else ""
    if "self-check passed" not in verdicts:
        pytest.skip(f"pip's PoCL cannot compile for this CPU here: {verdicts.strip() or 'no PoCL device'}")


@needs_intel
def test_when_intels_runtime_refuses_the_cpu_pip_pocl_is_used(tmp_path, pocl_compiles_here):
    out = neuronet(tmp_path, "devices", **INTEL_FAILS)
    assert out.returncode == 0, out.stderr
    last = out.stdout.splitlines()[-1]
    assert last.startswith("neuronet uses ") and "pthread" in last
    assert "self-check FAILED: Context failed: DEVICE_NOT_AVAILABLE" in out.stdout


@needs_intel
def test_with_no_device_that_compiles_run_trains_on_numpy_with_a_note(tmp_path):
    out = neuronet(tmp_path, "devices", **POCL_FAILS, **INTEL_FAILS)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "no OpenCL device passes the self-check" in out.stderr
    run = neuronet(
        tmp_path, "run", "--epochs", "1", "--out", str(tmp_path / "report"), **POCL_FAILS, **INTEL_FAILS
    )
    assert run.returncode == 0, run.stderr
    assert "training on the NumPy backend" in run.stderr and "on numpy" in run.stdout


def test_a_runtime_that_cannot_load_says_why_and_how_to_fix_it(tmp_path, monkeypatch):
    """A library the loader would skip without a word (here not a library at all) is named, with the fix."""
    broken = tmp_path / "lib" / vendors.INTEL_LIBRARY
    broken.parent.mkdir()
    broken.write_bytes(b"\x7fELF but not really")
    beside = [broken.parent / name for name in vendors.DEPENDENCIES]
    for path in beside:
        path.write_bytes(b"")
    monkeypatch.setattr(vendors, "_libraries", lambda name: [broken] if name == "intel-opencl-rt" else beside)
    result = vendors._register("")
    assert result.libraries == (str(broken),)
    problem = vendors.load_problem(result)
    assert "does not load" in problem and str(broken) in problem and "pip install" in problem


def test_a_runtime_without_its_libraries_is_not_registered_and_says_which(tmp_path, monkeypatch):
    library = tmp_path / vendors.INTEL_LIBRARY
    library.write_bytes(b"")
    (tmp_path / "libtbb.so.12").write_bytes(b"")
    present = {"intel-opencl-rt": [library], "tbb": [tmp_path / "libtbb.so.12"]}
    monkeypatch.setattr(vendors, "_libraries", lambda name: present.get(name, []))
    result = vendors._register("")
    assert result.folder is None and result.runtimes == ()
    (problem,) = result.problems
    assert problem.endswith("(intel-cmplr-lib-rt): pip install intel-cmplr-lib-rt")


def test_dependencies_pip_put_in_another_folder_are_loaded_first_in_order(tmp_path, monkeypatch):
    """A virtual environment over system site-packages: the runtime in one ``lib``, its dependencies in
    another, where its RUNPATH ($ORIGIN) cannot find them. They are loaded by path, each after what it
    needs; libraries beside the runtime are left to the loader, and nothing else (no malloc replacement)."""
    venv, system = tmp_path / "venv" / "lib", tmp_path / "usr" / "lib"
    venv.mkdir(parents=True)
    system.mkdir(parents=True)
    shipped = {
        "intel-opencl-rt": [venv / vendors.INTEL_LIBRARY],
        "intel-cmplr-lib-rt": [
            system / n for n in ("libimf.so", "libsvml.so", "libirng.so", "libintlc.so.5")
        ],
        "tbb": [venv / "libtbb.so.12", venv / "libtbbmalloc_proxy.so.2"],
    }
    for path in (p for paths in shipped.values() for p in paths):
        path.write_bytes(b"")
    loaded = []
    monkeypatch.setattr(vendors, "_libraries", lambda name: shipped.get(name, []))
    monkeypatch.setattr(vendors.ctypes, "CDLL", lambda path: loaded.append(Path(path).name))
    library, problem = vendors._intel_library()
    assert problem is None and library == venv / vendors.INTEL_LIBRARY
    assert loaded == ["libintlc.so.5", "libimf.so", "libsvml.so", "libirng.so"]


@needs_intel
def test_the_installed_runtime_loads():
    assert vendors.load_problem(vendors.register()) is None


def test_the_vendor_files_read_from_the_previous_folder(tmp_path):
    folder = tmp_path / "vendors"
    folder.mkdir()
    (folder / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    (folder / "empty.icd").write_text("")
    (folder / "notes.txt").write_text("not a vendor file")
    (folder / vendors.OUR_ICD).write_text("/old/venv/lib/libintelocl.so\n")  # ours, from a parent process
    assert vendors._vendor_files(folder) == {"nvidia.icd": "libnvidia-opencl.so.1"}
    assert vendors._vendor_files(folder / "nvidia.icd") == {"nvidia.icd": "libnvidia-opencl.so.1"}
    assert vendors._vendor_files(tmp_path / "missing") == {}


def test_hostile_vendor_folders_are_read_safely(tmp_path):
    """A FIFO (which would block a reader), a huge file, a folder named like a vendor file, binary junk:
    the loader's other inputs are read with bounds, and only a regular file's first line counts."""
    folder = tmp_path / "vendors"
    folder.mkdir()
    os.mkfifo(folder / "fifo.icd")
    (folder / "huge.icd").write_bytes(b"libhuge.so\n" + b"x" * (8 * 2**20))
    (folder / "dir.icd").mkdir()
    (folder / "junk.icd").write_bytes(b"\x00\xff\xfe")
    (folder / "long.icd").write_bytes(b"y" * (2 * vendors.MAX_VENDOR_LINE))
    found = vendors._vendor_files(folder)
    assert found["huge.icd"] == "libhuge.so"
    assert set(found) == {"huge.icd", "long.icd"} and len(found["long.icd"]) == vendors.MAX_VENDOR_LINE
    assert vendors._vendor_files(Path("/dev/zero")) == {}


def test_an_unwritable_cache_leaves_the_vendors_folder_in_the_temporary_folder(tmp_path, monkeypatch):
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("NEURONET_CACHE", str(blocked))
    folder = vendors._write_folder({vendors.OUR_ICD: "/x/libintelocl.so"})
    assert folder is not None and blocked not in folder.parents
    assert (folder / vendors.OUR_ICD).read_text() == "/x/libintelocl.so\n"


@needs_intel
def test_processes_starting_together_all_see_intels_runtime(tmp_path):
    """Several processes register into one fresh cache at once (atomic writes): each lists the device."""
    env = {**os.environ, "NEURONET_CACHE": str(tmp_path / "shared-cache")}
    code = "from opencl import list_devices; print([d.platform for d in list_devices()])"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all("Intel(R) OpenCL" in out for out in outs), outs


@needs_intel
def test_a_child_process_inherits_the_same_folder_without_duplicates(tmp_path):
    """The variable set for this process reaches its children, which register nothing twice."""
    first = vendors._register(str(tmp_path / "none"))
    again = vendors._register(str(first.folder))
    assert again.folder == first.folder
    assert sorted(p.name for p in first.folder.iterdir()) == [vendors.OUR_ICD]


def test_a_foreign_vendor_file_in_the_vendors_folder_is_never_registered(tmp_path, monkeypatch):
    """The loader loads every library the folder's vendor files name: one that is not ours is code run in
    our process, so a folder holding one is not used."""
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(vendors.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    entries = {vendors.OUR_ICD: "/x/libintelocl.so"}
    planted = vendors._write_folder(entries)
    (planted / "evil.icd").write_text("/home/other/libevil.so\n")
    folder = vendors._write_folder(entries)
    assert folder is not None and folder != planted
    assert sorted(p.name for p in folder.glob("*.icd")) == [vendors.OUR_ICD]


def test_a_temporary_vendors_folder_another_user_could_write_is_not_used(tmp_path, monkeypatch):
    """With the cache unwritable the folder goes to the shared temporary folder, where another user may
    have made ``neuronet-<uid>`` first: a link there is not followed, and a parent others may write is
    closed to them before use."""
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("NEURONET_CACHE", str(blocked))
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setattr(vendors.tempfile, "gettempdir", lambda: str(shared))
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    (shared / f"neuronet-{os.getuid()}").symlink_to(elsewhere)
    assert vendors._write_folder({vendors.OUR_ICD: "/x/libintelocl.so"}) is None
    assert list(elsewhere.iterdir()) == []
    (shared / f"neuronet-{os.getuid()}").unlink()
    (shared / f"neuronet-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(shared / f"neuronet-{os.getuid()}", 0o777)
    folder = vendors._write_folder({vendors.OUR_ICD: "/x/libintelocl.so"})
    assert folder is not None and folder.parent == shared / f"neuronet-{os.getuid()}"
    assert not (folder.parent.stat().st_mode & 0o022) and not (folder.stat().st_mode & 0o077)
