"""Deep belief nets (spec dbn.md §5): greedy RBM stack, supervised head, fine-tune, generative sampling.

``train_dbn(x, t, DBNConfig(...), backend)`` trains each RBM (``nn.rbm.train_rbm``, on the backend) on the
deterministic activations of the layers below, sampled 0/1 per batch when ``greedy_mean_field`` is off;
sorts each layer's hidden neurons by Σ|w| (descending); then fits the supervised head (simulated annealing
with SVD output weights, then Polak–Ribière CG, every criterion and gradient evaluated on the backend by
``nn.mlfn_device``) and, optionally, fine-tunes the whole stack as one logistic feed-forward net by the same
CG. Decisions the book leaves open (§8): the annealing scores the
training criterion including the weight penalty; regression targets are used as given (not rescaled).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import ClassVar

import numpy as np

from nn.cg import SVD_MAX_INPUTS, anneal, conjugate_gradient, svd_weights
from nn.dbn_config import DBNConfig, check_memory, config_dict, config_from_dict
from nn.errors import NNConfigError, NNDataError
from nn.mlfn import Net, raw_error, weight_penalty
from nn.mlfn_device import BackendSpace, DeviceCriterion
from nn.rbm import EpochLog, TrainingDivergedError, check_unit_interval, train_rbm
from nn.rbm_ops_numpy import sigmoid


@dataclass
class RBMLayer:
    """One trained unsupervised layer with DEEP's per-neuron statistics (spec §5.1, §6.10)."""

    w: np.ndarray  # (H, V)
    b: np.ndarray  # (V,) visible bias (generation and reconstruction only)
    c: np.ndarray  # (H,)
    q_mean: np.ndarray  # mean activation over the training set
    skewness: np.ndarray
    initial_error: float = 0.0
    history: list[EpochLog] = field(default_factory=list)
    stop_reason: str = ""  # why its training stopped (a convergence test, the backstop, divergence)

    def up(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(x @ self.w.T + self.c)

    def down(self, h: np.ndarray) -> np.ndarray:
        return sigmoid(h @ self.w + self.b)


@dataclass
class DBN:
    """A trained model. ``predict`` runs the stack deterministically, then the head.

    Saved and loaded by ``nn.save``/``nn.load`` (kind ``"dbn"``): the arrays ``layer<k>_{w,b,c,q_mean,
    skewness}`` and ``head<k>_{w,b}``, the config and layer sizes as the architecture, the phase criteria
    and every layer's epoch log as the training records."""

    model_kind: ClassVar[str] = "dbn"
    layers: list[RBMLayer]
    head: Net
    config: DBNConfig
    n_inputs: int
    fine_tuned: bool = False
    log: dict = field(default_factory=dict)  # criteria after each phase, for reports
    metadata: dict = field(default_factory=dict)  # the caller's JSON-compatible dict, saved with the model

    def features(self, x: np.ndarray, depth: int | None = None) -> np.ndarray:
        """Activation probabilities of unsupervised layer ``depth`` (default: the top; 0 = the input)."""
        h = np.asarray(x, dtype=np.float64)
        for layer in self.layers[: len(self.layers) if depth is None else depth]:
            h = layer.up(h)
        return h

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (classifier) or outputs (regression), ``(N, K)``."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_inputs:
            raise NNDataError(f"DBN input must be (cases, {self.n_inputs}), got shape {x.shape}")
        return self.head.predict(self.features(x))

    def reconstruct(self, x: np.ndarray) -> np.ndarray:
        """Deterministic pass up through every layer and back down (Analyze, spec §8)."""
        h = self.features(x)
        for layer in reversed(self.layers):
            h = layer.down(h)
        return h

    def generate(
        self, backend, n_chain: int, *, start: np.ndarray | None = None, count: int = 1, seed: int = 1
    ) -> np.ndarray:
        """Generative samples (spec §5.3) as visible probabilities ``(N, V)``.

        From ``start`` cases (pushed up deterministically to the top RBM's visible side, then a Gibbs chain
        whose hidden states are always sampled) or from ``count`` random 0/1 top hidden states (the first
        visible-to-hidden half-step skipped). The visible side of the chain and the way down are mean field,
        each layer with its own visible bias. ``n_chain = 0`` returns ``start`` unchanged.
        """
        if not self.layers:
            raise NNConfigError("generation needs at least one unsupervised layer")
        be, top = backend, self.layers[-1]
        w, b, c = be.asarray(top.w), be.asarray(top.b), be.asarray(top.c)
        counter = 0
        if start is not None:
            start = np.asarray(start, dtype=np.float64)
            if n_chain == 0:
                return start
            v = be.asarray(self.features(start, len(self.layers) - 1))
            h = None
        else:
            rng = np.random.default_rng(seed)
            h = be.asarray((rng.uniform(size=(count, top.w.shape[0])) < 0.5).astype(np.float64))
        for _ in range(max(n_chain, 1)):
            if h is None:
                h, counter = be.rbm_sample(be.rbm_hidden_probs(v, w, c), seed, counter), counter + 1
            v = be.rbm_visible_probs(h, w, b)
            h = None
        out = be.to_numpy(v).astype(np.float64)
        for layer in reversed(self.layers[:-1]):
            out = layer.down(out)
        return out

    # --- the model file (nn.io.SavedModel) -----------------------------------------------------------
    def architecture(self) -> dict:
        """The architecture record of the model file: the config and the layer sizes."""
        return {
            "config": config_dict(self.config),
            "n_inputs": self.n_inputs,
            "hidden": [int(ly.w.shape[0]) for ly in self.layers],
            "head": [int(w.shape[0]) for w, _ in self.head.layers],
            "classifier": self.head.classifier,
            "fine_tuned": self.fine_tuned,
        }

    def export_arrays(self) -> dict[str, np.ndarray]:
        out = {f"layer{k}_{name}": getattr(ly, name) for k, ly in enumerate(self.layers) for name in _LAYER}
        for k, (w, b) in enumerate(self.head.layers):
            out[f"head{k}_w"], out[f"head{k}_b"] = w, b
        return out

    def training_state(self) -> dict:
        return {
            "log": self.log,
            "initial_error": [ly.initial_error for ly in self.layers],
            "stop_reason": [ly.stop_reason for ly in self.layers],
            "history": [[asdict(line) for line in ly.history] for ly in self.layers],
        }

    @classmethod
    def from_saved(cls, architecture: dict, arrays: dict[str, np.ndarray], training: dict) -> DBN:
        """Rebuild from a model file's records; ``ValueError`` names the first array that does not fit."""
        arch = architecture
        cfg = config_from_dict(arch["config"])
        n_in, hidden, head = int(arch["n_inputs"]), list(arch["hidden"]), list(arch["head"])
        sizes = [n_in, *hidden]
        shapes = {}
        for k, (nv, nh) in enumerate(itertools.pairwise(sizes)):
            shapes |= {
                f"layer{k}_w": (nh, nv),
                f"layer{k}_b": (nv,),
                f"layer{k}_c": (nh,),
                f"layer{k}_q_mean": (nh,),
                f"layer{k}_skewness": (nh,),
            }
        for k, (i, o) in enumerate(itertools.pairwise([sizes[-1], *head])):
            shapes |= {f"head{k}_w": (o, i), f"head{k}_b": (o,)}
        expect = set(shapes)
        if set(arrays) != expect:
            raise NNDataError(f"arrays {sorted(set(arrays) ^ expect)} missing or unexpected")
        for name, shape in shapes.items():
            a = arrays[name]
            if a.shape != shape:
                raise NNDataError(f"array {name} has shape {a.shape}, the architecture needs {shape}")
            if not np.isfinite(a).all():
                raise NNDataError(f"array {name} holds values that are not finite")
        if not head or bool(arch["classifier"]) != cfg.classifier or (cfg.classifier and head[-1] < 2):
            kind = "classifier" if cfg.classifier else "regression"
            raise NNDataError(f"head sizes {head} do not fit a {kind}")
        f64 = {k: np.asarray(a, dtype=np.float64) for k, a in arrays.items()}
        histories = training.get("history") or [[] for _ in hidden]
        errors = training.get("initial_error") or [0.0 for _ in hidden]
        reasons = training.get("stop_reason") or ["" for _ in hidden]  # files before it was recorded
        layers = [
            RBMLayer(
                *(f64[f"layer{k}_{n}"] for n in _LAYER),
                float(errors[k]),
                [EpochLog(**line) for line in histories[k]],
                str(reasons[k]),
            )
            for k in range(len(hidden))
        ]
        net = Net([(f64[f"head{k}_w"], f64[f"head{k}_b"]) for k in range(len(head))], cfg.classifier)
        return cls(layers, net, cfg, n_in, bool(arch["fine_tuned"]), dict(training.get("log") or {}))


_LAYER = ("w", "b", "c", "q_mean", "skewness")  # the arrays of one unsupervised layer in a model file


def sort_hidden(w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Order of hidden neurons by descending Σ_j |w_ij| (stable)."""
    return np.argsort(-np.abs(w).sum(axis=1), kind="stable")


def _stats(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = h.mean(axis=0)
    sd = h.std(axis=0)
    skew = ((h - mean) ** 3).mean(axis=0) / np.where(sd > 0, sd**3, 1.0)
    return mean, np.where(sd > 0, skew, 0.0)


def _head_fit(
    net: Net,
    x: np.ndarray,
    t: np.ndarray,
    cfg: DBNConfig,
    rng: np.random.Generator,
    backend,
    on_iter: Callable[[int, float], None] | None,
) -> float:
    """Annealing start (with SVD output weights where allowed), then CG; returns the final criterion.

    Every criterion evaluation runs on ``backend`` (``DeviceCriterion``); the SVD of the output layer's
    inputs is host float64 (a starting point, computed once when the head has no hidden layer)."""
    n_in_out = net.layers[-1][0].shape[1]
    use_svd = cfg.allow_svd and n_in_out <= SVD_MAX_INPUTS
    out_size = net.layers[-1][0].size + net.layers[-1][1].size
    crit = DeviceCriterion(backend, net, x, t, cfg.weight_penalty)

    def fill(theta: np.ndarray) -> np.ndarray:
        if not use_svd:
            return theta
        net.set_flat(theta)
        ws = svd_weights(net.hidden(x)[-1], t)
        if not np.isfinite(ws).all():
            return theta
        theta = theta.copy()
        theta[-out_size:] = np.concatenate([ws[:, :-1].ravel(), ws[:, -1]])
        return theta

    if use_svd and len(net.layers) == 1:  # SVD sets every weight: all annealing tries would be this one
        start = fill(np.zeros(net.n_weights))
    else:
        start = anneal(
            lambda theta: crit.value(crit.to_device(theta)),
            net.n_weights,
            cfg.anneal_iters,
            cfg.anneal_range,
            rng,
            fill,
        )
    return _cg(net, crit, start, cfg.sup_max_iter, cfg.sup_tol, on_iter)


def _cg(
    net: Net,
    crit: DeviceCriterion,
    start: np.ndarray,
    max_iter: int,
    tol: float,
    on_iter: Callable[[int, float], None] | None,
) -> float:
    """CG from ``start`` with the parameters, directions and gradients on ``crit``'s backend; the result is
    written back into ``net`` (host float64) and its criterion returned."""
    theta = crit.to_device(start)
    if max_iter == 0:
        value = crit.value(theta)
    else:
        res = conjugate_gradient(
            crit.value_grad,
            theta,
            max_iter=max_iter,
            tol=tol,
            on_iter=on_iter,
            f=crit.value,
            space=BackendSpace(crit.backend),
        )
        theta, value = res.x, res.value
    net.set_flat(crit.to_host(theta))
    return value


def train_dbn(
    x: np.ndarray,
    t: np.ndarray,
    config: DBNConfig,
    backend,
    *,
    on_epoch: Callable[[int, EpochLog], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    on_layer: Callable[[int, RBMLayer], None] | None = None,
) -> DBN:
    """Train on inputs ``x (N, V)`` in [0, 1] and targets ``t (N, K)`` (one-hot rows for classifiers).

    ``on_epoch(depth, line)`` sees every RBM epoch, ``on_phase(text)`` each phase as it starts and
    ``on_layer(depth, layer)`` each unsupervised layer once trained. A configuration that cannot fit the
    available memory is refused (``DBNConfigError``) before anything large is allocated.

    ``model.log`` records each supervised phase's criterion as minimised (``supervised``, ``fine_tune``) and
    its two parts: the error (``*_error``: MSE or negative log likelihood, spec §1.3) and the weight penalty
    (``*_penalty``, §1.5)."""
    x = check_unit_interval(x, "DBN input").astype(np.float64)
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != x.shape[0] or not np.isfinite(t).all():
        raise NNDataError(
            f"DBN targets must be finite (cases, outputs) with {x.shape[0]} rows, got {t.shape}"
        )
    if config.classifier and t.shape[1] < 2:
        raise NNDataError("a classifier needs at least 2 target columns (the class is the largest)")
    check_memory(x.shape[0], x.shape[1], t.shape[1], config, backend)
    phase = on_phase or (lambda _s: None)
    rng = np.random.default_rng(config.seed)
    layers, feed = [], x
    for depth, nh in enumerate(config.hidden):
        phase(f"unsupervised layer {depth + 1} of {len(config.hidden)}: {nh} hidden")
        rcfg = replace(config.rbm, n_hidden=nh, seed=config.rbm.seed + 7919 * depth)
        fit = train_rbm(
            backend,
            feed,
            rcfg,
            sample_input=depth > 0 and not config.greedy_mean_field,
            on_epoch=None if on_epoch is None else (lambda line, d=depth: on_epoch(d, line)),
        )
        if fit.stop_reason.startswith("diverged"):
            raise TrainingDivergedError(
                f"unsupervised layer {depth + 1} {fit.stop_reason}: lower the learning rate or the penalties"
            )
        order = sort_hidden(fit.w, fit.c)
        layer = RBMLayer(
            fit.w[order],
            fit.b,
            fit.c[order],
            np.zeros(nh),
            np.zeros(nh),
            fit.initial_error,
            fit.history,
            fit.stop_reason,
        )
        feed = layer.up(feed)
        layer.q_mean, layer.skewness = _stats(feed)
        layers.append(layer)
        if on_layer is not None:
            on_layer(depth, layer)
    sizes = [feed.shape[1], *config.head_hidden, t.shape[1]]
    head = Net([(np.zeros((o, i)), np.zeros(o)) for i, o in itertools.pairwise(sizes)], config.classifier)
    phase("supervised section: annealing, then conjugate gradients")
    model = DBN(layers, head, config, x.shape[1])
    model.log["supervised"] = _head_fit(head, feed, t, config, rng, backend, None)
    _record_parts(model.log, "supervised", head, feed, t, config.weight_penalty)
    _check_finite(model.log, head, "supervised section")
    if config.fine_tune and layers:
        phase("fine-tuning the complete model")
        fine_tune(model, x, t, backend)
    return model


def _record_parts(log: dict, phase: str, net: Net, x: np.ndarray, t: np.ndarray, penalty: float) -> None:
    """The criterion's two parts at the trained weights, in float64 on the host (DEEP prints the error, not
    error + penalty; the penalty grows with the weights and would otherwise pass for error)."""
    log[f"{phase}_error"] = raw_error(net.predict(x), t, net.classifier)
    log[f"{phase}_penalty"] = weight_penalty(net, penalty)


def fine_tune(model: DBN, x: np.ndarray, t: np.ndarray, backend) -> float:
    """Train stack and head together as one logistic net by CG on ``backend`` (spec §5.2); visible biases
    are unused."""
    cfg = model.config
    full = Net([(ly.w, ly.c) for ly in model.layers] + list(model.head.layers), model.head.classifier)
    crit = DeviceCriterion(
        backend, full, np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64), cfg.weight_penalty
    )
    value = _cg(full, crit, full.flat(), cfg.fine_max_iter, cfg.fine_tol, None)
    for ly, (w, c) in zip(model.layers, full.layers, strict=False):
        ly.w, ly.c = w, c
    model.head.layers = full.layers[len(model.layers) :]
    model.fine_tuned = True
    model.log["fine_tune"] = value
    _record_parts(model.log, "fine_tune", full, x, t, cfg.weight_penalty)
    _check_finite(model.log, full, "fine-tuning")
    return value


def _check_finite(log: dict, net: Net, phase: str) -> None:
    if not (all(math.isfinite(v) for v in log.values()) and np.isfinite(net.flat()).all()):
        raise TrainingDivergedError(
            f"{phase} diverged (non-finite weights or criterion): lower the annealing range or the "
            "weight penalty"
        )
