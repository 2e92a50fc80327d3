"""The study store under attack: two optimisations on one store, a lock without ``fcntl`` (as on
Windows), another application's database, damaged and non-database files, pipes. Real processes, real
SQLite files."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from backtests.optimize import optimize
from backtests.optimize.errors import StoreError
from backtests.optimize.lock import lock_path
from backtests.optimize.store import storage_url
from datafeeds import load_candles
from strategies import SmaCrossEA

SPACE = {"fast": [3, 5], "slow": [20, 30]}
NO_FCNTL = "import sys; sys.modules['fcntl'] = None  # as on Windows: no POSIX lock module\n"
HOLDER = """
import sys
from backtests.optimize.lock import locked
with locked(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""
TAKER = """
import sys
from backtests.optimize.errors import StoreError
from backtests.optimize.lock import locked
try:
    with locked(sys.argv[1]):
        print("taken", flush=True)
except StoreError as exc:
    print(f"refused: {exc}", flush=True)
"""


@pytest.fixture(scope="module")
def candles():
    return load_candles("synthetic", bars=300, seed=21)


def _python(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, **kw,
    )  # fmt: skip


def _take(url: str, prelude: str = "") -> str:
    taker = _python(prelude + TAKER, url)
    out, err = taker.communicate(timeout=120)
    assert taker.returncode == 0, err
    return out.strip()


@pytest.mark.parametrize("prelude", ["", NO_FCNTL], ids=["os-lock", "without-fcntl"])
def test_a_store_in_use_by_another_process_is_refused_and_free_once_it_ends(tmp_path, prelude):
    url = storage_url(tmp_path / "study.db")
    holder = _python(prelude + HOLDER, url)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = _take(url, prelude)
        assert refused.startswith("refused: the study store ") and "in use by another optimisation" in refused
        assert str(tmp_path / "study.db") in refused and "\n" not in refused
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert _take(url, prelude) == "taken"


@pytest.mark.parametrize("prelude", ["", NO_FCNTL], ids=["os-lock", "without-fcntl"])
def test_a_killed_holder_leaves_the_store_usable(tmp_path, prelude):
    url = storage_url(tmp_path / "study.db")
    holder = _python(prelude + HOLDER, url)
    assert holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)  # no release: the OS lock dies with it, the soft lock's pid is gone
    holder.wait(timeout=60)
    assert lock_path(url).exists()
    assert _take(url, prelude) == "taken"


def test_the_lock_module_imports_no_posix_only_module(tmp_path):
    url = storage_url(tmp_path / "s.db")
    assert _take(url, NO_FCNTL) == "taken"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("table", ["users", "studies"])
def test_another_applications_database_is_refused_and_left_untouched(candles, tmp_path, table):
    """``studies``: a foreign database with such a table looks like a store without this study, which is
    opened on a thread while the first passes run; it is refused all the same, before anything is written."""
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as con:
        con.execute(f"create table {table} (study_name text)")  # as Optuna's column is named
        con.execute(f"insert into {table} values ('ada')")
    before = _digest(foreign)
    refused = rf"app\.db is a database of another application \(tables: {table}\)"
    with pytest.raises(StoreError, match=refused):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(foreign))
    assert _digest(foreign) == before
    with sqlite3.connect(foreign) as con:
        assert [r[0] for r in con.execute("select name from sqlite_master")] == [table]


def test_a_store_damaged_in_its_pages_is_one_error(candles, tmp_path):
    db = tmp_path / "study.db"
    optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(db))
    data = bytearray(db.read_bytes())
    data[3 * 4096 : 3 * 4096 + 3000] = bytes(range(256)) * 11 + bytes(184)  # a trashed page mid-file
    db.write_bytes(bytes(data))
    malformed = r"cannot open the study store .*study\.db: database disk image is malformed"
    with pytest.raises(StoreError, match=malformed):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(db))


@pytest.mark.parametrize("content", [b"not a database", b"SQLite format 3\x00" + bytes(50)])
def test_a_file_that_is_not_a_database_is_one_error(candles, tmp_path, content):
    bad = tmp_path / "x.db"
    bad.write_bytes(content)
    with pytest.raises(StoreError, match=r"cannot open the study store .*x\.db: "):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(bad))
    assert bad.read_bytes() == content


def test_an_empty_file_is_a_new_store(candles, tmp_path):
    empty = tmp_path / "new.db"
    empty.touch()
    assert len(optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(empty))) == 4


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_as_store_is_refused_without_opening_it(candles, tmp_path):
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="not a regular file"):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=str(fifo))


def _neuronet(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neuronet", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("kind", ["foreign", "damaged"])
def test_bad_stores_are_one_line_and_status_2_on_the_command_line(tmp_path, kind):
    store = tmp_path / "s.db"
    if kind == "foreign":
        with sqlite3.connect(store) as con:
            con.execute("create table prices (t integer, p real)")
    else:
        store.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    res = _neuronet("optimize", "sma", "-p", "fast=3,5", "--to", "2017-06-01", "--workers", "0",
                    "--store", str(store), "--out", str(tmp_path / "o"), cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "s.db" in lines[0], res.stderr


SLOW_EA = """
import time
from strategies import SmaCrossEA

class Slow(SmaCrossEA):
    def on_init(self):
        time.sleep(0.15)
        super().on_init()
"""


@pytest.mark.slow
def test_two_optimize_processes_on_one_study_store_each_pass_once(tmp_path):
    """The second command is refused in one line while the first runs; the store holds the grid once."""
    (tmp_path / "slow_ea.py").write_text(textwrap.dedent(SLOW_EA))
    out = tmp_path / "opt"
    args = [sys.executable, "-m", "neuronet", "optimize", f"{tmp_path / 'slow_ea.py'}:Slow",
            "-p", "fast=2:21", "-p", "slow=30:60:10", "--to", "2017-06-01", "--workers", "0", "--no-progress",
            "--out", str(out)]  # fmt: skip
    first = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = out / "study.db"
    deadline = time.monotonic() + 120
    while not db.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.poll() is None, "the first command must still be running"
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert second.returncode == 2, second.stderr
    assert "in use by another optimisation" in second.stderr and len(second.stderr.strip().splitlines()) == 1
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from trials").fetchone()[0] == 80  # 20 x 4, each once


@pytest.mark.parametrize(
    "url, words",
    [("foo://bar", "Can't load plugin"), ("postgresql+nosuchdriver://u@127.0.0.1:1/db", "Can't load plugin")],
)
def test_an_rdb_url_that_cannot_be_used_is_one_error(candles, url, words):
    with pytest.raises(StoreError, match=words):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path=url)


def test_a_missing_database_driver_is_one_error(candles, monkeypatch):
    import sqlalchemy.dialects.postgresql.psycopg2 as dialect

    def missing(*args, **kw):
        raise ModuleNotFoundError("No module named 'psycopg2'")

    monkeypatch.setattr(dialect.PGDialect_psycopg2, "import_dbapi", classmethod(missing))
    with pytest.raises(StoreError, match=r"driver is not installed \(No module named 'psycopg2'\)"):
        optimize(candles, SmaCrossEA, SPACE, workers=0, store_path="postgresql+psycopg2://u@127.0.0.1:1/d")


def test_one_store_file_named_another_way_takes_the_same_lock(tmp_path, monkeypatch):
    """Two optimisations on one SQLite file, one given ``--store study.db``, the other a symlink to it or a
    relative ``sqlite:///`` URL: one lock, so the second is refused (it used to run beside the first)."""
    store = tmp_path / "study.db"
    store.touch()
    (tmp_path / "link.db").symlink_to(store)
    monkeypatch.chdir(tmp_path)
    holder = _python(HOLDER, storage_url(store))
    try:
        assert holder.stdout.readline().strip() == "held"
        for other in ("sqlite:///link.db", storage_url(tmp_path / "link.db"), "sqlite:///./study.db"):
            assert _take(other).startswith("refused: the study store "), other
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_store_location_is_checked_without_creating_anything(tmp_path, monkeypatch):
    """What ``storage_url`` and ``open_study`` refuse later, ``check_location`` refuses before the data is
    read, and it makes no folder and no file."""
    from backtests.optimize import store

    (tmp_path / "file").write_text("x")
    (tmp_path / "app.db").write_bytes(b"not a database at all, just text that is long enough" * 4)
    store.check_location(tmp_path / "new" / "deeper" / "study.db")  # to be made: fine
    with pytest.raises(IsADirectoryError, match="a folder of that name exists"):
        store.check_location(tmp_path)
    with pytest.raises(NotADirectoryError, match=r"cannot be made, .*file is not a folder"):
        store.check_location(tmp_path / "file" / "study.db")
    with pytest.raises(StoreError, match=r"app\.db: file is not a database"):
        store.check_location(tmp_path / "app.db")
    monkeypatch.setattr(store.os, "access", lambda *args: False)  # a folder this user may not write in
    with pytest.raises(PermissionError, match=r"cannot be made in .* \(permission denied\)"):
        store.check_location(tmp_path / "new" / "study.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "file"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc: no file can be made there")
@pytest.mark.parametrize("prelude", ["", NO_FCNTL], ids=["os-lock", "without-fcntl"])
def test_a_store_lock_that_cannot_be_created_is_not_called_in_use(prelude):
    """No file can be made in /proc, by root or anyone (where root's ``os.access`` says the folder may be
    written): the lock of a store there is refused as one that cannot be created, never as "in use by
    another optimisation", which sends the user to wait for a run that does not exist."""
    answer = _take("sqlite:////proc/neuronet.db", prelude)
    assert answer.startswith("refused: ") and "cannot be created" in answer and "in use" not in answer
    assert not Path("/proc/neuronet.db.lock").exists()
