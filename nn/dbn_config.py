"""A deep belief net's architecture and supervised parameters (spec dbn.md §6.3, §6.6), checked on
construction, and the memory a training run needs, checked before anything large is allocated.

``DBNConfig`` holds DEEP's defaults; every value outside its range is a ``DBNConfigError`` naming the field,
so the command line can name its own option. ``interpolated_sizes`` is the book's architecture dialog: the
first and last layer sizes given, interior sizes linearly interpolated. ``check_memory`` estimates the
largest phase of ``nn.dbn.train_dbn`` (an RBM layer with its batch temporaries and the next layer's feed, or
the supervised and fine-tuning nets with their activations and CG vectors) and refuses a configuration that
cannot fit the memory available now, instead of failing with a ``MemoryError`` minutes in (or taking the
machine into swap).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields

from nn.rbm_config import (
    COUNT_LIMIT,
    SEED_LIMIT,
    DBNConfigError,
    RBMConfig,
    check_bool,
    check_int,
    check_real,
)

MAX_LAYERS = 100  # per section: deeper stacks are a typing slip, not a model (DEEP's own limit is lower)
_HOST_BYTES = 8  # float64


@dataclass(frozen=True)
class DBNConfig:
    """Architecture and supervised parameters with DEEP's defaults (spec §6.3, §6.6)."""

    hidden: tuple[int, ...] = (100,)  # unsupervised layer sizes, bottom first (may be empty)
    rbm: RBMConfig = field(default_factory=lambda: RBMConfig(n_hidden=1))  # n_hidden is set per layer
    greedy_mean_field: bool = True
    classifier: bool = True
    head_hidden: tuple[int, ...] = ()  # logistic supervised hidden layers before the output
    anneal_iters: int = 100
    anneal_range: float = 1.0
    sup_max_iter: int = 1000
    sup_tol: float = 5e-5
    fine_tune: bool = False
    fine_max_iter: int = 2000
    fine_tol: float = 1e-5
    weight_penalty: float = 0.001
    allow_svd: bool = True  # SVD output weights (always off above SVD_MAX_INPUTS output-layer inputs)
    seed: int = 1

    def __post_init__(self) -> None:
        own = "DBN"
        for name in ("hidden", "head_hidden"):
            given = getattr(self, name)
            try:
                sizes = tuple(given)
            except TypeError:
                raise DBNConfigError(own, name, given, "must be a sequence of layer sizes") from None
            if len(sizes) > MAX_LAYERS:
                raise DBNConfigError(
                    own, name, f"{len(sizes)} layers", f"must hold at most {MAX_LAYERS} layers"
                )
            for s in sizes:
                try:
                    check_int(own, name, s, 1)
                except DBNConfigError:
                    raise DBNConfigError(own, name, sizes, "must hold layer sizes >= 1") from None
            object.__setattr__(self, name, tuple(int(s) for s in sizes))
        if not isinstance(self.rbm, RBMConfig):
            raise DBNConfigError(own, "rbm", self.rbm, "must be an RBMConfig")
        for name in ("anneal_iters", "sup_max_iter", "fine_max_iter"):
            object.__setattr__(self, name, check_int(own, name, getattr(self, name), 0, COUNT_LIMIT))
        object.__setattr__(self, "seed", check_int(own, "seed", self.seed, 0, SEED_LIMIT))
        for name in ("anneal_range", "sup_tol", "fine_tol", "weight_penalty"):
            object.__setattr__(self, name, check_real(own, name, getattr(self, name), 0.0))
        for name in ("greedy_mean_field", "classifier", "fine_tune", "allow_svd"):
            object.__setattr__(self, name, check_bool(own, name, getattr(self, name)))


def interpolated_sizes(count: int, first: int, last: int) -> tuple[int, ...]:
    """``count`` layer sizes from ``first`` to ``last``, the interior ones linearly interpolated and rounded
    to the nearest neuron (DEEP's architecture dialog, spec §6.3)."""
    if count <= 1:
        return (first,) * count
    return tuple(int(first + (last - first) * k / (count - 1) + 0.5) for k in range(count))


def _weights(sizes: list[int]) -> int:
    return sum((i + 1) * o for i, o in itertools.pairwise(sizes))


def working_sets(n_cases: int, n_inputs: int, n_outputs: int, config: DBNConfig) -> dict[str, int]:
    """Numbers held at once by the largest unsupervised and supervised phases of ``train_dbn``.

    An RBM layer of ``V`` inputs and ``H`` hidden neurons on ``N`` cases holds its input and next feed
    (``N·(V + 2H)``), about ten ``H·V`` matrices (weights, increments, previous gradient, temporaries of the
    update) and eight batch arrays. The head (and the fine-tuned whole) holds its inputs, every layer's
    activations and deltas, and half a dozen parameter-sized CG vectors. A generous estimate: the point is
    to refuse what cannot fit, not to squeeze."""
    sizes = [n_inputs, *config.hidden]
    batch = -(-n_cases // config.rbm.n_batches)
    unsupervised = 0
    for v, h in itertools.pairwise(sizes):
        unsupervised = max(unsupervised, n_cases * (v + 2 * h) + 10 * h * v + 8 * batch * (v + h))
    head = [sizes[-1], *config.head_hidden, n_outputs]
    supervised = 2 * n_cases * sum(head) + 6 * _weights(head)
    if config.fine_tune and config.hidden:
        full = [n_inputs, *config.hidden, *config.head_hidden, n_outputs]
        supervised = max(supervised, 2 * n_cases * sum(full) + 6 * _weights(full))
    return {"hidden": unsupervised, "head_hidden": supervised}


def byte_size(n: float) -> str:
    """``n`` bytes for a message: 512 MiB, 21.8 GiB, 3.45 TiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n / 2**20:.3g} MiB"


def check_memory(n_cases: int, n_inputs: int, n_outputs: int, config: DBNConfig, backend=None) -> None:
    """Refuse (``DBNConfigError`` on ``hidden`` or ``head_hidden``) a training run that cannot fit the host
    memory available now, or the OpenCL device's global memory, before anything is allocated."""
    import psutil

    sets = working_sets(n_cases, n_inputs, n_outputs, config)
    name = max(sets, key=sets.get)
    need = sets[name]
    runtime = getattr(backend, "runtime", None)
    limits = [(_HOST_BYTES, psutil.virtual_memory().available, "of host memory available")]
    if runtime is not None:
        limits.append((runtime.dtype.itemsize, runtime.info.global_mem_bytes, f"on {runtime.info.name}"))
    for itemsize, have, where in limits:
        if need * itemsize > have:
            raise DBNConfigError(
                "DBN",
                name,
                getattr(config, name),
                f"needs about {byte_size(need * itemsize)} for {n_cases} cases of {n_inputs} inputs; "
                f"{byte_size(have)} {where}",
            )


def config_dict(cfg: DBNConfig) -> dict:
    """JSON-compatible form of a config (for model files and logs)."""
    out = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "rbm"}
    out["hidden"], out["head_hidden"] = list(cfg.hidden), list(cfg.head_hidden)
    out["rbm"] = {f.name: getattr(cfg.rbm, f.name) for f in fields(cfg.rbm)}
    return out


def config_from_dict(d: dict) -> DBNConfig:
    d = dict(d)
    d["rbm"] = RBMConfig(**d["rbm"])
    d["hidden"], d["head_hidden"] = tuple(d["hidden"]), tuple(d["head_hidden"])
    return DBNConfig(**d)
