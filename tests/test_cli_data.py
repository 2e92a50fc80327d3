"""``neuronet data ...`` through the real entry point, ``neuronet.cli.main``."""

import subprocess
import sys

import pytest

from datafeeds import read_mt5_csv, read_sample, write_mt5_csv
from datafeeds.store import write_npz
from neuronet.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def test_show_without_arguments_is_the_offline_sample(capsys):
    code, out, err = run(capsys, "data", "show")
    assert code == 0, err
    assert out.startswith("EURUSD H1   source sample")
    assert "bars         5000" in out
    assert "first bar    2017-04-19 09:00" in out and "last bar     2018-02-07 15:00" in out
    assert "42 expected" in out and "0 unexpected" in out
    assert "spread       min 0" in out
    assert "price        low 1.06824  high 1.25374" in out
    assert "last 10 bars (UTC):" in out
    assert out.rstrip().splitlines()[-1].split()[:3] == ["2018-02-07", "15:00", "1.23427"]


def test_show_resampled_window_in_a_broker_clock(capsys):
    window = ["--from", "2018-01-01", "--to", "2018-01-06"]
    code, out, _ = run(capsys, "data", "show", "EURUSD", "D1", "--broker-tz", "+2/us", *window, "--bars", "2")
    assert code == 0
    assert "EURUSD D1" in out and "clock        UTC+2 (us DST)" in out
    assert "bars         4" in out  # broker days 2 .. 5 January; the 1 January bar opened on 31 December
    assert "2018-01-04 22:00" in out


def test_show_synthetic_and_csv_sources(capsys, tmp_path):
    code, out, _ = run(
        capsys, "data", "show", "USDJPY", "M5", "--source", "synthetic", "--seed", "3", "-n", "1"
    )
    assert code == 0 and "USDJPY M5" in out and "bars         10000" in out and "3 digits" in out
    path = write_mt5_csv(read_sample().iloc[:50], tmp_path / "EURUSD_H1.csv")
    code, out, _ = run(capsys, "data", "show", "--path", str(path), "-n", "0")
    assert code == 0 and "bars         50" in out and "last" not in out.split("tick volume")[1]


def test_export_writes_metatrader_csv_that_reads_back(capsys, tmp_path):
    out_path = tmp_path / "EURUSD_H4.csv"
    code, out, _ = run(
        capsys, "data", "export", "EURUSD", "H4", "--out", str(out_path), "--from", "2018-01-01"
    )
    assert code == 0 and f"to {out_path}" in out
    assert out_path.read_text().startswith("<DATE>\t<TIME>\t<OPEN>")
    back = read_mt5_csv(out_path)
    assert back.index[0].strftime("%Y-%m-%d %H:%M") == "2018-01-01 20:00"
    code, out, _ = run(capsys, "data", "export", "--out", str(tmp_path / "c.csv"), "--format", "csv")
    assert code == 0 and (tmp_path / "c.csv").read_text().startswith("Date,Time,Open,High,Low,Close,Volume\n")


def test_validate_prints_the_report_for_a_good_file(capsys, tmp_path):
    path = write_mt5_csv(read_sample(), tmp_path / "EURUSD_H1.csv")
    code, out, _ = run(capsys, "data", "validate", str(path))
    assert code == 0
    assert "status      valid" in out and "42 expected" in out
    npz = write_npz(tmp_path / "H1.npz", read_sample())
    code, out, _ = run(capsys, "data", "validate", str(npz))
    assert code == 0 and "EURUSD H1" in out


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda t: t.replace("1.07296", "1.0729x"), "line 3: high '1.0729x' is not a number"),
        (lambda t: t.replace("\t1241\t0\t0", ""), "line 3: truncated line"),
        (lambda t: "", "empty file"),
        (lambda t: t.replace("<CLOSE>", "<CLOZE>"), "line 1: unknown column 'cloze'"),
        (lambda t: t.replace("1.07220", "1.07000"), "high below open or close"),
    ],
    ids=["bad-number", "truncated", "empty", "header", "inconsistent"],
)
def test_validate_bad_file_is_one_line_and_exit_2(capsys, tmp_path, mutate, message):
    good = write_mt5_csv(read_sample().iloc[:20], tmp_path / "EURUSD_H1.csv").read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(mutate(good))
    code, _, err = run(capsys, "data", "validate", str(bad))
    assert code == 2
    assert err.startswith(f"error: {bad}: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_validate_repair_reports_what_it_would_drop(capsys, tmp_path):
    lines = write_mt5_csv(read_sample().iloc[:5], tmp_path / "EURUSD_H1.csv").read_text().splitlines()
    lines.insert(2, lines[1])
    (tmp_path / "dup.csv").write_text("\n".join(lines) + "\n")
    code, out, _ = run(
        capsys, "data", "validate", str(tmp_path / "dup.csv"), "--repair", "--symbol", "EURUSD"
    )
    assert code == 0 and "repaired    dropped 1 duplicate bars" in out and "valid after repair" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["data", "show", "--source", "nope"], "unknown candle source 'nope'"),
        (["data", "show", "--source", "csv"], "--source csv needs --path FILE"),
        (["data", "show", "GBPUSD"], "only EURUSD"),
        (["data", "show", "EURUSD", "H5"], "unknown timeframe 'H5'"),
        (["data", "show", "EURUSD", "M15"], "cannot resample EURUSD H1 to M15"),
        (["data", "show", "--from", "soon"], "cannot read start 'soon'"),
        (["data", "validate", "/nonexistent/x.csv"], "/nonexistent/x.csv: no such file"),
        (["data", "show", "--broker-tz", "Mars"], "cannot read broker time zone"),
        (
            ["data", "show", "-s", "synthetic", "-o", "bars=many"],
            "'synthetic' rejects its options (bars='many')",
        ),
        (["data", "show", "-s", "synthetic", "-o", "sed=1"], "no option 'sed'; did you mean 'seed'?"),
        (["data", "export", "--out", "x.csv", "--format", "xls"], "--format must be mt5 or csv, not 'xls'"),
    ],
)
def test_user_errors_are_one_line(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_export_to_a_folder_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "data", "export", "--out", str(tmp_path))
    assert code == 2 and err == f"error: {tmp_path}: is a folder; give a file name to write\n"
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_export_repair_writes_the_repaired_bars_and_says_what_changed(capsys, tmp_path):
    lines = write_mt5_csv(read_sample().iloc[:5], tmp_path / "EURUSD_H1.csv").read_text().splitlines()
    lines.insert(2, lines[1])
    (tmp_path / "dup.csv").write_text("\n".join(lines) + "\n")
    args = ["data", "export", "--path", str(tmp_path / "dup.csv"), "--out", str(tmp_path / "clean.csv")]
    code, _, err = run(capsys, *args)
    assert code == 2 and "duplicate bar times" in err and "--repair" in err
    assert not (tmp_path / "clean.csv").exists()
    code, out, _ = run(capsys, *args, "--repair")
    assert code == 0 and "repaired    dropped 1 duplicate bars: 2017-04-19 09:00" in out
    assert (tmp_path / "clean.csv").read_text() == (tmp_path / "EURUSD_H1.csv").read_text()


def test_text_options_stay_text(capsys):
    # "+2" would otherwise become the number 2, which is no broker clock.
    code, out, err = run(
        capsys, "data", "show", "-s", "synthetic", "-o", "clock=+2", "-o", "bars=50", "-n", "0"
    )
    assert code == 0, err
    assert "clock        UTC+2, times shown in UTC" in out


_INTERRUPTED = """
import sys
from neuronet.cli import app, main

@app.command("interrupt-me")
def _interrupt_me() -> None:
    raise KeyboardInterrupt

main(["interrupt-me"])
"""


def test_ctrl_c_exits_130_with_one_line():
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130
    assert proc.stderr == "Interrupted.\n" and proc.stdout == ""


def test_a_file_in_broker_time_read_as_utc_gets_a_clock_hint(capsys, tmp_path):
    code, out, _ = run(
        capsys, "data", "export", "--broker-tz", "+2/us", "--out", str(tmp_path / "EURUSD_H1.csv")
    )
    assert code == 0
    code, out, _ = run(capsys, "data", "validate", str(tmp_path / "EURUSD_H1.csv"))
    assert code == 0 and "0 expected" in out
    assert out.splitlines()[-1].startswith("hint: with --broker-tz +2/us every gap is a market closure")
    code, out, _ = run(
        capsys, "data", "show", "--path", str(tmp_path / "EURUSD_H1.csv"), "--broker-tz", "+2/us"
    )
    assert code == 0 and "42 expected" in out and "hint:" not in out


def test_export_of_an_empty_window_writes_nothing(capsys, tmp_path):
    code, _, err = run(capsys, "data", "export", "--from", "2019-01-01", "--out", str(tmp_path / "x.csv"))
    assert code == 2 and "no bars to export from 2019-01-01" in err and err.count("\n") == 1
    assert not (tmp_path / "x.csv").exists()


def test_show_into_a_closed_pipe_exits_0_quietly():
    """`neuronet data show -n 5000 | head -1`: the reader stops early; no exit 1, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from neuronet.cli import main; main(sys.argv[1:])",
         "data", "show", "-n", "5000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert first.startswith(b"EURUSD H1") and err == ""


def test_export_out_with_a_nul_byte_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "data", "export", "--out", str(tmp_path / "a\0b.csv"))
    assert code == 2 and "must not contain NUL bytes" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
