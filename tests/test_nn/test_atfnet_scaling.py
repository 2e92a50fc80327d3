"""ATFNet's F-block scaling option: the official code's irfft(X·F) against our exact inverse irfft(X·N)."""

import numpy as np
import pytest

from nn import ATFNet, Sequential, load, save


def _model(scaling: str, seq_len: int, pred_len: int) -> Sequential:
    layer = ATFNet(pred_len, d_model=8, n_heads=2, e_layers=1, d_ff=8, dropout=0.0, fnet_d_model=8,
                   fnet_d_ff=8, fnet_layers=1, complex_dropout=0.0, seed=3, f_scaling=scaling)  # fmt: skip
    return Sequential([layer], (seq_len, 2), backend="numpy", seed=3)


@pytest.mark.parametrize(("seq_len", "pred_len"), [(96, 24), (17, 6)])
def test_official_f_block_output_is_the_exact_one_times_f_over_n(seq_len, pred_len):
    x = np.random.default_rng(0).normal(size=(3, seq_len, 2))
    exact, official = _model("exact", seq_len, pred_len), _model("official", seq_len, pred_len)
    y_exact = exact.layers[0].children["f"].forward(exact.backend.asarray(x), False)
    y_official = official.layers[0].children["f"].forward(official.backend.asarray(x), False)
    n, f = seq_len + pred_len, (seq_len + pred_len) // 2 + 1
    np.testing.assert_allclose(y_exact, y_official * n / f, rtol=1e-12)  # 1.967 at 96/24
    assert not np.allclose(y_exact, y_official)
    # the T block is untouched
    t_exact = exact.layers[0].children["t"].forward(exact.backend.asarray(x), False)
    t_official = official.layers[0].children["t"].forward(official.backend.asarray(x), False)
    np.testing.assert_array_equal(t_exact, t_official)


def test_scaling_is_kept_in_the_model_file_and_checked(tmp_path):
    model = _model("official", 24, 8)
    x = np.random.default_rng(1).normal(size=(2, 24, 2))
    back = load(save(model, tmp_path / "m"), backend="numpy")
    assert back.layers[0].config()["f_scaling"] == "official"
    np.testing.assert_allclose(back.predict(x), model.predict(x), rtol=1e-12)
    with pytest.raises(ValueError, match="f_scaling must be one of exact, official"):
        ATFNet(8, f_scaling="paper")
