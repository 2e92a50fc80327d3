"""``neuronet deep``: train, test, sample, analyze from real files; bad input is one line, exit status 2."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from neuronet.cli import main

FAST = ["--epochs", "5", "--tries", "3", "--anneal", "3", "--sup-iter", "20", "--backend", "numpy"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def _table(path, n, seed):
    r = np.random.default_rng(seed).uniform(-1, 1, size=(n, 5))
    lines = ["A,B,C,D,E", *(",".join(f"{v:.4f}" for v in row) for row in r)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_test_analyze_from_a_table(tmp_path, capsys):
    data, other = _table(tmp_path / "d.csv", 200, 1), _table(tmp_path / "t.csv", 100, 2)
    model, log = tmp_path / "m.dbn", tmp_path / "DEEP.LOG"
    code, _, err = _run(capsys, "deep", "train", data, "--inputs", "1-4", "--targets", "A,B", "--classifier",
                        "--layers", "4", "--model", model, "--log", log, *FAST)
    assert code == 0, err
    text = log.read_text()
    assert "Training unsupervised layer 1" in text and "Weights for final (output) layer" in text
    code, out, _ = _run(capsys, "deep", "test", model, other)
    assert code == 0 and "Total misclassification" in out
    code, out, _ = _run(capsys, "deep", "analyze", model, other, "--activations", tmp_path / "a.txt", "--log",
                        tmp_path / "A.LOG")
    assert code == 0 and "Reconstructed" in out and "Top unsupervised" in (tmp_path / "A.LOG").read_text()
    assert len((tmp_path / "a.txt").read_text().splitlines()) == 100


def _idx(path, magic, dims, data):
    path.write_bytes(struct.pack(f">i{len(dims)}i", magic, *dims) + bytes(data))
    return path


def test_mnist_files_train_and_make_pictures(tmp_path, capsys):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 60)
    images = (rng.uniform(size=(60, 4, 4)) < 0.3) * 255
    images[:, 0, 0] = 0  # a constant pixel: dropped, drawn gray
    img = _idx(tmp_path / "img", 2051, (60, 4, 4), images.astype(np.uint8).ravel())
    lab = _idx(tmp_path / "lab", 2049, (60,), labels.astype(np.uint8))
    model = tmp_path / "m.dbn"
    code, _, err = _run(capsys, "deep", "train", "--mnist-images", img, "--mnist-labels", lab, "--layers",
                        "6", "--model", model, "--log", tmp_path / "L", *FAST)
    assert code == 0, err
    code, _, err = _run(capsys, "deep", "sample", model, "--out", tmp_path / "s.png", "--chain", "3",
                        "--backend", "numpy", "--rows", "2", "--cols", "3")
    assert code == 0, err
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _run(capsys, "deep", "analyze", model, "--mnist-images", img, "--mnist-labels", lab,
                        "--fields", tmp_path / "f.png")
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("content", "args", "match"),
    [("A,B\n1,x\n", ["--targets", "B"], "line 2, variable 'B'"),
     ("A,B\n1,2\n", [], "--targets"),
     ("1A,B\n1,2\n", ["--targets", "B"], "variable name '1A'"),
     ("A,B\n1,2\n", ["--targets", "Z"], "target 'Z'"),
     ("A,B\n1,2\n3,4\n", ["--targets", "B", "--layers", "x"], "--layers")],
)
def test_bad_tables_are_one_line(tmp_path, capsys, content, args, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    code, _, err = _run(capsys, "deep", "train", path, *args, "--model", tmp_path / "m", "--log",
                        tmp_path / "L", *FAST)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def test_bad_idx_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "img"
    bad.write_bytes(struct.pack(">iiii", 2051, 5, 4, 4) + b"\0" * 10)
    code, _, err = _run(capsys, "deep", "train", "--mnist-images", bad, *FAST)
    assert code == 2 and "IDX header" in err
    code, _, err = _run(capsys, "deep", "test", tmp_path / "none.dbn", tmp_path / "x.csv")
    assert code == 2 and "none.dbn" in err


def test_candle_features_train_and_test(tmp_path, capsys):
    model = tmp_path / "c.dbn"
    code, _, err = _run(capsys, "deep", "train", "--candles", "sample", "--depth", "2", "--max-cases", "300",
                        "--layers", "6", "--model", model, "--log", tmp_path / "L", *FAST)
    assert code == 0, err
    code, out, err = _run(capsys, "deep", "test", model, "--candles", "sample", "--max-cases", "50")
    assert code == 0, err
    assert "Total misclassification" in out


def test_kernel_log_on_opencl(tmp_path, capsys):
    pytest.importorskip("pyopencl")
    data = _table(tmp_path / "d.csv", 60, 3)
    fast = [a for a in FAST if a not in ("--backend", "numpy")]
    code, _, err = _run(capsys, "deep", "train", data, "--targets", "A,B", "--classifier", "--layers", "3",
                        "--model", tmp_path / "m.dbn", "--log", tmp_path / "L", "--kernel-log",
                        tmp_path / "K", *fast)
    if code == 2 and "OpenCL" in err:
        pytest.skip(f"no OpenCL device: {err}")
    assert code == 0, err
    assert "rbm_adapt" in (tmp_path / "K").read_text()


def test_binary_splits(tmp_path, capsys):
    from nn.io import load

    data = _table(tmp_path / "d.csv", 80, 4)
    model = tmp_path / "m.dbn"
    code, _, err = _run(capsys, "deep", "train", data, "--targets", "A", "--regression", "--layers", "3",
                        "--binary-splits", "--model", model, "--log", tmp_path / "L", *FAST)
    assert code == 0, err
    meta = load(model, kind="dbn").metadata
    assert len(meta["scaling"]["mean"]) == 4
    code, out, err = _run(capsys, "deep", "test", model, data)
    assert code == 0, err
    assert "RMS error of A" in out
