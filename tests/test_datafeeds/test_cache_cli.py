"""``neuronet data show --no-cache/--refresh`` and ``neuronet data cache list|clear`` through the real entry
point, against the simulated terminal over a real RPyC server and real files in a temporary cache folder."""

from __future__ import annotations

import pytest

from neuronet.cli import main


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def show_mt5(capsys, mt5_server, *extra: str):
    """Thursday 1 and Friday 2 June 2023: 24 + 21 bars (the broker's week ends at 21:00 UTC in summer)."""
    host, port = mt5_server
    window = ("--from", "2023-06-01", "--to", "2023-06-03")
    return run(
        capsys, "data", "show", "EURUSD", "H1", "-s", "mt5", "-o", f"host={host}", "-o", f"port={port}",
        "--broker-tz", "+2/us", "-n", "1", *window, *extra,
    )  # fmt: skip


def test_show_fills_the_cache_and_list_clear_manage_it(capsys, mt5_server, mt5sim, cache_dir):
    code, out, err = show_mt5(capsys, mt5_server)
    assert code == 0, err
    assert "bars         45" in out
    code, out, _ = run(capsys, "data", "cache", "list")
    assert code == 0
    host, port = mt5_server
    row = next(line for line in out.splitlines() if line.startswith("mt5 "))
    assert row.split()[:5] == ["mt5", f"{host}:{port}", "EURUSD", "H1", "UTC+2-us"]
    assert "2023-06-01 00:00" in row and "2023-06-02 20:00" in row and " 45 " in row and "KiB" in row

    before = dict(mt5sim.calls)
    assert show_mt5(capsys, mt5_server)[0] == 0
    assert dict(mt5sim.calls) == before  # served from the cache
    assert show_mt5(capsys, mt5_server, "--refresh")[0] == 0
    assert dict(mt5sim.calls)["copy_rates_range"] > before["copy_rates_range"]

    code, out, _ = run(capsys, "data", "cache", "clear", "--source", "mt5")
    assert code == 0 and "removed 1 cached series" in out
    assert not list(cache_dir.rglob("*.npz"))
    code, out, _ = run(capsys, "data", "cache", "list")
    assert "the cache is empty" in out


def test_no_cache_writes_nothing(capsys, mt5_server, mt5sim, cache_dir):
    code, out, err = show_mt5(capsys, mt5_server, "--no-cache")
    assert code == 0, err
    assert "bars         45" in out
    assert not cache_dir.exists()


def test_clear_by_symbol_and_dukascopy_archive_files(capsys, mt5_server, mt5sim, cache_dir):
    assert show_mt5(capsys, mt5_server)[0] == 0
    raw = cache_dir / "dukascopy" / "EURUSD" / "2023" / "00" / "BID_candles_hour_1.bi5"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(b"x" * 100)
    code, out, _ = run(capsys, "data", "cache", "list", "--source", "dukascopy")
    assert code == 0 and "dukascopy archive files: 1, 100 B" in out and "mt5 " not in out
    code, out, _ = run(capsys, "data", "cache", "clear", "--symbol", "GBPUSD")
    assert "removed 0 cached series" in out and raw.is_file()
    code, out, _ = run(capsys, "data", "cache", "clear", "--symbol", "eurusd")
    assert "removed 1 cached series" in out and "removed 1 dukascopy archive files" in out
    assert not raw.exists() and not list(cache_dir.rglob("*.npz"))


def test_unreadable_files_are_listed_with_their_problem(capsys, cache_dir):
    bad = cache_dir / "candles" / "mt5" / "Broker-Live" / "EURUSD" / "H1@UTC.npz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a zip file")
    code, out, _ = run(capsys, "data", "cache", "list")
    assert code == 0
    assert f"mt5        unreadable: {bad}: not a readable candle store file" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("data", "show", "--refresh"), "error: candle source 'sample' has no read-through cache"),
        (("data", "show", "--no-cache", "--refresh"), "error: --no-cache and --refresh exclude each other"),
        (
            ("data", "cache", "list", "--source", "mt4"),
            "error: Invalid value for '--source' / '-s': unknown candle source 'mt4'",
        ),
    ],
)
def test_cache_flag_errors_are_one_line(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert err.startswith(message) and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("symbol", ["../../X", "/", "../..", "EUR\0USD"], ids=repr)
def test_clear_refuses_a_symbol_that_leaves_the_cache(capsys, cache_dir, tmp_path, symbol):
    victim = tmp_path / "X" / "2023" / "BID_candles_hour_1.bi5"  # ../../X seen from cache/dukascopy/
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"someone else's file")
    (cache_dir / "dukascopy").mkdir(parents=True)
    code, _, err = run(capsys, "data", "cache", "clear", "--symbol", symbol)
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert victim.is_file()


def test_clear_does_not_follow_a_symlink_out_of_the_cache(capsys, cache_dir, tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "2023").mkdir(parents=True)
    (outside / "2023" / "BID_candles_hour_1.bi5").write_bytes(b"keep me")
    (cache_dir / "dukascopy").mkdir(parents=True)
    (cache_dir / "dukascopy" / "EURUSD").symlink_to(outside, target_is_directory=True)
    code, _, err = run(capsys, "data", "cache", "clear", "--symbol", "EURUSD")
    assert code == 2 and "outside the folder" in err
    code, out, _ = run(capsys, "data", "cache", "clear")
    assert code == 0 and "dukascopy archive files" not in out
    assert (outside / "2023" / "BID_candles_hour_1.bi5").is_file()


def test_list_shows_and_clear_removes_stale_temp_files(capsys, cache_dir):
    import os
    import time

    series = cache_dir / "candles" / "mt5" / "Broker" / "EURUSD"
    series.mkdir(parents=True)
    stale, fresh = series / ".H1@UTC.npz.0a1b.tmp", series / ".H1@UTC.npz.2c3d.tmp"
    archive_tmp = cache_dir / "dukascopy" / "EURUSD" / "2023" / ".BID_candles_hour_1.bi5.4e5f.tmp"
    archive_tmp.parent.mkdir(parents=True)
    for path in (stale, fresh, archive_tmp):
        path.write_bytes(b"x" * 1000)
    for path in (stale, archive_tmp):
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    code, out, _ = run(capsys, "data", "cache", "list")
    assert code == 0 and "temporary files of interrupted writes: 3, 2.9 KiB (2 older than" in out
    code, out, _ = run(capsys, "data", "cache", "clear")
    assert code == 0 and "removed 2 temporary files" in out
    assert fresh.is_file() and not stale.exists() and not archive_tmp.exists()
