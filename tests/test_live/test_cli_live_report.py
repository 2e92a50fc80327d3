"""``neuronet live report`` of a ``--live`` run, as a user runs both: real subprocesses against the simulated
terminal's RPyC server, whose clock a thread of the test moves on."""

from __future__ import annotations

import json

from test_live.test_cli_live import _live_args, clock, neuronet  # noqa: F401 - clock is a fixture

LIMITS = (
    "--live",
    "-p",
    "magic=20240101",
    "--max-lots",
    "1",
    "--max-positions",
    "2",
    "--max-daily-loss",
    "5000",
    "--allow-symbol",
    "EURUSD",
)


def test_a_live_run_then_its_report_from_the_terminal(port, clock, sim, tmp_path):  # noqa: F811
    journal = tmp_path / "live.jsonl"
    res = neuronet(*_live_args(port, journal, "--max-bars", "20", "--close-on-exit", *LIMITS), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "SmaCrossEA live on EURUSD H1" in res.stdout
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    money = sum(
        float(d.profit) + float(d.commission) + float(d.swap) for d in deals if int(d.magic) == 20240101
    )
    res = neuronet(
        "live", "report", str(journal), "-o", f"port={port}", "--out", str(tmp_path / "rep"), cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["data"]["model"] == "live account" and (tmp_path / "rep" / "report.html").exists()
    assert doc["stats"]["total_net_profit"] == round(money, 2)
    assert doc["account"]["deposit"] == 10_000.0 and doc["data"]["open_positions"] == 0
    assert doc["stats"]["total_trades"] >= 1 and money != 0


def test_a_live_report_without_the_terminal_says_so_in_one_line(port, clock, tmp_path):  # noqa: F811
    journal = tmp_path / "live.jsonl"
    res = neuronet(*_live_args(port, journal, "--max-bars", "2", *LIMITS), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = neuronet("live", "report", str(journal), "-o", "port=1", "-o", "connect_timeout=1", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "cannot reach the MetaTrader 5 bridge at 127.0.0.1:1" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
