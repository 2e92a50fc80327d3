import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from datafeeds import BrokerClock, CandleDataError, CandleStore, cache_root, meta_of, read_sample, to_rates
from datafeeds.sample import SampleSource
from datafeeds.store import read_npz, read_npz_header, write_npz


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURONET_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    assert CandleStore().root == tmp_path / "c" / "candles"
    monkeypatch.delenv("NEURONET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache_root() == tmp_path / "xdg" / "neuronet"


def test_round_trip_is_exact_including_broker_clock(tmp_path):
    df = SampleSource(spread=3, clock=BrokerClock(2, "us")).load("EURUSD", "H1")
    store = CandleStore(tmp_path)
    path = store.save("mt5", df)
    assert path == tmp_path / "mt5" / "EURUSD" / "H1.npz"
    back = store.load("mt5", "eurusd", "H1")
    pd.testing.assert_frame_equal(back, df)
    assert meta_of(back) == meta_of(df)
    assert np.array_equal(to_rates(back), to_rates(df))
    with np.load(path, allow_pickle=False) as z:  # plain arrays, no pickle needed
        assert z["rates"].dtype.names[0] == "time"
    assert store.load("mt5", "GBPUSD", "H1") is None


def test_merge_adds_new_bars_and_new_wins_on_overlap(tmp_path):
    full = read_sample()
    store = CandleStore(tmp_path)
    store.save("dukascopy", full.iloc[:3000])
    update = full.iloc[2990:4000].copy()
    update.loc[update.index[0], "tick_volume"] = 999_999  # the re-pulled bar replaces the stored one
    merged = store.merge("dukascopy", update)
    assert len(merged) == 4000 and merged.index.is_monotonic_increasing
    stored = store.load("dukascopy", "EURUSD", "H1")
    pd.testing.assert_frame_equal(stored, merged)
    assert stored["tick_volume"].iloc[2990] == 999_999
    assert stored["tick_volume"].iloc[2989] == full["tick_volume"].iloc[2989]


def test_merge_refuses_a_different_clock(tmp_path):
    store = CandleStore(tmp_path)
    store.save("mt5", read_sample())
    other = SampleSource(clock="UTC+2").load("EURUSD", "H1")
    with pytest.raises(ValueError, match="cannot merge"):
        store.merge("mt5", other)


def test_corrupt_and_missing_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CandleDataError, match=r"bad\.npz: not a readable candle store file"):
        read_npz(bad)
    text = tmp_path / "text.npz"
    text.write_text("<DATE>\t<TIME>\n")  # numpy alone would suggest loading it as a pickle
    with pytest.raises(CandleDataError, match=r"text\.npz: not a readable .* \(not an \.npz") as err:
        read_npz(text)
    assert "pickle" not in str(err.value)
    with pytest.raises(FileNotFoundError, match=r"missing\.npz"):
        read_npz(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="store folder name"):
        CandleStore(tmp_path).path("../etc", "EURUSD", "H1")


_STALLED_WRITER = """
import sys, time
from datafeeds.store import atomic_write

def stall(f):
    f.write(b"half of a new file " * 4096)
    f.flush()
    print("WRITING", flush=True)
    time.sleep(120)

atomic_write(sys.argv[1], stall)
"""


def test_writer_killed_mid_write_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "EURUSD" / "H1.npz"
    old = read_sample()
    write_npz(path, old)
    before = path.read_bytes()
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "WRITING"
        leftovers = list(path.parent.glob(".H1.npz.*.tmp"))
        assert len(leftovers) == 1 and leftovers[0].stat().st_size > 0  # the new file was half written
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert path.read_bytes() == before
    pd.testing.assert_frame_equal(read_npz(path), old)
    # The dead writer's temporary file is cleared by a later write once it is stale.
    stale = leftovers[0]
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    write_npz(path, old.iloc[:10])
    assert not stale.exists() and len(read_npz(path)) == 10


_BUSY_WRITER = """
import sys
from datafeeds import synthetic_candles
from datafeeds.store import write_npz

frames = [synthetic_candles("EURUSD", "M1", 100_000, seed=s) for s in (1, 2)]
i = 0
while True:
    write_npz(sys.argv[1], frames[i % 2])
    if i == 0:
        print("LOOPING", flush=True)
    i += 1
"""


def test_store_writes_killed_at_random_moments_always_leave_a_loadable_file(tmp_path):
    from datafeeds import synthetic_candles

    path = tmp_path / "M1.npz"
    versions = [synthetic_candles("EURUSD", "M1", 100_000, seed=s) for s in (1, 2)]
    rng = random.Random(7)
    for _ in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-c", _BUSY_WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout.readline().strip() == "LOOPING"
            time.sleep(rng.uniform(0.05, 0.4))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        back = read_npz(path)
        assert any(back.equals(v) for v in versions)


def _npz_with(path, rates_prefix: bytes, rates_body_mib: int, extra: dict | None = None):
    """A store-like ``.npz``: a deflated ``rates.npy`` of the given .npy header and zero bytes, a header."""
    import io
    import zipfile

    meta = io.BytesIO()
    np.save(meta, np.array(json.dumps({"meta": {}})))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.npy", meta.getvalue())
        with zf.open("rates.npy", "w") as f:
            f.write(rates_prefix)
            for _ in range(rates_body_mib):
                f.write(bytes(2**20))
        for name, blob in (extra or {}).items():
            zf.writestr(name, blob)
    return path


def _npy_prefix(dtype, shape) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()


def test_hostile_npz_files_are_refused_before_anything_is_inflated(tmp_path):
    import tracemalloc

    from datafeeds.candles import RATES_DTYPE

    cases = {
        # A 64 MiB entry of zeros (about 64 KB on disk) whose .npy header declares 2**36 bars.
        "lying": _npz_with(tmp_path / "lying.npz", _npy_prefix(RATES_DTYPE, (2**36,)), 64),
        # Consistent sizes, wrong dtype (objects would need a pickle; ints are not rates).
        "object": _npz_with(tmp_path / "object.npz", _npy_prefix(object, (10,)), 0),
        "ints": _npz_with(tmp_path / "ints.npz", _npy_prefix(np.int64, (2**20 // 8,)), 1),
        "extra member": _npz_with(
            tmp_path / "extra.npz", _npy_prefix(RATES_DTYPE, (0,)), 0, {"more.npy": b"x"}
        ),
    }
    deep = tmp_path / "deep.npz"
    with open(deep, "wb") as f:
        np.savez(f, rates=np.empty(0, RATES_DTYPE), meta=np.array("[" * 100_000 + "]" * 100_000))
    cases["deep header"] = deep
    tracemalloc.start()
    for path in cases.values():
        with pytest.raises(CandleDataError, match="not a readable candle store file"):
            read_npz(path)
        with pytest.raises(CandleDataError):
            read_npz_header(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * 2**20
