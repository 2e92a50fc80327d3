"""``neuronet deep`` under attack: every option's bad values, hostile files, outputs that must not be lost.

Each refusal is one line naming the option (or file), exit status 2, and nothing written.
"""

from __future__ import annotations

import gzip
import os
import shutil
import struct

import numpy as np
import pytest

from neuronet.cli import main

FAST = ["--epochs", "3", "--tries", "2", "--anneal", "2", "--sup-iter", "5", "--backend", "numpy"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A table, MNIST-like files and a model trained on the table (numpy backend)."""
    root = tmp_path_factory.mktemp("deep")
    r = np.random.default_rng(0).uniform(-1, 1, size=(80, 4))
    (root / "d.csv").write_text(
        "A,B,C,D\n" + "\n".join(",".join(f"{v:.4f}" for v in row) for row in r) + "\n"
    )
    images = (np.random.default_rng(1).uniform(size=(20, 2, 2)) < 0.5).astype(np.uint8) * 255
    (root / "img").write_bytes(struct.pack(">iiii", 2051, 20, 2, 2) + images.tobytes())
    (root / "lab").write_bytes(struct.pack(">ii", 2049, 20) + bytes(range(10)) * 2)
    try:
        main(
            [
                "deep",
                "train",
                str(root / "d.csv"),
                "--targets",
                "A,B",
                "--classifier",
                "--layers",
                "4",
                "--model",
                str(root / "m.dbn"),
                "--log",
                str(root / "L"),
                *FAST,
            ]
        )
    except SystemExit as exc:
        assert not exc.code
    return root


@pytest.fixture
def folder(trained, tmp_path):
    """A fresh folder with copies of the inputs, to see that a refused command writes nothing."""
    for name in ("d.csv", "img", "lab", "m.dbn"):
        shutil.copy(trained / name, tmp_path / name)
    return tmp_path


def _refused(capsys, folder, argv, expect):
    before = sorted(p.name for p in folder.iterdir())
    code, _, err = _run(capsys, "deep", *[str(a).replace("@", str(folder)) for a in argv])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert expect in err, err
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written


TRAIN = [
    "train",
    "@/d.csv",
    "--targets",
    "A,B",
    "--classifier",
    "--model",
    "@/new.dbn",
    "--log",
    "@/N.LOG",
    *FAST,
]


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--epochs", "0"], "--epochs 0: must be at least 1"),
        (["--layers", "0"], "--layers 0: layer sizes must be at least 1"),
        (["--layers", "x"], "--layers 'x'"),
        (["--layers", ",".join(["3"] * 101)], "--layers: 101 layers"),
        (["--head-hidden", "0"], "--head-hidden 0"),
        (["--batches", "0"], "--batches 0: must be at least 1"),
        (["--tries", "0"], "--tries 0"),
        (["--chain-start", "0"], "--chain-start 0"),
        (["--chain-end", "-1"], "--chain-end -1"),
        (["--chain-rate", "2"], "--chain-rate 2.0"),
        (["--lr", "nan"], "--lr nan: must be a finite number in (0, 1]"),
        (["--lr", "0"], "--lr 0.0"),
        (["--lr", "5"], "--lr 5.0"),
        (["--momentum-start", "-0.1"], "--momentum-start -0.1"),
        (["--momentum-end", "1.5"], "--momentum-end 1.5"),
        (["--weight-penalty", "-1"], "--weight-penalty -1.0"),
        (["--weight-penalty", "1e300"], "--weight-penalty 1e+300: must be a finite number in [0, 1]"),
        (["--sparsity-penalty", "inf"], "--sparsity-penalty inf"),
        (["--sparsity-target", "2"], "--sparsity-target 2.0"),
        (["--max-no-improvement", "-1"], "--max-no-improvement -1"),
        (["--increment-criterion", "nan"], "--increment-criterion nan"),
        (["--recon", "rms"], "--recon 'rms'"),
        (["--recon-error", "slow"], "--recon-error 'slow'"),
        (["--anneal", "-1"], "--anneal -1"),
        (["--anneal-range", "inf"], "--anneal-range inf"),
        (["--sup-iter", "-1"], "--sup-iter -1"),
        (["--sup-tol", "-1"], "--sup-tol -1.0"),
        (["--fine-iter", "-5"], "--fine-iter -5"),
        (["--fine-tol", "nan"], "--fine-tol nan"),
        (["--sup-penalty", "-1"], "--sup-penalty -1.0"),
        (["--seed", "-1"], "--seed -1"),
        (["--seed", str(2**32)], f"--seed {2**32}"),
        (["--backend", "cuda"], "--backend 'cuda'"),
        (["--max-cases", "-1"], "--max-cases -1"),
        (["--depth", "0"], "--depth 0"),
        (
            ["--unsupervised-layers", "1", "--first-unsupervised", "5", "--last-unsupervised", "6"],
            "--last-unsupervised 6: with one unsupervised hidden layer it must equal --first-unsupervised 5",
        ),
        (["--unsupervised-layers", "2"], "--unsupervised-layers 2 needs --first-unsupervised"),
        (["--unsupervised-layers", "101", "--first-unsupervised", "3"], "--unsupervised-layers 101"),
        (["--first-unsupervised", "5"], "need --unsupervised-layers"),
        (["--layers", "5", "--unsupervised-layers", "1", "--first-unsupervised", "5"], "use one"),
        (["--unsupervised-layers", "2", "--first-unsupervised", "0"], "--first-unsupervised 0"),
        (["--supervised-layers", "0"], "--supervised-layers 0: must be 1-101"),
        (
            ["--supervised-layers", "3", "--first-supervised", "4", "--last-supervised", "-2"],
            "--last-supervised -2",
        ),
        (["--layers", "100000000"], "--layers 100000000: needs about"),
        (
            ["--unsupervised-layers", "2", "--first-unsupervised", "100000000"],
            "--first-unsupervised/--last-unsupervised 100000000,100000000: needs about",
        ),
        (["--inputs", "1-9"], "--inputs 1-9: outside columns 1-4"),
        (["--targets", "Z"], "--targets 'Z'"),
        (["--model", "@"], "is a folder"),
        (["--log", "@/d.csv"], "--log"),
        (["--log", "@/new.dbn"], "the same file as --model"),
        (["--kernel-log", "@/N.LOG"], "the same file as --log"),
    ],
)
def test_bad_train_options_are_one_line_and_write_nothing(capsys, folder, extra, expect):
    argv = list(TRAIN)
    if extra[0] in ("--targets", "--model", "--log"):  # replace the option's value in TRAIN
        at = argv.index(extra[0])
        argv[at + 1] = extra[1]
    else:
        argv += extra
    _refused(capsys, folder, argv, expect)


def test_classifier_with_one_target_and_mismatched_sources(capsys, folder):
    _refused(
        capsys,
        folder,
        ["train", "@/d.csv", "--targets", "A", "--classifier", *FAST],
        "--classifier needs at least 2 targets",
    )
    _refused(
        capsys,
        folder,
        ["train", "@/d.csv", "--targets", "A", "--mnist-labels", "@/lab", *FAST],
        "--mnist-labels goes with --mnist-images",
    )
    _refused(
        capsys,
        folder,
        ["train", "--mnist-images", "@/img", "--mnist-labels", "@/lab", "--inputs", "1-3", *FAST],
        "--inputs/--targets choose the columns of a table file",
    )
    _refused(capsys, folder, ["train", "@/d.csv", "--candles", "sample", *FAST], "exactly one data source")


def test_an_existing_model_is_kept_unless_forced(capsys, folder):
    """``deep train`` replaced an existing --model silently; now it needs --force, as --out does."""
    model = folder / "m.dbn"
    before = model.read_bytes()
    _refused(
        capsys,
        folder,
        ["train", "@/d.csv", "--targets", "A,B", "--model", "@/m.dbn", "--log", "@/N", *FAST],
        "--model",
    )
    assert model.read_bytes() == before
    code, _, err = _run(
        capsys,
        "deep",
        "train",
        folder / "d.csv",
        "--targets",
        "A,B",
        "--model",
        model,
        "--log",
        folder / "N",
        "--force",
        *FAST,
    )
    assert code == 0, err
    assert model.read_bytes() != before


def test_an_input_is_never_an_output_even_with_force(capsys, folder):
    data = folder / "d.csv"
    before = data.read_bytes()
    for option in ("--model", "--log"):
        _refused(capsys, folder, [*TRAIN, option, "@/d.csv", "--force"], "is an input of this command")
    _refused(capsys, folder, ["test", "@/m.dbn", "@/d.csv", "--log", "@/m.dbn", "--force"], "is an input")
    assert data.read_bytes() == before


def test_a_log_of_ours_is_replaced_a_file_of_the_users_is_not(capsys, folder):
    code, _, err = _run(capsys, "deep", "test", folder / "m.dbn", folder / "d.csv", "--log", folder / "T")
    assert code == 0, err
    code, _, err = _run(capsys, "deep", "test", folder / "m.dbn", folder / "d.csv", "--log", folder / "T")
    assert code == 0, err  # our own log: replaced
    (folder / "notes.txt").write_text("my notes\n")
    _refused(capsys, folder, ["test", "@/m.dbn", "@/d.csv", "--log", "@/notes.txt"], "pass --force")
    assert (folder / "notes.txt").read_text() == "my notes\n"


def _special(kind, folder):
    if kind == "folder":
        (folder / "sub").mkdir()
        return folder / "sub"
    if kind == "fifo":
        os.mkfifo(folder / "fifo")
        return folder / "fifo"
    return "/dev/zero"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_data_and_model_files_must_be_regular_files(capsys, folder, kind):
    """``deep test`` on /dev/zero read 5.3 GB, and blocked forever on a FIFO: neither is opened now."""
    bad = _special(kind, folder)
    _refused(capsys, folder, ["test", bad, "@/d.csv"], "MODEL")
    _refused(capsys, folder, ["test", "@/m.dbn", bad], "data file")
    _refused(capsys, folder, ["train", bad, "--targets", "A,B", *FAST], "data file")
    _refused(
        capsys, folder, ["train", "--mnist-images", bad, "--mnist-labels", "@/lab", *FAST], "--mnist-images"
    )
    _refused(
        capsys, folder, ["train", "--mnist-images", "@/img", "--mnist-labels", bad, *FAST], "--mnist-labels"
    )
    _refused(capsys, folder, ["train", "--candles", bad, *FAST], "--candles")
    _refused(capsys, folder, ["sample", bad], "MODEL")
    _refused(capsys, folder, ["analyze", bad, "@/d.csv"], "MODEL")


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (struct.pack(">iiii", 2051, 2**31 - 1, 28, 28) + b"\0" * 100, "IDX header says"),  # lying count
        (struct.pack(">iiii", 2051, 5, 2, 2) + b"\0" * 10, "IDX header says"),  # truncated
        (struct.pack(">iiii", 2051, 5, 2, 2) + b"\0" * 30, "IDX header says"),  # trailing bytes
        (struct.pack(">iiii", 2051, 0, 2, 2), "declares sizes [0, 2, 2]"),
        (struct.pack(">iiii", 2051, 1, 100, 100) + b"\0" * 10_000, "exceed DEEP's 4086 inputs"),
        (struct.pack(">ii", 2049, 5), "not an IDX file with magic number 2051"),
        (gzip.compress(struct.pack(">iiii", 2051, 5, 2, 2) + b"\0" * 20)[:-12], "not a readable gzip file"),
        (gzip.compress(struct.pack(">iiii", 2051, 5, 2, 2) + b"\0" * 10**6), "the stream holds more"),
        (gzip.compress(struct.pack(">iiii", 2051, 2**31 - 1, 28, 28)), "needs about"),  # a bomb's promise
        (b"\x1f\x8bgarbage", "not a readable gzip file"),
    ],
    ids=[
        "lying-count",
        "truncated",
        "trailing",
        "zero-count",
        "too-many-inputs",
        "labels-as-images",
        "truncated-gzip",
        "gzip-longer-than-declared",
        "gzip-bomb-promise",
        "gzip-garbage",
    ],
)
def test_hostile_idx_files_are_refused_before_reading_what_they_declare(capsys, folder, content, expect):
    (folder / "bad").write_bytes(content)
    _refused(capsys, folder, ["train", "--mnist-images", "@/bad", "--mnist-labels", "@/lab", *FAST], expect)


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["sample", "@/m.dbn", "--rows", "0"], "--rows 0 --cols 6"),
        (["sample", "@/m.dbn", "--cols", "1000"], "--rows 4 --cols 1000"),
        (["sample", "@/m.dbn", "--chain", "-1"], "--chain -1"),
        (["sample", "@/m.dbn", "--first-case", "-1"], "--first-case -1"),
        (["sample", "@/m.dbn", "--first-case", "79", "@/d.csv"], "--first-case 79"),
        (["sample", "@/m.dbn", "--first-case", "3"], "--first-case 3 needs the data"),
        (["sample", "@/m.dbn", "@/d.csv"], "give --first-case"),
        (["sample", "@/m.dbn", "--image", "2x3"], "--image 2x3"),
        (["sample", "@/m.dbn", "--image", "-2x-2"], "--image -2x-2"),
        (["sample", "@/m.dbn", "--image", "big"], "--image 'big'"),
        (["sample", "@/m.dbn", "--out", "@/s.jpg"], "--out"),
        (["sample", "@/m.dbn", "--out", "@/d.csv"], "give a name ending in .png"),
        (["sample", "@/m.dbn", "--backend", "cuda"], "--backend 'cuda'"),
        (["sample", "@/m.dbn", "--seed", "-3"], "--seed -3"),
        (["analyze", "@/m.dbn", "@/d.csv", "--neurons", "0"], "--neurons 0"),
        (["analyze", "@/m.dbn", "@/d.csv", "--section", "middle"], "--section 'middle'"),
        (["analyze", "@/m.dbn", "@/d.csv", "--layer", "0"], "--layer 0"),
        (["analyze", "@/m.dbn", "@/d.csv", "--activations", "@/a", "--neuron", "99"], "--neuron 99"),
        (["analyze", "@/m.dbn", "@/d.csv", "--activations", "@/a", "--layer", "2"], "--layer 2"),
        (["analyze", "@/m.dbn", "@/d.csv", "--fields", "@/f.png", "--cmap", "nope"], "--cmap 'nope'"),
        (["analyze", "@/m.dbn", "@/d.csv", "--fields", "@/f.gif"], "--fields"),
        (["analyze", "@/m.dbn", "@/d.csv", "--activations", "@/m.dbn"], "is an input"),
        (["analyze", "@/m.dbn", "@/d.csv", "--fields", "@/f.png", "--log", "@/f.png"], "the same file"),
        (["test", "@/m.dbn", "--mnist-images", "@/img"], "needs --mnist-labels"),
        (["test", "@/m.dbn", "@/d.csv", "--max-cases", "-2"], "--max-cases -2"),
        (["test", "@/d.csv", "@/d.csv"], "model file"),
    ],
)
def test_bad_use_options_are_one_line_and_write_nothing(capsys, folder, argv, expect):
    _refused(capsys, folder, argv, expect)


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda meta: meta.clear(), "no input names"),
        (lambda meta: meta["scaling"]["keep"].__setitem__(0, 99), "kept inputs do not fit"),
        (lambda meta: meta["scaling"].update(low=["x", 1, 2]), "low/high values"),
        (lambda meta: meta["scaling"].update(high=meta["scaling"]["low"]), "not above"),
        (lambda meta: meta.update(targets=["A"]), "target names do not match the model's 2 outputs"),
        (lambda meta: meta.update(image_shape=[0, 0]), "image shape [0, 0]"),
        (lambda meta: meta.update(candle_depth=10**9), "candle depth"),
    ],
    ids=["foreign", "keep-out-of-range", "text-scaling", "flat-scaling", "targets", "image-shape", "depth"],
)
def test_a_model_file_with_foreign_metadata_is_refused_in_one_line(capsys, folder, edit, expect):
    """Metadata rides beside the checked arrays: a DBN saved by other code, or an edited header, is refused
    before its values index or reshape anything."""
    from nn.io import load, save

    m = load(folder / "m.dbn", kind="dbn")
    meta = m.metadata
    edit(meta)
    save(m, folder / "x.dbn", meta)
    for argv in (["test", "@/x.dbn", "@/d.csv"], ["sample", "@/x.dbn"], ["analyze", "@/x.dbn", "@/d.csv"]):
        _refused(capsys, folder, argv, expect)


@pytest.mark.parametrize(
    ("header", "expect"),
    [("A,B,A,D", "variable name 'A' appears twice"), ("A,B,C,D.1", "variable name 'D.1'")],
)
def test_table_headers_are_checked_as_written(capsys, folder, header, expect):
    lines = (folder / "d.csv").read_text().splitlines()
    (folder / "d.csv").write_text("\n".join([header, *lines[1:]]) + "\n")
    _refused(capsys, folder, ["train", "@/d.csv", "--targets", "B", *FAST], expect)
