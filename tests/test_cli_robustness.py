"""``neuronet robustness REPORT`` and the robustness options of ``backtest`` and ``optimize`` as a user
runs them: real files, one line and exit status 2 for every bad value, nothing written then."""

from __future__ import annotations

import json
import shutil

import pytest

from neuronet.cli import main


def cli(capsys, *args) -> tuple[int, str, str]:
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A finished SmaCrossEA report on the first months of the sample (89 trades), with --monte-carlo."""
    folder = tmp_path_factory.mktemp("rep") / "r"
    try:
        main(["backtest", "sma", "--to", "2017-10-01", "--out", str(folder), "--monte-carlo", "300",
              "--no-progress"])  # fmt: skip
    except SystemExit as exc:
        assert not exc.code
    return folder


def test_backtest_writes_the_robustness_with_its_seed(report):
    doc = json.loads((report / "report.json").read_text())
    r = doc["robustness"]
    assert r["seed"] == doc["seed"] == 0 and set(r["monte_carlo"]) == {"trades", "returns"}
    assert r["monte_carlo"]["trades"]["simulations"] == 300 and r["permutation"] is None
    figures = r["monte_carlo"]["trades"]["figures"]
    assert figures["final"]["actual"] == pytest.approx(doc["stats"]["final_balance"])
    page = (report / "report.html").read_text()
    assert "Robustness: could this be luck?" in page and "Probability of ruin" in page


def test_robustness_of_a_report_with_permutations_then_never_replaced_without_force(report, tmp_path, capsys):
    folder = tmp_path / "r"
    shutil.copytree(report, folder)
    args = ["--permutations", 6, "--workers", 0, "--to", "2017-10-01", "--monte-carlo", 200]
    code, out, err = cli(capsys, "robustness", folder, *args)
    assert code == 0, err
    doc = json.loads((folder / "robustness.json").read_text())["robustness"]
    assert doc["permutation"]["permutations"] == 6 and doc["permutation"]["p_values"]["net_profit"] > 0
    assert "permutation test (6 histories)" in out and (folder / "robustness.html").exists()
    code, _, err = cli(capsys, "robustness", folder, "--monte-carlo", 200)
    assert code == 2 and "--force" in err and err.count("\n") == 1
    code, _, err = cli(capsys, "robustness", folder, "--monte-carlo", 200, "--force")
    assert code == 0, err


def _copy(report, tmp_path, edit=None):
    folder = tmp_path / "r"
    shutil.copytree(report, folder)
    if edit:
        doc = json.loads((folder / "report.json").read_text())
        edit(doc)
        (folder / "report.json").write_text(json.dumps(doc))
    return folder


def _flat(doc):
    doc["curves"]["equity"] = [doc["account"]["deposit"]] * len(doc["curves"]["equity"])


BAD = [
    (lambda d: d.update(report_version=1), [], "report version 1"),
    (lambda d: d.update(complete=False), [], "interrupted"),
    (lambda d: d.update(trades=d["trades"][:1]), ["--methods", "trades"], "at least 2 closed trades"),
    (_flat, ["--methods", "returns"], "zero-variance"),
    (None, ["--monte-carlo", 0], "--monte-carlo 0"),
    (None, ["--monte-carlo", 10**9], "--monte-carlo 1000000000"),
    (None, ["--permutations", 0], "--permutations 0"),
    (None, ["--permutations", 10**9], "--permutations 1000000000"),
    (None, ["--bootstrap", 5], "no predictions"),
    (None, ["--methods", "shuffle"], "--methods"),
    (None, ["--ruin-drawdown", 0], "--ruin-drawdown"),
    (None, ["--ruin-drawdown", "nan"], "--ruin-drawdown"),
    (None, ["--block", 0], "--block"),
    (None, ["--permute", "study"], "--permute"),
    (None, ["--permutations", 3, "--permutation-block", 0], "--permutation-block"),
    (
        None,
        ["--permutations", 3, "--workers", 0, "--from", "2017-05-01", "--to", "2017-10-01"],
        "not the report's",
    ),
    (None, ["--seed", -1], "--seed"),
]


@pytest.mark.parametrize("edit, args, match", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_is_one_line_exit_2_and_nothing_written(report, tmp_path, capsys, edit, args, match):
    folder = _copy(report, tmp_path, edit)
    before = sorted(p.name for p in folder.iterdir())
    code, _, err = cli(capsys, "robustness", folder, *args)
    assert code == 2 and match in err and err.count("\n") == 1, err
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_missing_or_foreign_report_is_one_line(tmp_path, capsys):
    code, _, err = cli(capsys, "robustness", tmp_path / "nowhere")
    assert code == 2 and "no such file" in err
    (tmp_path / "report.json").write_text("[1, 2]")
    code, _, err = cli(capsys, "robustness", tmp_path)
    assert code == 2 and "not a neuronet backtest report" in err


BACKTEST_BAD = [
    ("--monte-carlo", "-1"), ("--monte-carlo", "10000000000"), ("--permutations", "-3"),
    ("--ruin-drawdown", "0"), ("--ruin-drawdown", "101"), ("--ruin-drawdown", "inf"), ("--bootstrap", "-1"),
    ("--workers", "-2"),
]  # fmt: skip


@pytest.mark.parametrize("option, value", BACKTEST_BAD, ids=[f"{o} {v}" for o, v in BACKTEST_BAD])
def test_backtest_robustness_options_refuse_bad_values(tmp_path, capsys, option, value):
    code, _, err = cli(capsys, "backtest", "sma", "--out", tmp_path / "o", option, value)
    assert code == 2 and option in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "option, value", [("--spa-reps", "0"), ("--pbo-splits", "7"), ("--pbo-splits", "40")]
)
def test_optimize_robustness_options_refuse_bad_values(tmp_path, capsys, option, value):
    code, _, err = cli(capsys, "optimize", "sma", "-p", "fast=5:10:5", "--out", tmp_path / "o", option, value)
    assert code == 2 and option in err and err.count("\n") == 1, err


def test_a_report_whose_run_cannot_be_reproduced_is_refused_before_any_permutation(report, tmp_path, capsys):
    """The report says fast=10; its parameters edited to fast=7 re-run to another net profit."""
    folder = _copy(report, tmp_path, lambda d: d["ea"]["params"].update(fast=7))
    code, _, err = cli(
        capsys, "robustness", folder, "--permutations", 50, "--workers", 0, "--to", "2017-10-01"
    )
    assert code == 2 and "differ from the report's" in err and err.count("\n") == 1, err
    assert not (folder / "robustness.json").exists()


def test_the_seed_is_the_reports_unless_given_in_python_as_on_the_command_line(report, tmp_path):
    from backtests.robustness.analysis import Options, analyze_report

    folder = _copy(report, tmp_path, lambda d: d.update(seed=5))
    assert analyze_report(folder, Options(monte_carlo=50)).seed == 5
    assert analyze_report(folder, Options(monte_carlo=50, seed=2)).seed == 2


def test_backtest_refuses_permutations_of_a_finer_model_before_reading_data(tmp_path, capsys):
    code, _, err = cli(
        capsys, "backtest", "sma", "--permutations", 5, "--model", "ohlc1m", "--out", tmp_path / "o"
    )
    assert code == 2 and "--model open" in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args",
    [["--to", "2017-10-01"], ["--ea", "SmaCrossEA"], ["--permute", "forward"], ["--permutation-block", "24"]],
)
def test_an_option_of_the_permutation_test_without_permutations_is_refused_not_dropped(
    report, tmp_path, capsys, args
):
    """The data options, --ea, --permute and --permutation-block act in the permutation test only: without
    --permutations they were dropped unsaid, and the run was not the one asked for."""
    folder = _copy(report, tmp_path)
    code, out, err = cli(capsys, "robustness", folder, *args)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err == (
        f"error: {args[0]} is for the permutation test (the report's EA re-run on its data): give "
        "--permutations N, or leave it out\n"
    )
    assert not (folder / "robustness.json").exists()


def test_a_block_longer_than_the_series_is_refused_before_any_work(report, tmp_path, capsys):
    """--block 100000 was a note in robustness.json ("Monte Carlo (returns): --block ...") after the plan
    was announced: the README promises one line and nothing written."""
    folder = _copy(report, tmp_path)
    returns = len(json.loads((folder / "report.json").read_text())["curves"]["equity"]) - 1
    code, out, err = cli(capsys, "robustness", folder, "--block", 100000)
    assert code == 2 and out == "", out
    assert err == f"error: --block 100000.0: give a block length from 1 to {returns} (the series' length)\n"
    assert not (folder / "robustness.json").exists()


def test_candles_of_no_bars_for_the_permutation_test_are_one_line_not_an_internal_error(
    report, tmp_path, capsys
):
    """``--to 1990-01-01`` gave the permutation test an empty frame: IndexError, status 1."""
    folder = _copy(report, tmp_path)
    code, out, err = cli(capsys, "robustness", folder, "--permutations", 2, "--to", "1990-01-01")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: the candles given (no bars) are not the report's (")


@pytest.mark.parametrize(
    ("command", "store", "remedy"),
    [
        (["robustness", "{folder}", "--permutations", 2, "--to", "2017-10-01"], "permutations.db", "--out"),
        (["backtest", "sma", "--to", "2017-10-01", "--permutations", 2, "--out", "{folder}"],
         "permutations.db", "--out"),
        (["optimize", "sma", "-p", "fast=5,10", "--to", "2017-10-01", "--out", "{folder}"], "study.db",
         "--store"),
    ],
    ids=["robustness", "backtest", "optimize"],
)  # fmt: skip
def test_a_store_in_use_is_refused_naming_the_option_of_the_command_that_hit_it(
    report, tmp_path, capsys, command, store, remedy
):
    """The lock's refusal said "give another --store" to robustness and backtest, which have no --store:
    their permutation test's store is the one in the --out folder."""
    import filelock

    folder = _copy(report, tmp_path) if command[0] == "robustness" else tmp_path / "out"
    folder.mkdir(exist_ok=True)
    holder = filelock.FileLock(str(folder / f"{store}.lock"))
    args = [str(folder) if a == "{folder}" else a for a in command]
    with holder:
        code, _, err = cli(capsys, *args, "--workers", 0, "--no-progress")
    refusal = err.splitlines()[-1]  # after backtest's note on the sample's missing spread
    assert code == 2 and err.count("error:") == 1 and refusal.startswith("error: "), err
    assert f"the study store {folder / store} is in use by another " in refusal
    assert refusal.endswith(f"; wait for it to finish, or give another {remedy}"), refusal


def test_a_method_named_twice_runs_once(report, tmp_path, capsys):
    """``--methods trades,TRADES`` ran the same Monte Carlo twice ("Monte Carlo 20 x trades/trades")."""
    folder = _copy(report, tmp_path)
    code, out, err = cli(capsys, "robustness", folder, "--methods", "trades,TRADES", "--monte-carlo", 20)
    assert code == 0, err
    assert "Monte Carlo 20 x trades;" in out and out.count("monte carlo (trades)") == 1
