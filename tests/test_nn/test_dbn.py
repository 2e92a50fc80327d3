"""DBN pieces: CG on the book's quadratic, SVD output weights, head gradients, stacking, files."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

import nn
from nn.cg import anneal, conjugate_gradient, line_minimum, svd_weights
from nn.dbn import DBNConfig, train_dbn
from nn.io import ModelFileError, load, save
from nn.mlfn import Net, criterion
from nn.rbm import RBMConfig


def _quadratic(p):
    x, y = p
    return x * x + y * y - 1.5 * x * y, np.array([2 * x - 1.5 * y, 2 * y - 1.5 * x])


def test_cg_book_example_two_line_searches():
    res = conjugate_gradient(_quadratic, np.array([6.0, 4.0]), max_iter=10, tol=1e-12)
    # the minimum (0, 0), f = 0, after the second line search (later ones only polish rounding)
    assert abs(_quadratic(res.points[1])[0]) < 1e-11 and abs(_quadratic(res.points[0])[0]) > 1.0
    # The book steps along the gradient (6, -1), t* = -0.4022; CG here steps along -gradient: t* = +0.4022.
    assert res.steps[0] == pytest.approx(0.4022, abs=1e-4)
    np.testing.assert_allclose(res.points[0], [3.587, 4.402], atol=1e-3)
    np.testing.assert_allclose(res.points[1], [0.0, 0.0], atol=1e-6)
    # the second direction is conjugate: 13.5x - 11y = 0 through the first point (the book misprints +11y)
    d = res.points[1] - res.points[0]
    assert 13.5 * d[0] - 11.0 * d[1] == pytest.approx(0.0, abs=1e-5 * np.linalg.norm(d))


def test_line_minimum_on_a_parabola():
    t, f = line_minimum(lambda s: (s - 3.0) ** 2 + 1.0, 10.0, 0.1)
    assert t == pytest.approx(3.0, abs=1e-6) and f == pytest.approx(1.0)


def test_svd_weights_equal_lstsq(rng):
    a, t = rng.normal(size=(60, 5)), rng.normal(size=(60, 3))
    want = np.linalg.lstsq(np.hstack([a, np.ones((60, 1))]), t, rcond=None)[0].T
    np.testing.assert_allclose(svd_weights(a, t), want, atol=1e-12)
    collinear = np.hstack([a, a[:, :1]])  # an exactly repeated column: the truncated solution is minimum-norm
    got = svd_weights(collinear, t)
    want = np.linalg.lstsq(np.hstack([collinear, np.ones((60, 1))]), t, rcond=1e-2)[0].T
    np.testing.assert_allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("classifier", [True, False])
def test_head_gradient_by_finite_differences(rng, classifier, finite_difference):
    net = Net(
        [(rng.normal(size=(4, 3)), rng.normal(size=4)), (rng.normal(size=(3, 4)), rng.normal(size=3))],
        classifier,
    )
    x, t = rng.uniform(size=(7, 3)), np.eye(3)[rng.integers(0, 3, 7)]
    theta = net.flat()
    _, g = criterion(net, x, t, 0.3)

    def f():
        net.set_flat(theta)
        return criterion(net, x, t, 0.3, grad=False)

    np.testing.assert_allclose(g, finite_difference(f, theta), rtol=1e-6, atol=1e-8)


def test_penalty_excludes_biases():
    net = Net([(np.zeros((2, 2)), np.full(2, 5.0))], False)
    x, t = np.zeros((3, 2)), np.zeros((3, 2))
    e, g = criterion(net, x, t, 1.0)
    assert e == pytest.approx(25.0 * 2 * 3 / 6)  # only the bias error, no penalty on the 5.0 biases
    assert g[-2:] == pytest.approx([5.0, 5.0])  # Σ 2(o − t)/(N·K) = 3·10/6, no 2λ/n·b term


def test_anneal_returns_the_best_try():
    seen = []

    def f(w):
        seen.append(float(((w - 0.3) ** 2).sum()))
        return seen[-1]

    best = anneal(f, 2, 150, 1.0, np.random.default_rng(0))
    assert float(((best - 0.3) ** 2).sum()) == pytest.approx(min(seen))


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    proto = rng.uniform(size=(3, 12)) < 0.5
    labels = rng.integers(0, 3, n)
    x = np.where(rng.uniform(size=(n, 12)) < 0.1, ~proto[labels], proto[labels]).astype(float)
    return x, np.eye(3)[labels], labels


SMALL = DBNConfig(
    hidden=(8, 6),
    rbm=RBMConfig(n_hidden=1, n_rand=5, n_batches=6, max_epochs=30),
    anneal_iters=10,
    sup_max_iter=60,
)


def test_stack_sorted_trains_and_round_trips(tmp_path):
    x, t, labels = _data()
    m = train_dbn(x, t, SMALL, nn.get_backend("numpy"))
    for layer in m.layers:
        s = np.abs(layer.w).sum(axis=1)
        assert np.all(np.diff(s) <= 0)
        assert layer.q_mean.shape == layer.c.shape
    assert (m.predict(x).argmax(1) == labels).mean() > 0.9
    path = save(m, tmp_path / "m.dbn", {"inputs": ["a"] * 12})
    back = load(path, kind="dbn")
    np.testing.assert_array_equal(back.predict(x), m.predict(x))
    assert back.metadata == {"inputs": ["a"] * 12} and back.config == m.config and back.log == m.log
    for got, want in zip(back.layers, m.layers, strict=True):
        assert got.history == want.history and got.initial_error == want.initial_error
        np.testing.assert_array_equal(got.q_mean, want.q_mean)
    gen = back.generate(nn.get_backend("numpy"), 5, start=x[:4], seed=2)
    np.testing.assert_array_equal(gen, m.generate(nn.get_backend("numpy"), 5, start=x[:4], seed=2))
    assert gen.shape == (4, 12) and ((gen >= 0) & (gen <= 1)).all()
    assert back.generate(nn.get_backend("numpy"), 3, count=2).shape == (2, 12)


def test_fine_tune_lowers_the_criterion():
    x, t, _ = _data(seed=1)
    m = train_dbn(
        x, t, DBNConfig(**{**SMALL.__dict__, "fine_tune": True, "fine_max_iter": 40}), nn.get_backend("numpy")
    )
    assert m.fine_tuned and m.log["fine_tune"] <= m.log["supervised"]


def _saved_small(tmp_path):
    x, t, _ = _data(60)
    cfg = DBNConfig(
        hidden=(4,),
        rbm=RBMConfig(n_hidden=1, n_rand=2, n_batches=2, max_epochs=2),
        anneal_iters=2,
        sup_max_iter=2,
    )
    return save(train_dbn(x, t, cfg, nn.get_backend("numpy")), tmp_path / "m.dbn")


def _rewrite(path, out, edit_header=None, edit_members=None):
    """A copy of a model file with its header and/or members edited, checksums recomputed to match, so
    only the edit itself can make loading fail."""
    import hashlib
    import io
    import json

    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    header = json.loads(members.pop("header.json"))
    if edit_members:
        edit_members(members)
    for name, data in members.items():
        shape = np.load(io.BytesIO(data), allow_pickle=False).shape
        header["arrays"][name] = {
            "sha256": hashlib.sha256(data).hexdigest(),
            "shape": list(shape),
            "dtype": header["arrays"]["layer0_w.npy"]["dtype"],
        }
    header["arrays"] = {k: v for k, v in header["arrays"].items() if k in members}
    payload = hashlib.sha256()
    for name in sorted(members):
        payload.update(members[name])
    header["payload_sha256"] = payload.hexdigest()
    if edit_header:
        edit_header(header)
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("header.json", json.dumps(header))
        for n, d in members.items():
            zf.writestr(n, d)
    return out


def _npy(a):
    import io

    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def test_damaged_file_is_one_clear_error(tmp_path):
    path = _saved_small(tmp_path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["layer0_w.npy"] = members["layer0_w.npy"][:-8] + b"\0" * 8
    bad = tmp_path / "bad.dbn"
    with zipfile.ZipFile(bad, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    with pytest.raises(ModelFileError, match=r"layer0_w\.npy"):
        load(bad)
    (tmp_path / "junk.dbn").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match=r"junk\.dbn"):
        load(tmp_path / "junk.dbn")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated
    with pytest.raises(ModelFileError, match=r"m\.dbn"):
        load(path)


def test_dbn_file_is_the_model_format_with_its_kind(tmp_path):
    """One container: a DBN file is a neuronet-model file of kind "dbn"; asking for another kind, or a
    Sequential file asked for as a DBN, is refused by name."""
    import json

    path = _saved_small(tmp_path)
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
    assert header["format"] == "neuronet-model" and header["kind"] == "dbn"
    assert header["arrays"]["layer0_w.npy"]["shape"] == [4, 12]
    with pytest.raises(ModelFileError, match="not a 'sequential'"):
        load(path, kind="sequential")
    seq = nn.Sequential.from_specs([{"type": "dense", "units": 2}], input_shape=(3,), backend="numpy")
    with pytest.raises(ModelFileError, match="not a 'dbn'"):
        load(save(seq, tmp_path / "s.nnz"), kind="dbn")
    with pytest.raises(TypeError, match="not a model kind"):
        save(object(), tmp_path / "o.nnz", {})


@pytest.mark.parametrize(
    ("edit_header", "edit_members", "match"),
    [
        (None, lambda m: m.pop("head0_b.npy"), "missing or unexpected"),
        (None, lambda m: m.update({"extra.npy": _npy(np.zeros(2))}), "missing or unexpected"),
        (None, lambda m: m.update({"layer0_c.npy": _npy(np.zeros(5))}), r"layer0_c has shape \(5,\)"),
        (None, lambda m: m.update({"head0_w.npy": _npy(np.full((3, 4), np.nan))}), "not finite"),
        (lambda h: h["architecture"].update({"hidden": [5]}), None, "layer0_w has shape"),
        (lambda h: h["architecture"].update({"n_inputs": 10**12}), None, "layer0_w has shape"),
        (lambda h: h["architecture"]["config"].update({"bogus": 1}), None, "bogus"),
        (lambda h: h["architecture"].pop("head"), None, "head"),
        (lambda h: h.update({"kind": "martian"}), None, "model kind 'martian'"),
        (lambda h: h["training"].update({"history": [[{"epoch": "x", "nope": 1}]]}), None, "nope"),
    ],
)
def test_hostile_dbn_files_are_refused_by_name(tmp_path, edit_header, edit_members, match):
    bad = _rewrite(_saved_small(tmp_path), tmp_path / "bad.dbn", edit_header, edit_members)
    with pytest.raises(ModelFileError, match=match):
        load(bad)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"hidden": (0,)}, "hidden"),
        ({"sup_tol": -1.0}, "sup_tol"),
        ({"hidden": (3,) * 101}, "at most 100"),
        ({"anneal_iters": -1}, "anneal"),
        ({"weight_penalty": float("nan")}, "weight_penalty"),
        ({"allow_svd": 1}, "allow_svd"),
        ({"seed": -2}, "seed"),
    ],
)
def test_bad_config(kw, match):
    from nn.rbm_config import DBNConfigError

    with pytest.raises(DBNConfigError, match=match) as caught:
        DBNConfig(**kw)
    assert caught.value.owner == "DBN" and caught.value.field == next(iter(kw))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (RBMConfig, "n_rand"), (RBMConfig, "n_batches"), (RBMConfig, "chain_end"), (RBMConfig, "max_epochs"),
        (RBMConfig, "max_no_improvement"), (DBNConfig, "anneal_iters"), (DBNConfig, "sup_max_iter"),
        (DBNConfig, "fine_max_iter"),
    ],
)  # fmt: skip
def test_a_count_beyond_32_bits_is_refused_not_run_for_ever(config, field):
    """``--tries 1e20`` was accepted and ran its random tries for ever; the largest count is 2**31 - 1."""
    from nn.rbm_config import DBNConfigError

    kw = {"n_hidden": 1} if config is RBMConfig else {}
    config(**kw, **{field: 2**31 - 1})
    with pytest.raises(DBNConfigError, match=f"{field} = 2147483648: must be below 2147483648"):
        config(**kw, **{field: 2**31})


def test_interpolated_layer_sizes():
    """DEEP's architecture dialog: first and last given, interior sizes on the line between, rounded."""
    from nn.dbn_config import interpolated_sizes

    assert interpolated_sizes(4, 100, 10) == (100, 70, 40, 10)
    assert interpolated_sizes(5, 10, 1) == (10, 8, 6, 3, 1)  # 7.75, 5.5, 3.25 rounded to nearest
    assert interpolated_sizes(1, 7, 7) == (7,) and interpolated_sizes(0, 7, 7) == ()
    assert interpolated_sizes(3, 5, 9) == (5, 7, 9)


def test_a_net_that_cannot_fit_is_refused_before_allocating():
    """``--layers 100000000`` was a raw MemoryError minutes in: the estimate refuses it at once."""
    from nn.dbn_config import check_memory, working_sets
    from nn.rbm_config import DBNConfigError

    big = DBNConfig(hidden=(100_000_000,))
    # 8 bytes x (2000·(6 + 2e8) + 10·1e8·6 + 8·84·(6 + 1e8)) = 3.79e12 bytes = 3.44 TiB
    with pytest.raises(DBNConfigError, match=r"hidden = \(100000000,\): needs about 3.44 TiB for 2000 cases"):
        check_memory(2000, 6, 3, big)
    with pytest.raises(DBNConfigError, match="needs about"):
        train_dbn(np.zeros((2000, 6)), np.eye(3)[np.zeros(2000, dtype=int)], big, nn.get_backend("numpy"))
    check_memory(60_000, 784, 10, DBNConfig(hidden=(500, 500, 2000), fine_tune=True))  # MNIST-sized fits
    sets = working_sets(2000, 6, 3, DBNConfig(hidden=(5,)))
    assert sets["hidden"] == 2000 * (6 + 10) + 10 * 5 * 6 + 8 * 84 * (6 + 5)  # batches of 84 = ceil(2000/24)


def test_log_records_the_error_and_the_penalty_apart():
    from nn.mlfn import raw_error

    x, t, _ = _data(seed=4)
    cfg = DBNConfig(**{**SMALL.__dict__, "fine_tune": True, "fine_max_iter": 20, "weight_penalty": 0.05})
    m = train_dbn(x, t, cfg, nn.get_backend("numpy"))
    for phase in ("supervised", "fine_tune"):
        assert m.log[phase] == pytest.approx(m.log[f"{phase}_error"] + m.log[f"{phase}_penalty"], rel=1e-9)
        assert m.log[f"{phase}_penalty"] > 0.0
    assert m.log["fine_tune_error"] == pytest.approx(raw_error(m.predict(x), t, True), rel=1e-12)
    full = [*[(ly.w, ly.c) for ly in m.layers], *m.head.layers]
    n_weights = sum(w.size + b.size for w, b in full)
    assert m.log["fine_tune_penalty"] == pytest.approx(0.05 / n_weights * sum((w**2).sum() for w, _ in full))


def test_stop_reasons_round_trip_and_older_files_load(tmp_path):
    x, t, _ = _data(60)
    cfg = DBNConfig(
        hidden=(4, 3),
        rbm=RBMConfig(n_hidden=1, n_rand=2, n_batches=2, max_epochs=2),
        anneal_iters=2,
        sup_max_iter=2,
    )
    path = save(train_dbn(x, t, cfg, nn.get_backend("numpy")), tmp_path / "m.dbn")
    assert [ly.stop_reason for ly in load(path).layers] == ["max_epochs (2) reached"] * 2
    old = _rewrite(path, tmp_path / "old.dbn", lambda h: h["training"].pop("stop_reason"))
    assert [ly.stop_reason for ly in load(old).layers] == ["", ""]


def test_classifier_needs_two_targets():
    with pytest.raises(ValueError, match="2 target"):
        train_dbn(np.zeros((4, 2)), np.zeros((4, 1)), SMALL, nn.get_backend("numpy"))


def test_sequential_holds_the_same_net_and_fine_tunes():
    from nn.dbn_finetune import fine_tune_sequential, to_sequential

    x, t, labels = _data(seed=3)
    m = train_dbn(x, t, SMALL, nn.get_backend("numpy"))
    np.testing.assert_allclose(to_sequential(m).predict(x), m.predict(x), atol=1e-12)
    before = (m.predict(x).argmax(1) == labels).mean()
    fine_tune_sequential(m, x, t, epochs=5)
    assert m.fine_tuned and (m.predict(x).argmax(1) == labels).mean() >= before - 0.02


def test_a_diverged_layer_is_an_error_not_a_model(monkeypatch):
    """Non-finite biases (the error and the ratio can stay finite) end training with a user error naming the
    layer; a model holding them is never returned (it could not be saved either)."""
    import nn.rbm_ops_numpy as ops
    from nn.rbm import TrainingDivergedError

    real = ops.RBMNumpyOps.rbm_update

    def poisoned(self, state, *args, **kwargs):
        real(self, state, *args, **kwargs)
        state.c[:] = np.inf

    monkeypatch.setattr(ops.RBMNumpyOps, "rbm_update", poisoned)
    x, t, _ = _data(60)
    with pytest.raises(TrainingDivergedError, match="unsupervised layer 1 diverged by epoch 30"):
        train_dbn(x, t, SMALL, nn.get_backend("numpy"))
