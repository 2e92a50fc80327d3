"""The forecasting protocols: the official ATFNet scripts' loaders, schedule and initialisation, and the
neuronet protocol that scores every window; figures checked against the protocol written out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nn import SGD, Dense, Sequential
from nn.callbacks import EpochRecord
from strategies.forecasting import PRESETS, PROTOCOLS, Preset, ShuffledValidation, run_protocol

TINY = Preset(d_model=4, n_heads=2, layers=1, d_ff=8, dropout=0.0, lr=1e-3, batch_size=16)
SIZES = dict(fnet_d_model=4, fnet_d_ff=8, fnet_layers=1)


@pytest.fixture
def csv_path(tmp_path):
    n = 400
    t = np.arange(n)
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"date": pd.date_range("2021-01-01", periods=n, freq="h").astype(str),
                          "A": np.sin(2 * np.pi * t / 24) + 0.1 * rng.normal(size=n),
                          "OT": np.cumsum(rng.normal(size=n)) * 0.1})  # fmt: skip
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    return path


def _naive_by_hand(path, seq_len, pred_len, windows):
    """70/10/20 rows, train-only scaling, last-value forecast; MSE over the first ``windows`` test windows
    (all channels), written out independently of the library."""
    values = pd.read_csv(path)[["A", "OT"]].to_numpy()
    n = len(values)
    n_train, n_test = int(n * 0.7), int(n * 0.2)
    z = (values - values[:n_train].mean(axis=0)) / values[:n_train].std(axis=0)
    starts = range(n - n_test - seq_len, n - seq_len - pred_len + 1)
    errs = [(z[s + seq_len : s + seq_len + pred_len] - z[s + seq_len - 1]) ** 2 for s in starts]
    return float(np.mean(errs[:windows])), len(errs)


def test_official_protocol_scores_the_first_full_test_batches_like_the_official_loader(csv_path):
    """The official test DataLoader (shuffle=False, drop_last=True) scores the first ⌊M/B⌋·B windows in
    time order: 73 test windows in batches of 16 -> the first 64. The figures on all 73 come alongside."""
    doc, _ = run_protocol(csv_path, "OT", seq_len=24, pred_len=8, preset=TINY, epochs=1, backend="numpy",
                          sizes=SIZES, protocol="official")  # fmt: skip
    naive_64, m = _naive_by_hand(csv_path, 24, 8, 64)
    naive_all, _ = _naive_by_hand(csv_path, 24, 8, m)
    assert m == 73 and doc["windows"]["test"] == 73 and doc["windows"]["test_scored"] == 64
    assert doc["mse"]["naive"] == pytest.approx(naive_64, rel=1e-12)
    assert doc["all_windows"]["mse"]["naive"] == pytest.approx(naive_all, rel=1e-12)
    assert naive_64 != pytest.approx(naive_all, rel=1e-6)
    assert set(doc["all_windows"]["mse"]) == {"atfnet", "naive", "linear"}


def test_official_protocol_trains_as_the_official_scripts(csv_path):
    """PyTorch's initialisation, the official F block scaling, full training batches only, and type1's
    rate: epochs 1 and 2 at lr, then halved every epoch."""

    class Batches:
        def __init__(self):
            self.sizes: list[int] = []

        def on_batch_end(self, epoch, batch, size):
            self.sizes.append(size)

    batches = Batches()
    doc, _ = run_protocol(csv_path, "OT", seq_len=24, pred_len=8, preset=TINY, epochs=3, patience=5,
                          backend="numpy", sizes=SIZES, protocol="official", callbacks=[batches])  # fmt: skip
    assert doc["layer"]["init"] == "torch" and doc["layer"]["f_scaling"] == "official"
    assert [e["lr"] for e in doc["epochs"]] == [1e-3, 1e-3, 5e-4]
    train = doc["windows"]["train"]  # 280 rows -> 249 windows -> 15 full batches of 16 per epoch
    assert train == 249 and batches.sizes == [16] * (3 * (train // 16))
    assert doc["protocol"] == {**PROTOCOLS["official"].__dict__}


def test_neuronet_protocol_trains_validates_and_scores_every_window(csv_path):
    doc, _ = run_protocol(csv_path, "OT", seq_len=24, pred_len=8, preset=TINY, epochs=2, backend="numpy",
                          sizes=SIZES)  # fmt: skip
    naive_all, m = _naive_by_hand(csv_path, 24, 8, 10**6)
    assert doc["protocol"]["name"] == "neuronet" and doc["windows"]["test_scored"] == m == 73
    assert doc["mse"]["naive"] == pytest.approx(naive_all, rel=1e-12) and "all_windows" not in doc
    assert [e["lr"] for e in doc["epochs"]] == [1e-3, 1e-3]  # the official recipe otherwise
    assert doc["layer"]["init"] == "torch" and doc["layer"]["f_scaling"] == "official"


def test_python_and_the_command_line_share_the_preset_defaults(csv_path):
    """No preset given: the protocol's (official: the paper's size), else the device's, as on the command
    line (NumPy is not a GPU: cpu)."""
    doc, _ = run_protocol(csv_path, "OT", seq_len=24, pred_len=8, epochs=1, backend="numpy", sizes=SIZES)
    assert doc["preset"] == PRESETS["cpu"].__dict__


def test_protocol_and_split_are_checked(csv_path):
    with pytest.raises(ValueError, match="--protocol must be one of neuronet, official, got 'paper'"):
        run_protocol(csv_path, "OT", seq_len=24, pred_len=8, preset=TINY, backend="numpy", protocol="paper")
    with pytest.raises(ValueError, match="--f-scaling must be one of exact, official"):
        run_protocol(csv_path, "OT", seq_len=24, pred_len=8, preset=TINY, backend="numpy", f_scaling="x")


def test_shuffled_validation_scores_a_fresh_full_batch_subset_each_epoch():
    """The official validation loader shuffles and drops the last partial batch: 23 windows in batches
    of 8 -> a random 16 each epoch, drawn from the seed and the epoch; the loss is their mean."""
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(23, 3)), rng.normal(size=(23, 1))
    net = Sequential([Dense(1)], input_shape=(3,), optimizer=SGD(lr=0.0), backend="numpy")
    check = ShuffledValidation(net, x, y, batch_size=8, seed=4)
    losses = []
    for epoch in range(2):
        record = EpochRecord(epoch=epoch, loss=0.0, wall_s=0.0, lr=0.0)
        check.on_epoch_end(record)
        keep = np.random.default_rng([4, 1, epoch]).permutation(23)[:16]
        assert record.val_loss == pytest.approx(net.evaluate(x[keep], y[keep])["loss"], rel=1e-12)
        losses.append(record.val_loss)
    assert losses[0] != losses[1]
    small = ShuffledValidation(net, x[:5], y[:5], batch_size=8, seed=4)  # fewer than a batch: all of them
    record = EpochRecord(epoch=0, loss=0.0, wall_s=0.0, lr=0.0)
    small.on_epoch_end(record)
    assert record.val_loss == pytest.approx(net.evaluate(x[:5], y[:5])["loss"], rel=1e-12)
