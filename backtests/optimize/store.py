"""The durable study store: Optuna's RDB storage, on a SQLite file next to the report by default.

One study per optimisation (per walk-forward window), named from a hash of everything that changes the
passes' figures (EA, space, criterion, method, seed, data, costs, window), so re-running the same command
opens the same study and continues it, while a changed command starts a new one in the same file.

Only the client writes (workers return results), and only finished passes: a pass is proposed by the
sampler on an in-memory twin of the study and written here when its result is back. A killed client or
worker therefore leaves nothing half-done in the file; the passes that were in flight are simply not
there and are proposed again on the next run. One process at a time uses a store
(``backtests.optimize.lock``).

A batch of finished passes is one transaction. Optuna's ``add_trials`` commits trial by trial, about 17
statements each through its ORM: 10-27 ms of the client's CPU per pass on two busy cores, as much as a
cheap pass itself. ``Store.record`` writes the batch's rows with Optuna's own table models (so the schema
is the installed Optuna's) in one transaction: a crash keeps every earlier batch whole and loses only the
passes of the batch being written, which the next run proposes again. A test checks that a batch written
this way reads back exactly as ``add_trials`` records it.

Only what is ours: a store is opened only if it is new (no file, an empty file, an empty database) or
already holds Optuna's tables. Another application's database is refused before Optuna would add its
tables to it, and a damaged SQLite file (SQLite's ``quick_check``) or one that is not a database at all
is refused in one line; so is any database error met later while reading or writing passes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import distribution_to_json
from optuna.storages import RDBStorage
from optuna.storages._rdb import models  # Optuna's table models: no public bulk write exists
from optuna.trial import FrozenTrial, TrialState

from backtests.optimize.errors import (
    StoreError,
    StoreFolderError,
    StoreIsFolderError,
    StorePermissionError,
    StorePlaceError,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)

SQLITE = "sqlite:///"
OPTUNA_TABLES = frozenset({"studies", "trials", "version_info"})  # what every Optuna RDB store holds


def storage_url(path: str | Path) -> str:
    """``sqlite:///...`` for a file path, its folder made and the file proven writable there
    (``check_writable``); an ``xxx://`` URL (another RDB) is used as given."""
    text = str(path)
    if "://" in text:
        return text
    file = Path(text)
    _check_file(file)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreFolderError(
            f"study store {file}: cannot be made, {_made_in(file)} is not a folder"
        ) from None
    except PermissionError:
        raise StorePermissionError(
            f"study store {file}: cannot be made in {_made_in(file)} (permission denied)"
        ) from None
    except OSError as exc:
        raise StorePlaceError(f"study store {file}: cannot create its folder ({exc.strerror})") from None
    check_writable(file)
    return f"{SQLITE}{file.resolve()}"


def _check_file(file: Path) -> None:
    if file.exists() and file.is_dir():
        raise StoreIsFolderError(f"study store {file}: a folder of that name exists; give a file path")
    if file.exists() and not stat.S_ISREG(file.stat().st_mode):
        raise StoreError(f"study store {file}: not a regular file (a device or a pipe); give a file path")


def _made_in(file: Path) -> Path:
    """The nearest part of ``file``'s folder that exists: where the rest of it would be made."""
    folder = file.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_writable(file: Path) -> None:
    """Refuse a store file that passes could not be written to, before any pass runs: a pass is kept
    only once written, so a store found unwritable at the first batch would lose the passes that ran.
    A new file needs a folder this user may write in; an existing one needs the file writable and its
    folder too, since SQLite writes each transaction's rollback journal (``<file>-journal``) next to it
    (https://www.sqlite.org/tempfiles.html): beside the file the link leads to, for a symbolic link, as
    the store is opened by its real path (``storage_url``). ``file``'s folder exists."""
    folder = file.parent
    if not file.exists():
        if not os.access(folder, os.W_OK | os.X_OK):
            raise StorePermissionError(f"study store {file}: cannot be made in {folder} (permission denied)")
        return
    if not os.access(file, os.R_OK | os.W_OK):
        raise StorePermissionError(
            f"study store {file}: the file cannot be written (permission denied); passes are kept there"
        )
    folder = file.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StorePermissionError(
            f"study store {file}: its folder {folder} cannot be written (permission denied), and SQLite "
            "writes its journal next to the file"
        )


def check_location(path: str | Path) -> None:
    """Refuse, before any data is read or any worker started, a store that ``storage_url`` and
    ``open_study`` would refuse later: a folder, a device or a pipe, a file whose folder cannot be made,
    one that cannot be written (``check_writable``), and an existing file or database that is not ours
    (``check_store``). Nothing is created."""
    text = str(path)
    if "://" not in text:
        file = Path(text)
        _check_file(file)
        folder = _made_in(file)
        if not folder.is_dir():
            raise StoreFolderError(f"study store {file}: cannot be made, {folder} is not a folder")
        if folder != file.parent:  # made by ``storage_url``: this user must be able to make it
            if not os.access(folder, os.W_OK | os.X_OK):
                raise StorePermissionError(
                    f"study store {file}: cannot be made in {folder} (permission denied)"
                )
            return
        check_writable(file)
        if not file.exists():
            return
        text = f"{SQLITE}{file.resolve()}"
    check_store(text)


def study_name(identity: dict[str, Any]) -> str:
    """A short stable name from the study's identity (sorted JSON, SHA-1)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return "opt-" + hashlib.sha1(text.encode()).hexdigest()[:16]


def where(storage: str) -> str:
    """The store as the user named it: the file path, or the URL."""
    return storage.removeprefix(SQLITE)


def check_store(storage: str) -> None:
    """Refuse a store that is not ours, before Optuna writes anything into it."""
    with errors(storage, "cannot open"):
        tables = _sqlite_tables(Path(where(storage))) if storage.startswith(SQLITE) else _tables(storage)
    if tables and not OPTUNA_TABLES.issubset(tables):
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreError(
            f"the study store {where(storage)} is a database of another application (tables: {shown}); "
            "give a new file to --store"
        )


def _sqlite_tables(file: Path) -> set[str]:
    """The tables of an existing SQLite file, read-only, after SQLite's own integrity check."""
    if not file.exists() or file.stat().st_size == 0:
        return set()
    con = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in con.execute("select name from sqlite_master where type = 'table'")}
        problem = con.execute("pragma quick_check(1)").fetchone()[0]
    finally:
        con.close()
    if problem != "ok":
        raise sqlite3.DatabaseError(f"database disk image is malformed ({problem})")
    return tables


def _tables(url: str) -> set[str]:
    from sqlalchemy import create_engine, inspect

    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@contextmanager
def errors(storage: str, doing: str) -> Iterator[None]:
    """Database errors (a damaged file, a full disk, a lost server) as one line naming the store."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, sqlite3.Error, optuna.exceptions.StorageInternalError) as exc:
        raise StoreError(f"{doing} the study store {where(storage)}: {_reason(exc)}") from None
    except ModuleNotFoundError as exc:  # an RDB URL whose driver package is not installed
        raise StoreError(
            f"{doing} the study store {where(storage)}: its database driver is not installed ({exc})"
        ) from None


def _reason(exc: BaseException) -> str:
    """The innermost cause's first line (the driver's own words: "database disk image is malformed")."""
    while exc.__cause__ is not None or getattr(exc, "orig", None) is not None:
        exc = getattr(exc, "orig", None) or exc.__cause__
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text


@dataclass(frozen=True)
class Store:
    """A durable study and the store it lives in (None: in memory, for a call without a store)."""

    study: optuna.Study
    storage: str | None = None
    rdb: RDBStorage | None = None  # the study's database, written to directly in batches

    def finished(self) -> list[FrozenTrial]:
        """Every recorded pass: COMPLETE, or FAIL where the EA refused the parameters."""
        with self._errors("cannot read"):
            return self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))

    def record(self, trials: list[FrozenTrial]) -> None:
        """Write finished passes in one transaction: all of them, or none after a crash."""
        if not trials:
            return
        with self._errors("cannot write to"):
            if self.rdb is None:
                self.study.add_trials(trials)
            else:
                add_finished(self.rdb, self.study.study_name, trials)

    def _errors(self, doing: str):
        return errors(self.storage, doing) if self.storage else _nothing()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def holds_no_study(storage: str | None, name: str) -> bool:
    """Whether the store certainly holds no pass of the study ``name``: no store (in memory), a SQLite file
    that does not exist yet or is empty, or one whose Optuna tables hold no such study (read-only). False
    where that is not known: another database (a server is not asked), a file that cannot be read as
    Optuna's (``open_study`` then says why, in one line)."""
    if storage is None:
        return True
    if _new_file(storage):
        return True
    if not storage.startswith(SQLITE):
        return False
    try:
        con = sqlite3.connect(f"{Path(where(storage)).resolve().as_uri()}?mode=ro", uri=True)
        try:
            return con.execute("select 1 from studies where study_name = ?", (name,)).fetchone() is None
        finally:
            con.close()
    except (sqlite3.Error, OSError):
        return False


def _new_file(storage: str) -> bool:
    """A SQLite store with nothing in it yet: Optuna's tables will be made by the running Optuna."""
    if not storage.startswith(SQLITE):
        return False
    file = Path(where(storage))
    return not file.exists() or file.stat().st_size == 0


def open_study(storage: str | None, name: str, direction: str, identity: dict) -> Store:
    """Create or load the durable study (its sampler is never used: passes are proposed in memory)."""
    if storage is None:
        return Store(optuna.create_study(direction=direction, study_name=name))
    check_store(storage)
    with errors(storage, "cannot open"):
        try:
            # A new file gets the running Optuna's schema: checking it against that Optuna's own (its
            # migration scripts, read from disk) would only cost time. An existing store is checked.
            rdb = RDBStorage(storage, skip_compatibility_check=_new_file(storage))
            study = optuna.create_study(
                storage=rdb,
                study_name=name,
                direction=direction,
                sampler=optuna.samplers.RandomSampler(seed=0),
                load_if_exists=True,
            )
        except RuntimeError as exc:  # a store written by an Optuna whose schema this one cannot read
            raise StoreError(f"cannot open the study store {where(storage)}: {_reason(exc)}") from None
        if "identity" not in study.user_attrs:
            study.set_user_attr("identity", json.loads(json.dumps(identity, default=str)))
    return Store(study, storage, rdb)


def add_finished(rdb: RDBStorage, study_name: str, trials: list[FrozenTrial]) -> None:
    """Append finished ``trials`` (state, values, parameters and user attributes: what a pass records) to
    the study in one transaction, numbered after its trials as Optuna numbers them; the study's row is
    locked meanwhile, as Optuna's own trial creation locks it."""
    from sqlalchemy import func, insert, orm, select

    if any(t.system_attrs or t.intermediate_values for t in trials):
        raise ValueError("add_finished writes no system attributes or intermediate values")
    study, trial = models.StudyModel, models.TrialModel
    with orm.Session(rdb.engine) as session, session.begin():
        query = select(study.study_id).where(study.study_name == study_name).with_for_update()
        study_id = session.execute(query).scalar_one()
        first = session.scalar(select(func.count()).select_from(trial).where(trial.study_id == study_id))
        rows = [
            trial(
                study_id=study_id,
                number=first + i,
                state=t.state,
                datetime_start=t.datetime_start,  # the model stores them as Optuna does
                datetime_complete=t.datetime_complete,
            )
            for i, t in enumerate(trials)
        ]
        session.add_all(rows)
        session.flush()  # assigns the trial ids
        params, values, attrs = [], [], []
        for row, t in zip(rows, trials, strict=True):
            for name, value in t.params.items():
                dist = t.distributions[name]
                params.append(
                    {
                        "trial_id": row.trial_id,
                        "param_name": name,
                        "param_value": dist.to_internal_repr(value),
                        "distribution_json": distribution_to_json(dist),
                    }
                )
            for k, value in enumerate(t.values or ()):
                stored, kind = models.TrialValueModel.value_to_stored_repr(value)
                values.append({"trial_id": row.trial_id, "objective": k, "value": stored, "value_type": kind})
            attrs += [
                {"trial_id": row.trial_id, "key": k, "value_json": json.dumps(v)}
                for k, v in t.user_attrs.items()
            ]
        for model, batch in (
            (models.TrialParamModel, params),
            (models.TrialValueModel, values),
            (models.TrialUserAttributeModel, attrs),
        ):
            if batch:
                session.execute(insert(model), batch)


def params_key(params: dict[str, Any]) -> str:
    """A parameter set's identity for "already ran" lookups."""
    return json.dumps(params, sort_keys=True, default=str)
