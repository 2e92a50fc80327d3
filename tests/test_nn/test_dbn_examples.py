"""The book's synthetic example in spirit, and a 2-layer DBN on scikit-learn's 8x8 digits.

Every accuracy here is measured on cases the model never saw.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.dbn import DBNConfig, train_dbn
from nn.rbm import RBMConfig

sklearn = pytest.importorskip("sklearn")


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x, y = d.data / 16.0, d.target
    perm = np.random.default_rng(0).permutation(len(x))
    return x, y, perm[:1200], perm[1200:]


def test_two_layer_dbn_softmax_on_digits():
    """Measured: 93.0 % on the 597 held-out digits (numpy and OpenCL alike); asserted: at least 90 %."""
    x, y, tr, te = _digits()
    cfg = DBNConfig(
        hidden=(64, 32),
        rbm=RBMConfig(n_hidden=1, n_rand=10, n_batches=6, max_epochs=30),
        anneal_iters=10,
        sup_max_iter=100,
    )
    m = train_dbn(x[tr], np.eye(10)[y[tr]], cfg, nn.get_backend("numpy"))
    assert (m.predict(x[te]).argmax(1) == y[te]).mean() >= 0.90


@pytest.mark.slow
def test_generated_digits_are_recognised():
    """Chains started from held-out digits; a logistic regression trained on real digits judges the samples.

    After one Gibbs step most samples are still their starting digit (measured 74 %, chance 10 %); after 20
    steps the classifier is more confident on the samples than on the same samples with their pixels
    shuffled (measured 0.65 vs 0.55: digit structure, not just ink)."""
    from sklearn.linear_model import LogisticRegression

    x, y, tr, te = _digits()
    cfg = DBNConfig(
        hidden=(64,),
        rbm=RBMConfig(n_hidden=1, n_rand=10, n_batches=2, max_epochs=200),
        anneal_iters=10,
        sup_max_iter=100,
    )
    be = nn.get_backend("numpy")
    m = train_dbn(x[tr], np.eye(10)[y[tr]], cfg, be)
    clf = LogisticRegression(max_iter=3000).fit(x[tr], y[tr])
    start = x[te[:100]]
    assert (clf.predict(m.generate(be, 1, start=start, seed=3)) == y[te[:100]]).mean() >= 0.6
    g = m.generate(be, 20, start=start, seed=3)
    shuffled = np.random.default_rng(1).permuted(g, axis=1)
    assert clf.predict_proba(g).max(1).mean() > clf.predict_proba(shuffled).max(1).mean() + 0.05


def _synth(n: int, seed: int):
    """SYNTH-like data: uniform(-1, 1) variables; inputs RAND1..RAND6, forced classes argmax(RAND1..RAND3)."""
    r = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 10))
    return (r[:, 1:7] + 1.0) / 2.0, r[:, 1:4]


@pytest.mark.slow
def test_book_synthetic_example_one_percent():
    """1 RBM layer of 5 hidden + forced 3-class SoftMax, fine-tuned: the book reports 0.79 % in-sample; here
    the error on a fresh sample of the same process must be at most 2 % (measured: 1.0 %)."""
    x, t = _synth(2000, 1)
    xt, tt = _synth(2000, 2)
    cfg = DBNConfig(
        hidden=(5,), rbm=RBMConfig(n_hidden=1, n_rand=50, max_epochs=100), fine_tune=True, fine_max_iter=300
    )
    m = train_dbn(x, t, cfg, nn.get_backend("numpy"))
    assert (m.predict(xt).argmax(1) != tt.argmax(1)).mean() <= 0.02
