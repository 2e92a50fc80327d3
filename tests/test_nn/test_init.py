"""Initialisers: the seed's uniform range, Xavier/Glorot and He scales, reproducibility; get_backend."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.init import initial_values
from nn.layer import ParamSpec


def _draw(init: str, fan_in: int = 400, fan_out: int = 100, seed: int = 0) -> np.ndarray:
    spec = ParamSpec("w", (fan_out, fan_in), init, fan_in=fan_in, fan_out=fan_out)
    return initial_values(spec, np.random.default_rng(seed))


def test_seed_uniform_is_the_mql5_grid():
    """MQL5: (MathRand() + 1) / 32768 − 0.5, MathRand() in 0..32767: multiples of 1/32768 in (−0.5, 0.5]."""
    w = _draw("seed_uniform")
    assert w.min() > -0.5 and w.max() <= 0.5
    np.testing.assert_array_equal((w + 0.5) * 32768, np.round((w + 0.5) * 32768))
    assert abs(w.mean()) < 0.01 and abs(w.var() - 1 / 12) < 0.005


@pytest.mark.parametrize(
    ("init", "variance"),
    [
        ("xavier_uniform", 2 / 500),
        ("xavier_normal", 2 / 500),
        ("he_uniform", 2 / 400),
        ("he_normal", 2 / 400),
    ],
)
def test_variance_scaled_initialisers(init, variance):
    w = _draw(init)
    assert w.var() == pytest.approx(variance, rel=0.03)
    if init.endswith("uniform"):
        assert np.abs(w).max() <= np.sqrt(3 * variance)


def test_initialisers_are_reproducible():
    np.testing.assert_array_equal(_draw("he_normal", seed=3), _draw("he_normal", seed=3))
    assert not np.array_equal(_draw("he_normal", seed=3), _draw("he_normal", seed=4))
    assert (_draw("ones") == 1).all() and (_draw("zeros") == 0).all()


def test_fan_is_required():
    with pytest.raises(ValueError, match="fan_in"):
        initial_values(ParamSpec("w", (3, 3), "xavier_uniform"), np.random.default_rng(0))


def test_get_backend():
    be = nn.get_backend("numpy")
    assert be.name == "numpy" and be.dtype == np.float64 and isinstance(be, nn.backend.Backend)
    assert nn.get_backend(be) is be
    with pytest.raises(ValueError, match="float64 reference"):
        nn.get_backend("numpy", dtype="float32")
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        nn.get_backend("cuda")


def test_progress_bar_goes_to_stderr_only(capsys):
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,), backend="numpy")
    model.fit(np.ones((4, 2)), np.zeros((4, 2)), epochs=2, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "epoch" in err


def test_torch_uniform_is_pytorchs_linear_default():
    """nn.Linear: kaiming_uniform_(a=√5) gives the bound √(6/((1+5)·fan_in)) = 1/√fan_in; so does its bias."""
    w = _draw("torch_uniform", fan_in=400)
    assert np.abs(w).max() <= 1 / 20 and w.var() == pytest.approx(1 / (3 * 400), rel=0.03)


def test_torch_complex_bias_is_the_official_complex_linear_bias():
    """ComplexLinear applies fc_r and fc_i, each with a U(±1/√I) bias: its complex bias is
    (b_r − b_i) + i(b_r + b_i), so Re and Im are uncorrelated, each of variance 2/(3I), within ±2/√I."""
    spec = ParamSpec("b", (20000, 2), "torch_complex_bias", fan_in=16)
    b = initial_values(spec, np.random.default_rng(1))
    re, im = b[:, 0], b[:, 1]
    assert np.abs(b).max() <= 2 / 4 and re.var() == pytest.approx(2 / (3 * 16), rel=0.05)
    assert abs(np.corrcoef(re, im)[0, 1]) < 0.03
    b_re, b_im = (im + re) / 2, (im - re) / 2  # the two real biases come back within their bound
    assert np.abs(b_re).max() <= 0.25 and np.abs(b_im).max() <= 0.25


def test_complex_unit_is_the_official_complex_layernorm_weight():
    spec = ParamSpec("w", (3, 2), "complex_unit")
    np.testing.assert_array_equal(initial_values(spec, np.random.default_rng(0)), np.full((3, 2), 0.5**0.5))


def test_torch_scheme_reaches_every_atfnet_weight():
    """init="torch": every weight and bias starts as the official PyTorch module it stands for (bound
    1/√fan_in of that module's input), complex layer norms at (1+i)/√2, real layer norms at 1 and 0."""
    from nn.atfnet import ATFNet
    from nn.model import Sequential

    seq, pred, d, ff = 32, 8, 8, 12
    layer = ATFNet(pred, d, 2, 1, ff, patch_len=8, stride=4, fnet_d_model=d, fnet_d_ff=ff, fnet_layers=1,
                   init="torch")  # fmt: skip
    net = Sequential([layer], (seq, 2), "mse", "adam", "numpy", 0)
    bins, patches = (seq + pred) // 2 + 1, (seq + 4 - 8) // 4 + 1
    fan_in = {  # parameter -> the input size of the official module it stands for
        "t.0.embed.w": 8, "t.0.enc0.attn.wqkv": d, "t.0.enc0.attn.bqkv": d, "t.0.enc0.attn.wo": d,
        "t.0.enc0.attn.bo": d, "t.0.enc0.ffn.w1": d, "t.0.enc0.ffn.b1": d, "t.0.enc0.ffn.w2": ff,
        "t.0.enc0.ffn.b2": ff, "t.0.head.w": d * patches, "t.0.head.b": d * patches,
        "f.0.embed.w": bins, "f.0.enc0.attn.w_qkv": d, "f.0.enc0.attn.w_out": d, "f.0.enc0.ff1.w": d,
        "f.0.enc0.ff2.w": ff, "f.0.proj.w": d,
    }  # fmt: skip
    params = {k: np.asarray(v) for k, v in net.layers[0].params.items()}
    for name, n in fan_in.items():
        assert 0 < np.abs(params[name]).max() <= n**-0.5, name
    for name, n in {
        "f.0.embed.b": bins,
        "f.0.enc0.attn.b_qkv": d,
        "f.0.enc0.ff1.b": d,
        "f.0.proj.b": d,
    }.items():
        assert 0 < np.abs(params[name]).max() <= 2 * n**-0.5, name  # (b_r ∓ b_i): twice the real bound
    np.testing.assert_array_equal(params["f.0.enc0.norm1.w"], np.full((d, 2), 0.5**0.5))
    assert (params["t.0.enc0.norm1.gamma"] == 1).all() and (params["t.0.enc0.norm1.beta"] == 0).all()
    assert net.layers[0].config()["init"] == "torch"
    with pytest.raises(ValueError, match="init must be one of xavier, torch"):
        ATFNet(pred, init="kaiming")


def test_init_scheme_survives_the_model_file_and_a_forged_one_is_refused(tmp_path):
    """A model file keeps its layers' scheme; one naming an unknown scheme is refused in one line."""
    import json
    import zipfile

    from nn.atfnet import PatchTST
    from nn.io import ModelFileError, load, save
    from nn.model import Sequential

    net = Sequential([PatchTST(4, 8, 2, 1, 16, init="torch")], (24, 2), "mse", "adam", "numpy", 0)
    path = save(net, tmp_path / "m.nnz")
    back = load(path, backend="numpy")
    assert back.layers[0].config()["init"] == "torch"
    np.testing.assert_array_equal(back.predict(np.ones((1, 24, 2))), net.predict(np.ones((1, 24, 2))))
    with zipfile.ZipFile(path) as z:
        parts = {name: z.read(name) for name in z.namelist()}
    header_name = next(n for n in parts if n.endswith(".json"))
    header = json.loads(parts[header_name])
    text = json.dumps(header).replace('"init": "torch"', '"init": "lecun"')
    assert text != json.dumps(header)
    forged = tmp_path / "forged.nnz"
    with zipfile.ZipFile(forged, "w") as z:
        for name, data in parts.items():
            z.writestr(name, text if name == header_name else data)
    with pytest.raises(ModelFileError, match="init must be one of xavier, torch") as exc:
        load(forged, backend="numpy")
    assert str(forged) in str(exc.value)
