"""The Fractal expert advisor of "Neural networks made easy" (Fractal / Fractal_OCL), done carefully.

Each closed bar is classified as the middle of a lower fractal (buy), an upper fractal (sell) or neither,
from the 12 features of the last 20 bars (240 inputs). The article's network (Part 5: 240 -> 500 -> 250 ->
125 -> 62 -> 3, tanh, softmax) is the default; any stack of layer descriptions can replace it.

What differs from the article, on purpose:
- the buy-fractal inequalities are the right way round (see ``features.fractal_labels``);
- the label of bar ``j`` needs bar ``j+1``, so training uses only bars whose label was known when the
  study window closed; the newest study bar is left out;
- features are standardised with statistics of the training rows only, saved with the model;
- the newest ``validation`` share of the study rows (20 % by default) is held out, chronologically: never
  used for weights or scaling; the training row before it is dropped, as its label reads the first held-out
  bar. Training stops when the validation loss has not improved for ``patience`` epochs and the weights of
  the best validation epoch are restored, so ``epochs`` is a maximum. ``validation=0`` trains on every
  study row for exactly ``epochs`` epochs and keeps the last weights (``patience`` is then ignored: there
  is nothing to stop on); ``patience=0`` keeps the validation curve but trains all ``epochs``;
- predictions for the whole history are made in one batch (an indicator the harness checks for causality),
  so replaying is as fast as one ``predict`` call;
- next to the network, a multinomial logistic regression is fitted on the same scaled training rows (never
  the validation or forward rows) and its forward predictions are scored as a baseline: the report shows
  whether the network beats a linear model, not only chance.

Trading rule: when the bar that just closed is predicted a lower fractal with probability >= ``threshold``
buy (an upper one: sell), with SL/TP in points, and close positions older than ``exit_bars`` bars.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from datafeeds.clock import UTC
from strategies.base import Bars, EAError, ExpertAdvisor
from strategies.baselines import LogisticRegression
from strategies.features import (
    BUY,
    CLASSES,
    FEATURE_DEFINITIONS,
    FEATURES,
    SELL,
    UNKNOWN,
    Scaler,
    bar_features,
    fractal_labels,
    windows,
)

log = logging.getLogger(__name__)

PART5_HIDDEN = "500,250,125,62"


class FractalEA(ExpertAdvisor):
    """Fractal classifier on a dense network, trained on the study period, trading its predictions."""

    depth: int = 20  # bars per input window (x 12 features)
    rule: str = "3bar"  # fractal labels: "3bar" (the articles) or "5bar" (MetaTrader's Fractals)
    hidden: str = PART5_HIDDEN  # hidden layer widths, comma-separated
    activation: str = "tanh"
    layers: str = ""  # JSON list of layer descriptions; replaces hidden/activation when given
    epochs: int = 100  # maximum; early stopping on the validation loss usually ends training sooner
    batch_size: int = 32  # 1 = the MQL5 online loop (one update per bar)
    optimizer: str = "adam"
    lr: float = 3e-4
    backend: str = "auto"  # "auto" (OpenCL where a device works, else NumPy), "numpy", "opencl[:<device>]"
    seed: int = 0
    threshold: float = 0.5  # minimum class probability for a trade
    lots: float = 0.1
    sl_points: float = 300.0  # 0 = no stop-loss
    tp_points: float = 600.0  # 0 = no take-profit
    exit_bars: int = 12  # close positions after this many bars; 0 = never
    trade: bool = True  # False: predict and score only
    validation: float = 0.2  # share of the newest study rows held out (validation loss, early stopping)
    patience: int = 5  # epochs without a lower validation loss before stopping; 0 = never stop early
    model: str = "dense"  # "dense" (the network above) or "dbn" (deep belief net, strategies/fractal_dbn.py)
    dbn_layers: str = "100,50"  # RBM layer widths of model=dbn
    dbn_epochs: int = 100  # maximum RBM epochs per layer of model=dbn
    dbn_fine_tune: int = 200  # CG iterations fine-tuning the whole model=dbn stack (0: the head alone)
    min_study_bars = 200

    # -- lifecycle ---------------------------------------------------------------------------------------
    def on_init(self) -> None:
        if self.rule not in ("3bar", "5bar"):
            raise EAError(f"FractalEA rule must be '3bar' or '5bar', got {self.rule!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise EAError(f"FractalEA threshold must lie in [0, 1], got {self.threshold}")
        if self.depth < 1 or self.epochs < 0 or self.batch_size < 1 or not 0.0 <= self.validation < 1.0:
            raise EAError("FractalEA needs depth >= 1, epochs >= 0, batch_size >= 1 and 0 <= validation < 1")
        if self.patience < 0:
            raise EAError(f"FractalEA patience must be >= 0 (0 = no early stopping), got {self.patience}")
        if self.dbn_fine_tune < 0:
            raise EAError(f"FractalEA dbn_fine_tune must be >= 0, got {self.dbn_fine_tune}")
        stops = (self.sl_points, self.tp_points)
        if not (0 < self.lots < math.inf and all(0 <= p < math.inf for p in stops)):
            raise EAError(
                f"FractalEA needs lots > 0 and sl_points, tp_points >= 0 (finite), got {self.lots}, "
                f"{self.sl_points} and {self.tp_points}"
            )
        if self.exit_bars < 0:
            raise EAError(f"FractalEA exit_bars must be >= 0 (0: never), got {self.exit_bars}")
        self.kind = self.params["model"]  # self.model holds the trained network below
        if self.kind not in ("dense", "dbn"):
            raise EAError(f"FractalEA model must be 'dense' or 'dbn', got {self.kind!r}")
        self.specs = self.layer_specs()
        if self.kind == "dense":  # each layer's and the optimizer's settings, before any training
            from nn import from_config
            from nn.optim import optimizer_from_config

            for spec in self.specs:
                from_config(spec)
            optimizer_from_config({"type": self.optimizer, "lr": self.lr})
        self.model = None
        self.scaler: Scaler | None = None
        self.proba = None
        self.linear_proba = None
        self.linear: LogisticRegression | None = None
        self.rounds = 0
        self._decided: dict[int, np.ndarray] = {}
        self._decided_linear: dict[int, int] = {}
        self._study_span: list[tuple[str, str]] = []
        self.outcomes: list[dict] = []  # per training round: epochs run, epoch kept, why training stopped

    def layer_specs(self) -> list[dict]:
        """The network as layer descriptions: ``layers`` JSON if given, else ``hidden`` + ``activation``."""
        if self.layers:
            try:
                specs = json.loads(self.layers) if isinstance(self.layers, str) else list(self.layers)
            except json.JSONDecodeError as exc:
                raise EAError(f"FractalEA layers is not valid JSON: {exc}") from None
            if not isinstance(specs, list) or not specs or not all(isinstance(s, dict) for s in specs):
                raise EAError("FractalEA layers must be a JSON list of layer objects")
            last = specs[-1]
            if last.get("units") != len(CLASSES) or last.get("activation") != "softmax":
                raise EAError(
                    'FractalEA layers must end with {"type": "dense", "units": 3, "activation": "softmax"}'
                )
            return specs
        try:
            widths = [int(w) for w in str(self.hidden).split(",") if w.strip()]
        except ValueError:
            raise EAError(f"FractalEA hidden must be comma-separated widths like {PART5_HIDDEN!r}") from None
        if any(w < 1 for w in widths):
            raise EAError(f"FractalEA hidden widths must be positive, got {self.hidden!r}")
        specs = [{"type": "dense", "units": w, "activation": self.activation} for w in widths]
        return [*specs, {"type": "dense", "units": len(CLASSES), "activation": "softmax"}]

    def on_study(self, bars: Bars) -> None:
        """Fit the scaler and train a fresh network on the study window (closed bars only)."""
        from nn import EarlyStopping, Sequential

        x, rows = self._inputs(bars)
        labels = fractal_labels(bars.high, bars.low, self.rule)[rows]
        known = labels != UNKNOWN  # the newest bar(s): their label needs bars not yet closed
        x, y = x[known], labels[known]
        if len(x) < 2:
            raise EAError(
                f"FractalEA: only {len(x)} labelled training rows in the study window of {len(bars)} bars; "
                f"it needs about {self.depth + 40} bars of indicator warm-up plus the rows to learn from"
            )
        # Optional validation: the newest study rows, never used for weights or scaling. The last training
        # row is dropped because its label reads the high/low of the first validation bar.
        n_val = round(len(x) * self.validation)
        validation = None
        if n_val > 0:
            if len(x) - n_val < 3:
                raise EAError(f"FractalEA validation={self.validation} leaves too few training rows")
            x_val, y_val = x[-n_val:], y[-n_val:]
            x, y = x[: -n_val - 1], y[: -n_val - 1]
        self.scaler = Scaler.fit(x)
        xs = self.scaler.transform(x)
        onehot = np.eye(len(CLASSES))[y]
        if n_val > 0:
            validation = (self.scaler.transform(x_val), np.eye(len(CLASSES))[y_val])
        if self.kind == "dbn":
            from strategies.fractal_dbn import fit_dbn

            self.rounds += 1
            self._study_span.append((str(bars.time[0]), str(bars.time[-1])))
            self.model = fit_dbn(self, xs, onehot, validation, self.rounds)
            self.proba = self.indicator(self._predict_all, "fractal_proba")
            self.linear = LogisticRegression().fit(xs, y, len(CLASSES))  # the same training rows
            self.linear_proba = self.indicator(self._predict_linear, "logistic_proba")
            return
        self.model = Sequential.from_specs(
            self.specs,
            input_shape=(x.shape[1],),
            loss="cce",
            optimizer={"type": self.optimizer, "lr": self.lr},
            backend=self.nn_backend(),
            seed=self.seed + self.rounds,
        )
        self.rounds += 1
        self._study_span.append((str(bars.time[0]), str(bars.time[-1])))
        log.info("training round %d on %d rows (%s .. %s)", self.rounds, len(x), bars.time[0], bars.time[-1])
        hook = _EpochHook(self, self.rounds, self.epochs, xs, y)
        stopper = None
        if validation is not None and self.patience > 0:
            stopper = EarlyStopping("val_loss", patience=self.patience, restore_best=True)
        elif self.validation > 0 and validation is None:
            log.warning("FractalEA: validation=%s holds out no row; training without it", self.validation)
        history = self.model.fit(
            xs,
            onehot,
            epochs=self.epochs,
            batch_size=self.batch_size,
            shuffle=True,
            seed=self.seed,
            validation_data=validation,
            callbacks=[hook] if stopper is None else [hook, stopper],
            progress=False,
        )
        self._record_outcome(hook.records, history, stopper)
        self.proba = self.indicator(self._predict_all, "fractal_proba")
        self.linear = LogisticRegression().fit(xs, y, len(CLASSES))  # the same training rows
        self.linear_proba = self.indicator(self._predict_linear, "logistic_proba")

    def on_bar(self) -> None:
        if self.proba is None:
            return
        p = self.proba[-1]  # probabilities for the bar that just closed
        if not np.isfinite(p).all():
            return
        j = len(self.bars) - 1 + self.bars.offset
        self._decided[j] = p
        q = self.linear_proba[-1]
        if np.isfinite(q).all():
            self._decided_linear[j] = int(np.argmax(q))
        if self.trade:
            trade_fractal(self, p, FractalRule.of(self.params))

    def evaluate_predictions(self, bars: Bars) -> dict | None:
        n = len(bars)
        y_pred = np.full(n, UNKNOWN, dtype=np.int64)
        proba = np.full((n, len(CLASSES)), np.nan)
        for j, p in self._decided.items():
            if j < n:
                y_pred[j] = int(np.argmax(p))
                proba[j] = p
        y_linear = np.full(n, UNKNOWN, dtype=np.int64)
        for j, k in self._decided_linear.items():
            if j < n:
                y_linear[j] = k
        return {
            "classes": CLASSES,
            "y_true": fractal_labels(bars.high, bars.low, self.rule),
            "y_pred": y_pred,
            "proba": proba,
            "baselines": {"logistic_regression": y_linear},
        }

    def save_model(self, path: str) -> str | None:
        if self.model is None or self.scaler is None:
            return None
        from nn import save

        meta = {
            **self.model_metadata(),
            "features": list(FEATURES),
            "feature_definitions": FEATURE_DEFINITIONS,
            "candles": self.bars.meta.to_dict() if hasattr(self.bars.meta, "to_dict") else None,
            "depth": self.depth,
            "classes": list(CLASSES),
            "rule": self.rule,
            "scaler": self.scaler.to_dict(),
            "study_periods": self._study_span,
            "training_rounds": self.rounds,
            "training_outcomes": self.outcomes,
        }
        if self.kind == "dbn":
            return self.model.save(path, meta)
        return str(save(self.model, f"{path}.nnz", meta))

    # -- helpers -----------------------------------------------------------------------------------------
    def _record_outcome(self, records: list[dict], history, stopper) -> None:
        """Which epoch's weights the round kept and why it stopped, on its epoch records (for the console
        summary and the report): ``kept`` on the kept epoch, the outcome on the round's last record."""
        if not records:
            return
        best = None if stopper is None else stopper.best_epoch  # 0-based; None: no finite val_loss
        kept = len(records) if best is None else best + 1
        patience_ran_out = stopper is not None and history.stopped_early and stopper.wait >= stopper.patience
        if patience_ran_out:
            reason = f"validation loss not lower for {self.patience} epochs"
        elif history.stopped_early:
            reason = "training loss not finite"
        else:
            reason = f"{self.epochs}-epoch maximum reached"
        if stopper is None:
            rule = "no validation rows" if records[-1]["val_loss"] is None else "patience=0"
            reason += f" (no early stopping: {rule})"
        outcome = {
            "round": records[-1]["round"],
            "epochs_run": len(records),
            "kept_epoch": kept,
            "stopped_early": bool(history.stopped_early),
            "stop_reason": reason,
            "kept_loss": records[kept - 1]["loss"],
            "kept_val_loss": records[kept - 1]["val_loss"],
        }
        self.outcomes.append(outcome)
        records[kept - 1]["kept"] = True
        records[-1].update({k: v for k, v in outcome.items() if k != "round"})
        log.info(
            "training round %d: %d epochs, kept epoch %d (%s)", outcome["round"], len(records), kept, reason
        )

    def _inputs(self, bars: Bars) -> tuple[np.ndarray, np.ndarray]:
        clock = getattr(bars.meta, "clock", UTC)
        feats = bar_features(bars.open, bars.high, bars.low, bars.close, bars.tick_volume, bars.time, clock)
        return windows(feats, self.depth)

    def _predict_all(self, bars: Bars) -> np.ndarray:
        """``(N, 3)`` class probabilities for every bar with a full window (NaN before), in one batch."""
        return self._probabilities(bars, lambda xs: self.model.predict(xs, batch_size=4096))

    def _predict_linear(self, bars: Bars) -> np.ndarray:
        """The logistic-regression baseline's ``(N, 3)`` probabilities, as ``_predict_all``."""
        return self._probabilities(bars, self.linear.predict_proba)

    def _probabilities(self, bars: Bars, predict) -> np.ndarray:
        out = np.full((len(bars), len(CLASSES)), np.nan)
        x, rows = self._inputs(bars)
        if len(rows):
            out[rows] = predict(self.scaler.transform(x))
        return out


@dataclass(frozen=True)
class FractalRule:
    """How the Fractal EA trades a bar's class probabilities (also the rule of an exported model)."""

    threshold: float = 0.5
    lots: float = 0.1
    sl_points: float = 300.0
    tp_points: float = 600.0
    exit_bars: int = 12

    @classmethod
    def of(cls, params: dict) -> FractalRule:
        return cls(*(type(getattr(cls, f.name))(params[f.name]) for f in fields(cls)))

    def to_dict(self) -> dict:
        return asdict(self)


def trade_fractal(ea: ExpertAdvisor, p: np.ndarray, rule: FractalRule) -> None:
    """At a bar's open with ``p`` the probabilities of (undefined, buy, sell) for the bar that just closed:
    close positions older than ``exit_bars`` bars; on a buy or sell class with probability >= ``threshold``
    reverse a position the other way and open ``lots`` with SL/TP in points (one position per direction)."""
    now = len(ea.bars) + ea.bars.offset
    if rule.exit_bars > 0:
        for pos in ea.positions():
            if now - pos.bar_open >= rule.exit_bars:
                ea.close(pos.ticket, reason="time")
    k = int(np.argmax(p))
    if p[k] < rule.threshold or k not in (BUY, SELL):
        return
    net = ea.position
    stops = {"sl_points": rule.sl_points or None, "tp_points": rule.tp_points or None}
    if k == BUY and net <= 0:
        if net < 0:
            ea.close()
        ea.buy(rule.lots, comment="lower fractal", **stops)
    elif k == SELL and net >= 0:
        if net > 0:
            ea.close()
        ea.sell(rule.lots, comment="upper fractal", **stops)


def signal_rates(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float | None, float | None]:
    """The article's per-era figures: "forecast" = share of buy/sell signals that were right,
    "undefine" = share of real fractals predicted as undefined."""
    signals = y_pred != 0
    real = y_true != 0
    hit = float((y_pred[signals] == y_true[signals]).mean()) if signals.any() else None
    missed = float((y_pred[real] == 0).mean()) if real.any() else None
    return hit, missed


class _EpochHook:
    """nn callback: each epoch's record plus the article's in-sample "forecast"/"undefine" rates, sent to
    the EA's training log (and so to the progress bar and the report) and logged like the EA's "Era" line.

    The rates cost one batched forward pass over the training rows per epoch.
    """

    def __init__(self, ea: FractalEA, rnd: int, epochs: int, x: np.ndarray, y: np.ndarray):
        self.ea, self.round, self.epochs, self.x, self.y = ea, rnd, epochs, x, y
        self.model = None
        self.records: list[dict] = []

    def on_train_begin(self, model) -> None:
        self.model = model

    def on_epoch_end(self, record) -> None:
        loss = float(record.loss)
        pred = np.argmax(self.model.predict(self.x, batch_size=4096), axis=1)
        hit, missed = signal_rates(self.y, pred)
        epoch = int(record.epoch) + 1
        log.info(
            "Era %d -> loss %.5f forecast %s undefine %s (%.2f s)",
            epoch,
            loss,
            "n/a" if hit is None else f"{100 * hit:.1f}%",
            "n/a" if missed is None else f"{100 * missed:.1f}%",
            record.wall_s,
        )
        self.records.append(
            {
                "round": self.round,
                "epoch": epoch,
                "epochs": self.epochs,
                "rows": len(self.x),
                "loss": loss if math.isfinite(loss) else None,
                "val_loss": None if record.val_loss is None else float(record.val_loss),
                "train_hit_rate": hit,
                "train_missed_rate": missed,
                "wall_s": float(record.wall_s),
                "device_s": None if record.device_s is None else float(record.device_s),
                "build_s": float(record.build_s),
                "backend": self.model.backend.name,
            }
        )
        self.ea.record_epoch(self.records[-1])
