"""The results table: one row per recorded pass, best first (MetaTrader's "Optimization results" tab)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from optuna.trial import TrialState

from backtests.optimize.criteria import PASS_STATS, Criterion
from backtests.optimize.search import Pass
from backtests.optimize.space import ParamSpace


def results_table(passes: Iterable[Pass], space: ParamSpace, criterion: Criterion) -> pd.DataFrame:
    """Columns: ``pass`` (the search's stable number), each searched parameter, ``criterion`` (NaN where
    undefined or refused), the pass's statistics, ``seconds`` and ``error``; sorted best first, undefined
    last, ties by pass number."""
    rows = []
    for p in passes:
        t = p.trial
        stats = t.user_attrs.get("stats", {})
        defined = t.state == TrialState.COMPLETE and not t.user_attrs.get("undefined")
        row = {"pass": p.number, **{n: t.params.get(n) for n in space.names}}
        row["criterion"] = t.value if defined else np.nan
        row.update({k: stats.get(k) for k in (*PASS_STATS, "custom")})
        row["seconds"] = stats.get("seconds")
        row["error"] = t.user_attrs.get("error")
        rows.append(row)
    columns = ["pass", *space.names, "criterion", *PASS_STATS, "custom", "seconds", "error"]
    df = pd.DataFrame(rows, columns=columns)
    for col in (*PASS_STATS, "custom", "seconds", "criterion"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df.sort_values(
        ["criterion", "pass"], ascending=[not criterion.maximize, True], na_position="last", kind="stable"
    )
    return df.reset_index(drop=True)


def top_passes(table: pd.DataFrame, space: ParamSpace, k: int) -> list[dict]:
    """Parameter sets of the ``k`` best defined passes."""
    best = table[table["criterion"].notna()].head(k)
    return [{n: _native(row[n]) for n in space.names} for _, row in best.iterrows()]


def _native(value):
    """NumPy scalars from the frame back to Python values the EA's parameters accept."""
    return value.item() if isinstance(value, np.generic) else value
