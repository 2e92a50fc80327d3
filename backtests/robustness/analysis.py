"""The robustness analysis of one run, from a ``Backtest`` and its ``Result`` or from a report folder.

``analyze(result, backtest)`` and ``analyze_report(folder, ...)`` return the same ``Robustness`` object;
its ``to_dict()`` is report.json's ``robustness`` key (``neuronet backtest --monte-carlo N``) and the
content of robustness.json (``neuronet robustness REPORT``). Every figure carries the seed it was drawn
with; the same seed gives the same figures inline or on Dask workers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from backtests.optimize.api import session
from backtests.optimize.passes import Market
from backtests.robustness.bootstrap import check_block, check_count
from backtests.robustness.errors import RobustnessError
from backtests.robustness.montecarlo import (
    METHODS,
    Distribution,
    Plan,
    Run,
    check_plan,
    check_run,
    monte_carlo,
)
from backtests.robustness.permutation import Job, PermutationTest, check_request, permutation_test
from backtests.robustness.permute import SCOPES
from backtests.robustness.predictions import prediction_robustness, scored_bars

MAX_BOOTSTRAP = 100_000


@dataclass
class Robustness:
    """Monte Carlo distributions by method, the permutation test, prediction intervals and tests, and a
    note for each part that could not be computed (and why)."""

    seed: int
    monte_carlo: dict[str, Distribution] = field(default_factory=dict)
    permutation: PermutationTest | None = None
    predictions: dict | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "monte_carlo": {k: v.to_dict() for k, v in self.monte_carlo.items()} or None,
            "permutation": None if self.permutation is None else self.permutation.to_dict(),
            "predictions": self.predictions,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Options:
    """What to compute (the command line's options, with the same defaults)."""

    monte_carlo: int = 1000
    methods: tuple[str, ...] = METHODS
    block: float | None = None  # the returns and predictions bootstraps' mean block (bars)
    ruin_pct: float = 20.0
    permutations: int = 0
    permutation_block: int = 1
    scope: str = "both"
    bootstrap: int = 1000
    seed: int | None = None  # None: the run's own seed (report.json's ``seed``)

    def check(self) -> None:
        check_count("--monte-carlo", self.monte_carlo, 0, 1_000_000)
        for method in self.methods:
            check_plan(method, max(1, self.monte_carlo), self.seed or 0, self.ruin_pct, self.block)
        check_count("--permutations", self.permutations, 0, 100_000)
        check_count("--permutation-block", self.permutation_block, 1, 10**9)  # the forward bars: later
        if self.scope not in SCOPES:
            raise RobustnessError(f"--permute {self.scope!r}: choose {' or '.join(SCOPES)}")
        check_count("--bootstrap", self.bootstrap, 0, MAX_BOOTSTRAP)


def analyze(
    result: Any,
    backtest: Any = None,
    options: Options | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    store_path: str | None = None,
    progress: bool = False,
) -> Robustness:
    """The analysis of a finished ``Result``; permutations also need its ``Backtest`` (the candles, the EA
    class, the account and the periods), and use the optimisation engine (``workers``, ``scheduler``) and a
    study store (``store_path``) that makes them resumable."""
    options = seeded(options or Options(), result.seed)
    options.check()
    run = Run.from_frames(result.account["deposit"], result.trades, result.curves)
    job = candles = None
    if options.permutations:
        if backtest is None:
            raise RobustnessError("a permutation test needs the Backtest that made the result")
        if backtest.model != "open":
            raise RobustnessError(
                f"--permutations: the permutation test rebuilds the candles only; run it with --model open "
                f"(this run used {backtest.model})"
            )
        candles, job = backtest.candles, permutation_job(backtest, result.ea["params"], options)
    return _analyze(run, result.predictions, options, candles, job, workers, scheduler, store_path, progress)


def seeded(options: Options, seed: int) -> Options:
    """``options`` with the run's seed where they name none."""
    from dataclasses import replace

    return options if options.seed is not None else replace(options, seed=int(seed))


def permutation_job(backtest: Any, params: dict, options: Options) -> Job:
    """The permutation passes' shared settings from a Backtest and the EA's parameters of the run."""
    periods = backtest.periods
    walk = (
        (periods.study_window, periods.retrain_every)
        if periods.retrain_every and periods.study_window
        else None
    )
    return Job(
        backtest.ea_class,
        dict(params),
        backtest.account,
        backtest.seed,
        periods.forward_start,
        walk,
        options.permutation_block,
        options.scope,
    )


def preflight(run: Run, predictions: dict | None, options: Options) -> None:
    """Refuse, before any work, a request the run cannot answer: too few trades or bars or flat returns
    for the Monte Carlo asked for, prediction intervals for a run without predictions, or a ``--block``
    longer than a series it would resample."""
    if options.monte_carlo:
        for method in options.methods:
            check_run(run, method)
    if options.bootstrap:
        if predictions is None:
            raise RobustnessError("--bootstrap: the run has no predictions (its EA makes none)")
        series = predictions.get("series") or {}
        if not series:
            raise RobustnessError("--bootstrap: the report has no per-bar predictions (an older report)")
    if options.block is not None:  # at most the length of each series it resamples
        if options.monte_carlo and "returns" in options.methods:
            check_block("--block", options.block, len(run.equity) - 1)
        if options.bootstrap:
            check_block("--block", options.block, scored_bars(predictions))


def _analyze(
    run,
    predictions,
    options,
    candles,
    job,
    workers,
    scheduler,
    store_path,
    progress,
    strict=False,
    expect=None,
    on_ready=None,
) -> Robustness:
    """The parts ``options`` ask for. ``strict``: a part the run cannot answer is an error before any
    work (the command line, where the user asked for it); otherwise it is a note in the result.
    ``on_ready()`` is called once every check has passed, before any work."""
    if strict:
        preflight(run, predictions, options)
    out = Robustness(options.seed)
    if job is not None:
        check_request(
            options.permutations, options.permutation_block, options.scope, len(candles) - job.forward_start
        )
    if on_ready is not None:
        on_ready()
    with ExitStack() as stack:
        engine = shared = None
        if job is not None or workers or scheduler:
            market = Market(candles) if candles is not None else Market(pd.DataFrame())
            engine, shared = stack.enter_context(session(market, workers, scheduler))
        if options.monte_carlo:
            mc_shared = None if engine is None else engine.share(run)
            for method in options.methods:
                plan = Plan(method, options.monte_carlo, options.seed, options.ruin_pct, options.block)
                try:
                    out.monte_carlo[method] = monte_carlo(run, plan, engine, mc_shared)
                except RobustnessError as exc:
                    out.notes.append(f"Monte Carlo ({method}): {exc}")
        if job is not None:
            out.permutation = permutation_test(
                candles, job, options.permutations, store_path=store_path, progress=progress,
                engine=engine, shared=shared, expect=expect,
            )  # fmt: skip
    if options.bootstrap and predictions is not None:
        try:
            out.predictions = prediction_robustness(
                predictions, reps=options.bootstrap, block=options.block, seed=options.seed
            )
        except RobustnessError as exc:
            out.notes.append(f"predictions: {exc}")
    return out


# -- reports ---------------------------------------------------------------------------------------------

REQUIRED = ("report_version", "complete", "account", "stats", "curves", "trades", "ea", "data", "periods")


def load_report(folder: str | Path) -> dict:
    """A finished run's report.json, refused in one line when it is missing, not ours, of another version
    or incomplete."""
    from backtests.report import REPORT_VERSION
    from neuronet.userfiles import open_regular

    path = Path(folder)
    path = path / "report.json" if path.is_dir() else path
    try:
        with open_regular(path, "report.json") as fh:
            doc = json.loads(fh.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RobustnessError(f"{path}: not a report.json (not JSON: {exc})") from None
    if not isinstance(doc, dict) or not set(REQUIRED) <= doc.keys():
        raise RobustnessError(f"{path}: not a neuronet backtest report (report.json keys missing)")
    if doc["report_version"] != REPORT_VERSION:
        raise RobustnessError(
            f"{path}: report version {doc['report_version']!r}, this neuronet reads version "
            f"{REPORT_VERSION}; run the backtest again with this version"
        )
    if not doc["complete"]:
        raise RobustnessError(f"{path}: the run was interrupted (INCOMPLETE); analyse a finished run")
    return doc


def run_of_report(doc: dict) -> Run:
    """The Monte Carlo's view of a report.json: trades and the curve."""
    try:
        trades = pd.DataFrame(doc["trades"], columns=["exit_time", "net_profit"])
        trades["exit_time"] = pd.to_datetime(trades["exit_time"], utc=True)
        curves = doc["curves"]
        frame = pd.DataFrame({"equity": pd.to_numeric(pd.Series(curves["equity"]), errors="raise")})
        frame.index = pd.to_datetime(curves["time"], utc=True)
        trades["net_profit"] = pd.to_numeric(trades["net_profit"], errors="raise")
        return Run.from_frames(float(doc["account"]["deposit"]), trades, frame)
    except (KeyError, TypeError, ValueError) as exc:
        raise RobustnessError(
            f"report.json: its trades or curves cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def analyze_report(
    folder: str | Path,
    options: Options | None = None,
    *,
    candles: pd.DataFrame | None = None,
    ea: Any = None,
    workers: int | None = None,
    scheduler: str | None = None,
    store_path: str | None = None,
    progress: bool = False,
    strict: bool = False,
    on_ready: Callable[[], None] | None = None,
) -> Robustness:
    """The analysis of a report folder. Permutations re-run the EA: give the report's ``candles`` (the
    same bars: they are checked against the report) and its EA class ``ea``. ``on_ready()`` is called
    once the request and the report have passed every check, before any work (to announce it)."""
    (options or Options()).check()
    doc = load_report(folder)
    options = seeded(options or Options(), int(doc["seed"]))
    run = run_of_report(doc)
    job = None
    if options.permutations:
        job = report_job(doc, candles, ea, options)
    expect = doc["stats"].get("total_net_profit")
    return _analyze(
        run, doc.get("predictions"), options, candles, job, workers, scheduler, store_path, progress, strict,
        expect, on_ready,
    )  # fmt: skip


def report_job(doc: dict, candles: pd.DataFrame | None, ea: Any, options: Options) -> Job:
    """The permutation settings of a report: its EA, parameters, account, seed and periods, on ``candles``
    that must be the report's bars."""
    from backtests.broker import AccountConfig

    if candles is None or ea is None:
        raise RobustnessError("a permutation test of a report needs its candles and its EA class")
    data = doc["data"]
    span = (str(candles.index[0]), str(candles.index[-1])) if len(candles) else ("", "")
    if (len(candles), *span) != (data["bars"], data["first"], data["last"]):
        given = f"{len(candles)} bars, {span[0]} .. {span[1]}" if len(candles) else "no bars"
        raise RobustnessError(
            f"the candles given ({given}) are not the report's "
            f"({data['bars']} bars, {data['first']} .. {data['last']}); give the data options of the "
            "report's run (--source, --symbol, --timeframe, --path, --from, --to, --broker-tz, --opt)"
        )
    if data.get("model", "open") != "open":
        raise RobustnessError(
            f"--permutations: the report's run used --model {data['model']}; permutations need open"
        )
    if doc["ea"].get("class") != ea.__name__:
        raise RobustnessError(f"the report is of {doc['ea'].get('class')}, not {ea.__name__}; give its EA")
    periods = doc["periods"]
    walk = None
    if periods.get("retrain_every") and periods.get("study_window"):
        walk = (int(periods["study_window"]), int(periods["retrain_every"]))
    account = AccountConfig(
        **{k: v for k, v in doc["account"].items() if k in AccountConfig.__dataclass_fields__}
    )
    return Job(
        ea, dict(doc["ea"].get("params") or {}), account, int(doc["seed"]), int(periods["forward_start"]),
        walk, options.permutation_block, options.scope,
    )  # fmt: skip


def write_robustness(folder: str | Path, robustness: Robustness, report: dict) -> Path:
    """robustness.json (the numbers, with the seed and the report they belong to) and robustness.html (the
    section as a page of its own) in ``folder``, each written to a temporary file and renamed."""
    from backtests.robustness.section import page
    from datafeeds.files import atomic_write_json, atomic_write_text

    folder = Path(folder)
    doc = {
        "report": {"created": report.get("created"), "ea": report.get("ea"), "data": report.get("data")},
        "robustness": robustness.to_dict(),
    }
    atomic_write_json(folder / "robustness.json", doc)
    title = f"{report['ea'].get('class')} · {report['data'].get('symbol')} {report['data'].get('timeframe')}"
    out = folder / "robustness.html"
    atomic_write_text(out, page(title, robustness.to_dict(), report["account"].get("currency", "")))
    return out
