"""``neuronet deep``: train, test, sample, analyze from real files, as the book's DEEP program behaves."""

from __future__ import annotations

import gzip
import inspect
import logging
import re
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


def _idx(path, magic, dims, data, packed=False):
    raw = struct.pack(f">i{len(dims)}i", magic, *dims) + bytes(data)
    path.write_bytes(gzip.compress(raw) if packed else raw)
    return path


def _mnist(tmp_path, n=60, packed=False):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, n)
    images = (rng.uniform(size=(n, 4, 4)) < 0.3) * 255
    images[:, 0, 0] = 0  # a constant pixel: dropped, drawn gray
    end = ".gz" if packed else ""
    img = _idx(tmp_path / f"img{end}", 2051, (n, 4, 4), images.astype(np.uint8).ravel(), packed)
    lab = _idx(tmp_path / f"lab{end}", 2049, (n,), labels.astype(np.uint8), packed)
    return img, lab


def test_train_test_analyze_from_a_table(tmp_path, capsys):
    data, other = _table(tmp_path / "d.csv", 200, 1), _table(tmp_path / "t.csv", 100, 2)
    model, log = tmp_path / "m.dbn", tmp_path / "DEEP.LOG"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--inputs",
        "1-4",
        "--targets",
        "A,B",
        "--classifier",
        "--layers",
        "4",
        "--model",
        model,
        "--log",
        log,
        *FAST,
    )
    assert code == 0, err
    text = log.read_text()
    assert "Training unsupervised layer 1" in text and "Weights for final (output) layer" in text
    assert "Found 5 variables in input file" in text and "200 cases read" in text
    code, out, _ = _run(capsys, "deep", "test", model, other)
    assert code == 0 and "Total misclassification" in out
    code, out, _ = _run(
        capsys,
        "deep",
        "analyze",
        model,
        other,
        "--activations",
        tmp_path / "a.txt",
        "--log",
        tmp_path / "A.LOG",
    )
    assert (
        code == 0 and "Reconstructed" in out and "top unsupervised layer" in (tmp_path / "A.LOG").read_text()
    )
    assert len((tmp_path / "a.txt").read_text().splitlines()) == 100


def test_analyze_and_sample_need_no_target_columns(tmp_path, capsys):
    """Analysis and chains started from cases read the inputs only: a file without the targets will do."""
    data = _table(tmp_path / "d.csv", 120, 1)
    model = tmp_path / "m.dbn"
    assert (
        _run(
            capsys,
            "deep",
            "train",
            data,
            "--inputs",
            "1-4",
            "--targets",
            "E",
            "--regression",
            "--layers",
            "3",
            "--model",
            model,
            "--log",
            tmp_path / "L",
            *FAST,
        )[0]
        == 0
    )
    inputs_only = tmp_path / "x.csv"
    inputs_only.write_text("\n".join(",".join(row.split(",")[:4]) for row in data.read_text().splitlines()))
    code, _, err = _run(capsys, "deep", "analyze", model, inputs_only, "--fields", tmp_path / "f.png")
    assert code == 0, err
    code, _, err = _run(
        capsys,
        "deep",
        "sample",
        model,
        inputs_only,
        "--first-case",
        "2",
        "--rows",
        "2",
        "--cols",
        "2",
        "--chain",
        "2",
        "--out",
        tmp_path / "s.png",
        "--backend",
        "numpy",
    )
    assert code == 0, err


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzipped"])
def test_mnist_files_train_and_make_pictures(tmp_path, capsys, packed):
    img, lab = _mnist(tmp_path, packed=packed)
    model = tmp_path / "m.dbn"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        "--mnist-images",
        img,
        "--mnist-labels",
        lab,
        "--layers",
        "6",
        "--model",
        model,
        "--log",
        tmp_path / "L",
        *FAST,
    )
    assert code == 0, err
    assert "MNIST: 60 images of 4 x 4" in (tmp_path / "L").read_text()
    code, _, err = _run(
        capsys,
        "deep",
        "sample",
        model,
        "--out",
        tmp_path / "s.png",
        "--chain",
        "3",
        "--backend",
        "numpy",
        "--rows",
        "2",
        "--cols",
        "3",
    )
    assert code == 0, err
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _run(
        capsys, "deep", "analyze", model, "--mnist-images", img, "--fields", tmp_path / "f.png"
    )
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gzipped_idx_reads_exactly_as_plain(tmp_path):
    from neuronet.commands.deep_data import read_mnist

    (tmp_path / "p").mkdir()
    (tmp_path / "z").mkdir()
    plain, packed = read_mnist(*_mnist(tmp_path / "p")), read_mnist(*_mnist(tmp_path / "z", packed=True))
    np.testing.assert_array_equal(plain.x, packed.x)
    np.testing.assert_array_equal(plain.t, packed.t)
    assert plain.t.sum(axis=1).tolist() == [1.0] * 60 and packed.inputs == plain.inputs


def test_mnist_images_without_labels_are_refused_not_trained_on_zero_targets(tmp_path, capsys):
    """Training (or testing) needs the labels: no more "0.0000 percent" from all-zero targets."""
    img, _ = _mnist(tmp_path)
    for argv in (
        ["train", "--mnist-images", img, "--model", tmp_path / "m.dbn", "--log", tmp_path / "L", *FAST],
    ):
        code, _, err = _run(capsys, "deep", *argv)
        assert code == 2 and "needs --mnist-labels" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["img", "lab"]  # nothing written


def test_deep_falls_back_to_numpy_when_no_opencl_device_works(tmp_path, capsys, caplog, monkeypatch):
    """``--backend auto`` (the default) trains and samples on NumPy with a note, as ``neuronet run`` does;
    ``--backend opencl`` asked for by name is refused in one line."""
    import nn.ops_opencl

    class NoDevice:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("clGetPlatformIDs failed")  # a raw driver error

    monkeypatch.setattr(nn.ops_opencl, "OpenCLBackend", NoDevice)
    data = _table(tmp_path / "d.csv", 80, 1)
    model, log = tmp_path / "m.dbn", tmp_path / "L"
    fast = [a for a in FAST if a not in ("--backend", "numpy")]
    with caplog.at_level(logging.WARNING):
        code, _, err = _run(
            capsys,
            "deep",
            "train",
            data,
            "--targets",
            "A,B",
            "--classifier",
            "--layers",
            "3",
            "--model",
            model,
            "--log",
            log,
            *fast,
        )
    assert code == 0, err
    assert "training on the NumPy backend: no usable OpenCL device" in caplog.text
    assert "Backend: numpy" in log.read_text()
    code, _, err = _run(capsys, "deep", "sample", model, "--out", tmp_path / "s.png", "--chain", "2")
    assert code == 0, err
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A,B",
        "--classifier",
        "--model",
        tmp_path / "o.dbn",
        "--log",
        tmp_path / "O",
        *fast,
        "--backend",
        "opencl",
    )
    assert code == 2 and "OpenCL" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.dbn").exists() and not (tmp_path / "O").exists()


def _logged(text: str, label: str) -> float:
    return float(re.search(rf"{label} = ([0-9.]+)", text).group(1))


def test_log_prints_the_criterion_and_the_weight_penalty_apart(tmp_path, capsys):
    """The logged negative log likelihood is the error alone (the in-sample figure at the same weights),
    the penalty is (λ / n_weights)·Σw² of the saved head, and the two add up to the criterion minimised."""
    from nn.io import load

    data = _table(tmp_path / "d.csv", 150, 3)
    model, log = tmp_path / "m.dbn", tmp_path / "L"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A,B,C",
        "--inputs",
        "1-5",
        "--classifier",
        "--layers",
        "4",
        "--sup-penalty",
        "0.05",
        "--model",
        model,
        "--log",
        log,
        *FAST,
    )
    assert code == 0, err
    text = log.read_text()
    error = _logged(text, "supervised section is complete with negative log likelihood")
    penalty = float(re.search(r"plus weight penalty ([0-9.]+)", text).group(1))
    total = float(re.search(r"criterion minimised ([0-9.]+)", text).group(1))
    assert error == pytest.approx(
        _logged(text, r"In-sample \(training cases\) negative log likelihood"), abs=1e-6
    )
    w, b = load(model, kind="dbn").head.layers[0]
    assert penalty == pytest.approx(0.05 / (w.size + b.size) * (w**2).sum(), abs=1e-6)
    assert total == pytest.approx(error + penalty, abs=2e-6) and penalty > 0.0


def test_rbm_training_stops_by_the_book_convergence_tests_by_default(tmp_path, capsys):
    """No epoch cap short of the book's backstop: a layer trains until its increment ratio has not reached a
    new low for --max-no-improvement epochs, and the log says so with the count and the RMS gradient."""
    from neuronet.commands.deep import train
    from nn.rbm import RBMConfig

    defaults = {n: p.default for n, p in inspect.signature(train).parameters.items()}
    assert defaults["epochs"] == RBMConfig(n_hidden=1).max_epochs == 10000
    assert defaults["max_no_improvement"] == 500 and defaults["increment_criterion"] == 1e-5
    data = _table(tmp_path / "d.csv", 100, 4)
    log = tmp_path / "L"
    fast = [a for a in FAST if a not in ("--epochs", "5")]
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A",
        "--regression",
        "--layers",
        "3",
        "--max-no-improvement",
        "7",
        "--model",
        tmp_path / "m.dbn",
        "--log",
        log,
        *fast,
    )
    assert code == 0, err
    text = log.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("epoch  recon_err")) + 1
    end = next(i for i in range(at, len(lines)) if lines[i].startswith("Initial weight search"))
    rows = [line.split() for line in lines[at:end]]
    no_imp = [int(r[8]) for r in rows]
    assert no_imp[-1] == 8 and max(no_imp[:-1]) <= 7  # stopped when the count passed the limit
    assert all(float(r[6]) > 0 for r in rows)  # the RMS gradient column
    assert f"complete after {len(rows)} epochs (8 epochs without a lower increment ratio)" in text


def test_book_options_reach_the_model(tmp_path, capsys):
    """Prohibit SVD, the increment criterion, cross-entropy direct reconstruction error, and DEEP's first/last
    layer sizes with the interior interpolated."""
    from nn.io import load

    data = _table(tmp_path / "d.csv", 120, 5)
    model, log = tmp_path / "m.dbn", tmp_path / "L"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A,B",
        "--inputs",
        "1-5",
        "--classifier",
        "--unsupervised-layers",
        "3",
        "--first-unsupervised",
        "10",
        "--last-unsupervised",
        "4",
        "--supervised-layers",
        "4",
        "--first-supervised",
        "9",
        "--last-supervised",
        "3",
        "--no-svd",
        "--increment-criterion",
        "0.5",
        "--recon",
        "ce",
        "--recon-error",
        "direct",
        "--model",
        model,
        "--log",
        log,
        *FAST,
    )
    assert code == 0, err
    m = load(model, kind="dbn")
    assert [ly.w.shape[0] for ly in m.layers] == [10, 7, 4]  # 10 + (4 - 10)·1/2 = 7
    assert [w.shape[0] for w, _ in m.head.layers] == [9, 6, 3, 2]  # 9 + (3 - 9)·1/2 = 6, then the output
    assert not m.config.allow_svd and m.config.rbm.convergence_crit == 0.5
    assert m.config.rbm.recon == "ce" and m.config.rbm.direct_error
    text = log.read_text()
    assert "cross-entropy reconstruction error (direct)" in text
    assert "increment ratio" in text and "below 0.5" in text  # the secondary test stopped it


def test_training_log_holds_the_confusion_matrix(tmp_path, capsys):
    data = _table(tmp_path / "d.csv", 90, 6)
    log = tmp_path / "L"
    assert (
        _run(
            capsys,
            "deep",
            "train",
            data,
            "--targets",
            "A,B,C",
            "--classifier",
            "--layers",
            "3",
            "--model",
            tmp_path / "m.dbn",
            "--log",
            log,
            *FAST,
        )[0]
        == 0
    )
    lines = log.read_text().splitlines()
    at = lines.index(next(x for x in lines if x.startswith("Confusion matrix")))
    counts = np.array([[int(v) for v in lines[at + 2 + 3 * i].split()[1:]] for i in range(3)])
    assert counts.sum() == 90
    wrong = 100 * (90 - np.trace(counts)) / 90
    assert lines[at + 11] == f"Total misclassification = {wrong:.4f} percent"


def test_pictures_and_logs_are_written_0644(tmp_path, capsys):
    import os

    old = os.umask(0o022)
    try:
        img, lab = _mnist(tmp_path)
        model = tmp_path / "m.dbn"
        assert (
            _run(
                capsys,
                "deep",
                "train",
                "--mnist-images",
                img,
                "--mnist-labels",
                lab,
                "--layers",
                "4",
                "--model",
                model,
                "--log",
                tmp_path / "L",
                *FAST,
            )[0]
            == 0
        )
        assert (
            _run(
                capsys,
                "deep",
                "sample",
                model,
                "--out",
                tmp_path / "s.png",
                "--chain",
                "1",
                "--backend",
                "numpy",
            )[0]
            == 0
        )
        assert (
            _run(
                capsys,
                "deep",
                "analyze",
                model,
                "--mnist-images",
                img,
                "--fields",
                tmp_path / "f.png",
                "--log",
                tmp_path / "A",
            )[0]
            == 0
        )
    finally:
        os.umask(old)
    for name in ("s.png", "f.png", "L", "A", "m.dbn"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


def _pixels(path):
    import matplotlib.image

    return matplotlib.image.imread(path)[..., :3].reshape(-1, 3)


def test_receptive_fields_in_gray_or_colour(tmp_path, capsys):
    """Gray: every pixel gray; DEEP's colour display: cyan for positive weights, red for negative."""
    img, lab = _mnist(tmp_path)
    model = tmp_path / "m.dbn"
    assert (
        _run(
            capsys,
            "deep",
            "train",
            "--mnist-images",
            img,
            "--mnist-labels",
            lab,
            "--layers",
            "4",
            "--model",
            model,
            "--log",
            tmp_path / "L",
            *FAST,
        )[0]
        == 0
    )
    for cmap in ("gray", "cyan-red", "RdBu"):
        code, _, err = _run(
            capsys,
            "deep",
            "analyze",
            model,
            "--mnist-images",
            img,
            "--fields",
            tmp_path / f"{cmap}.png",
            "--cmap",
            cmap,
        )
        assert code == 0, err
    gray, colour = _pixels(tmp_path / "gray.png"), _pixels(tmp_path / "cyan-red.png")
    assert np.allclose(gray[:, 0], gray[:, 1], atol=0.02) and np.allclose(gray[:, 1], gray[:, 2], atol=0.02)
    cyan = (colour[:, 0] < 0.05) & (colour[:, 1] > 0.3) & np.isclose(colour[:, 1], colour[:, 2], atol=0.02)
    red = (colour[:, 0] > 0.3) & (colour[:, 1] < 0.05) & (colour[:, 2] < 0.05)
    assert cyan.any() and red.any()


def test_candle_features_train_and_test(tmp_path, capsys):
    model = tmp_path / "c.dbn"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        "--candles",
        "sample",
        "--depth",
        "2",
        "--max-cases",
        "300",
        "--layers",
        "6",
        "--model",
        model,
        "--log",
        tmp_path / "L",
        *FAST,
    )
    assert code == 0, err
    code, out, err = _run(capsys, "deep", "test", model, "--candles", "sample", "--max-cases", "50")
    assert code == 0, err
    assert "Total misclassification" in out


def test_kernel_log_on_opencl(tmp_path, capsys):
    pytest.importorskip("pyopencl")
    data = _table(tmp_path / "d.csv", 60, 3)
    fast = [a for a in FAST if a not in ("--backend", "numpy")]
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A,B",
        "--classifier",
        "--layers",
        "3",
        "--model",
        tmp_path / "m.dbn",
        "--log",
        tmp_path / "L",
        "--kernel-log",
        tmp_path / "K",
        *fast,
        "--backend",
        "opencl",
    )
    if code == 2 and "OpenCL" in err:
        pytest.skip(f"no OpenCL device: {err}")
    assert code == 0, err
    assert "rbm_adapt" in (tmp_path / "K").read_text()


def test_binary_splits(tmp_path, capsys):
    from nn.io import load

    data = _table(tmp_path / "d.csv", 80, 4)
    model = tmp_path / "m.dbn"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A",
        "--regression",
        "--layers",
        "3",
        "--binary-splits",
        "--model",
        model,
        "--log",
        tmp_path / "L",
        *FAST,
    )
    assert code == 0, err
    meta = load(model, kind="dbn").metadata
    assert len(meta["scaling"]["mean"]) == 4
    code, out, err = _run(capsys, "deep", "test", model, data)
    assert code == 0, err
    assert "RMS error of A" in out


def test_an_interrupted_training_keeps_its_log_and_writes_no_model(tmp_path, capsys, monkeypatch):
    """Ctrl-C in the RBM loop: exit 130, every epoch so far in the log with the reason, no model file."""
    import nn.rbm

    real = nn.rbm.epoch_schedule

    calls = []

    def ctrl_c_after_three(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(nn.rbm, "epoch_schedule", ctrl_c_after_three)
    data, model, log = _table(tmp_path / "d.csv", 60, 7), tmp_path / "m.dbn", tmp_path / "L"
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        data,
        "--targets",
        "A",
        "--layers",
        "3",
        "--model",
        model,
        "--log",
        log,
        *[a for a in FAST if a not in ("--epochs", "5")],
    )
    assert code == 130 and "Interrupted" in err
    text = log.read_text()
    assert "    3 " in text and "Training stopped (interrupted); no model written" in text
    assert not model.exists()
