"""The durable study store: Optuna's RDB storage, on a SQLite file next to the report by default.

One study per optimisation (per walk-forward window), named from a hash of everything that changes the
passes' figures (EA, space, criterion, method, seed, data, costs, window), so re-running the same command
opens the same study and continues it, while a changed command starts a new one in the same file.

Only the client writes (workers return results), and only finished passes: a pass is proposed by the
sampler on an in-memory twin of the study and written here when its result is back. A killed client or
worker therefore leaves nothing half-done in the file; the passes that were in flight are simply not
there and are proposed again on the next run. Run one client at a time per study.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

optuna.logging.set_verbosity(optuna.logging.WARNING)


def storage_url(path: str | Path) -> str:
    """``sqlite:///...`` for a file path; an ``xxx://`` URL (another RDB) is used as given."""
    text = str(path)
    if "://" in text:
        return text
    file = Path(text)
    if file.exists() and file.is_dir():
        raise IsADirectoryError(f"study store {file}: a folder of that name exists; give a file path")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(f"study store {file}: cannot create its folder ({exc.strerror})") from None
    return f"sqlite:///{file.resolve()}"


def study_name(identity: dict[str, Any]) -> str:
    """A short stable name from the study's identity (sorted JSON, SHA-1)."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return "opt-" + hashlib.sha1(text.encode()).hexdigest()[:16]


def open_study(storage: str, name: str, direction: str, identity: dict) -> optuna.Study:
    """Create or load the durable study (its sampler is never used: passes are proposed in memory)."""
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=name,
            direction=direction,
            sampler=optuna.samplers.RandomSampler(seed=0),
            load_if_exists=True,
        )
    except Exception as exc:  # sqlalchemy's errors: a damaged or foreign file
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OSError(f"cannot open the study store {storage.removeprefix('sqlite:///')}: {reason}") from None
    if "identity" not in study.user_attrs:
        study.set_user_attr("identity", json.loads(json.dumps(identity, default=str)))
    return study


def finished(study: optuna.Study) -> list[FrozenTrial]:
    """Every recorded pass: COMPLETE, or FAIL where the EA refused the parameters."""
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))


def record(study: optuna.Study, trials: list[FrozenTrial]) -> None:
    """Write finished passes; each is one small transaction, so a crash keeps all earlier ones."""
    study.add_trials(trials)


def params_key(params: dict[str, Any]) -> str:
    """A parameter set's identity for "already ran" lookups."""
    return json.dumps(params, sort_keys=True, default=str)
