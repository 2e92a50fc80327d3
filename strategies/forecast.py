"""``ForecastEA``: trades the forecast of an ATFNet (or PatchTST) through the backtest harness, and its
report section. The models, training, baselines and metrics are ``strategies.forecasting``'s, shared with
``neuronet forecast``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass

import numpy as np

from nn.model import Sequential
from strategies.base import Bars, EAError, ExpertAdvisor, ReportSection
from strategies.baselines import LinearBaseline
from strategies.errors import ForecastError
from strategies.features import Scaler
from strategies.forecast_data import sliding_windows
from strategies.forecasting import (
    MODELS,
    Preset,
    build_forecaster,
    direction_accuracy,
    horizon_errors,
    layer_sizes,
    train_forecaster,
)

log = logging.getLogger(__name__)


# --- the expert advisor -------------------------------------------------------------------------------
class ForecastEA(ExpertAdvisor):
    """Trades the direction of an ATFNet (or PatchTST) forecast of the next ``pred_len`` bars.

    ``on_study`` standardises the ``channels`` with the statistics of the study rows its training windows
    cover (never validation or later bars), trains on the study period's windows (the newest 10% for early
    stopping) and fits the linear baseline on the same training windows. At each bar's open the model
    forecasts the closes of the next ``pred_len`` bars from the last ``seq_len`` closed bars; the move to
    step ``horizon`` (default: the last step) is compared with the cost of a round trip (the current spread,
    times ``cost_multiple``): long above it, short below minus it, flat in between. The position is
    reversed or closed when the decision changes.
    """

    channels: str = "close"  # comma-separated candle columns, e.g. "open,high,low,close"; must include close
    seq_len: int = 96
    pred_len: int = 24
    horizon: int = 0  # forecast step (1..pred_len) that sets the trade; 0 = pred_len
    model: str = "atfnet"
    d_model: int = 32
    n_heads: int = 4
    layers: int = 1
    d_ff: int = 64
    dropout: float = 0.1
    epochs: int = 5
    batch_size: int = 64
    lr: float = 1e-3
    backend: str = "auto"  # "auto" (OpenCL where a device works, else NumPy), "numpy", "opencl[:<device>]"
    seed: int = 0
    lots: float = 0.1
    cost_multiple: float = 1.0
    min_study_bars = 200

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self.net: Sequential | None = None
        self.scaler: Scaler | None = None
        self.rounds = 0  # training rounds: 1, or more with retrain_every
        self._study_span: list[tuple[str, str]] = []  # first and last bar of each round's study window
        self._log: list[tuple[int, np.ndarray, float, float]] = []  # bar, forecast (T,), weight, threshold

    def on_init(self) -> None:
        self._cols = [c.strip() for c in self.channels.split(",") if c.strip()]
        unknown = [c for c in self._cols if c not in Bars.COLUMNS]
        if unknown or "close" not in self._cols:
            raise EAError(
                f"ForecastEA channels {self.channels!r}: use candle columns ({', '.join(Bars.COLUMNS)}) "
                "including close"
            )
        if self.seq_len < 1 or self.pred_len < 1 or self.epochs < 0:
            raise EAError(
                f"ForecastEA needs seq_len >= 1, pred_len >= 1 and epochs >= 0, got {self.seq_len}, "
                f"{self.pred_len} and {self.epochs}"
            )
        self._step = self.horizon or self.pred_len
        if not 1 <= self._step <= self.pred_len:
            raise EAError(f"ForecastEA horizon must be in 1..pred_len={self.pred_len}, got {self.horizon}")
        if self.model not in MODELS:
            raise EAError(f"ForecastEA model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if not (0 < self.lots < math.inf and 0 <= self.cost_multiple < math.inf):
            raise EAError(
                f"ForecastEA needs lots > 0 and cost_multiple >= 0 (finite), got {self.lots} and "
                f"{self.cost_multiple}"
            )
        try:  # the network's sizes and settings, before any training
            self._size = Preset(
                self.d_model, self.n_heads, self.layers, self.d_ff, self.dropout, self.lr, self.batch_size
            ).check()
        except ForecastError as exc:
            raise EAError(f"ForecastEA {exc}") from None
        self._close = self._cols.index("close")
        self.rule = ForecastRule(self.lots, self.cost_multiple, self._step)

    def _matrix(self, bars: Bars) -> np.ndarray:
        return np.stack([getattr(bars, c) for c in self._cols], axis=1)  # (N, C)

    def on_study(self, bars: Bars) -> None:
        """Train on the study window's windows (the newest tenth validates), scaled with the statistics of
        the rows the training windows cover: the forecasting protocol's rule, as ``neuronet forecast``."""
        data = self._matrix(bars)
        need = self.seq_len + self.pred_len + 10
        if len(data) < need:
            raise EAError(f"ForecastEA needs a study window of at least {need} bars, got {len(data)}")
        windows = len(data) - self.seq_len - self.pred_len + 1
        cut = max(1, windows - max(1, windows // 10))  # chronological: the newest windows validate
        self.rounds += 1
        self._study_span.append((str(bars.time[0]), str(bars.time[-1])))
        self.scaler = Scaler.fit(data[: cut - 1 + self.seq_len + self.pred_len])
        x, y = sliding_windows(self.scaler.transform(data), self.seq_len, self.pred_len)
        size = self._size
        self.net = build_forecaster(
            self.model,
            self.seq_len,
            len(self._cols),
            self.pred_len,
            lr=self.lr,
            backend=self.nn_backend(),
            seed=self.seed,
            **layer_sizes(self.model, size),
        )
        history = train_forecaster(
            self.net,
            (x[:cut], y[:cut]),
            (x[cut:], y[cut:]) if cut < len(x) else None,
            epochs=self.epochs,
            batch_size=self.batch_size,
        )
        # The weights kept: the best validation epoch (EarlyStopping restores it), else the last one.
        scores = [r.val_loss if r.val_loss is not None else np.inf for r in history.epochs]
        kept = int(np.argmin(scores)) if np.isfinite(scores).any() else len(history.epochs) - 1
        for k, r in enumerate(history.epochs):
            self.record_epoch(
                {
                    "epoch": r.epoch + 1,
                    "kept": k == kept,
                    "loss": r.loss,
                    "val_loss": r.val_loss,
                    "wall_s": r.wall_s,
                    "device_s": r.device_s,
                    "build_s": r.build_s,
                    "backend": self.net.backend.name,
                }
            )
        self.linear = LinearBaseline().fit(x[:cut], y[:cut])

    def _forecast(self, data: np.ndarray) -> tuple[np.ndarray, float]:
        """``data (seq_len, C)`` prices -> forecast ``(pred_len, C)`` prices and the harmonic weight."""
        pred = self.scaler.inverse(self.net.predict(self.scaler.transform(data)[None], batch_size=1)[0])
        layer = self.net.layers[0]
        weight = getattr(layer, "last_weight", None)
        w = float(self.net.backend.to_numpy(weight)[0, self._close]) if weight is not None else float("nan")
        return pred, w

    def on_bar(self) -> None:
        bars = self.bars
        if self.net is None or len(bars) < self.seq_len:
            return
        pred, w = self._forecast(self._matrix(bars)[-self.seq_len :])
        path = pred[:, self._close]
        self._log.append((bars.offset + len(bars), path, w, self.rule.threshold(self)))
        trade_forecast(self, path, self.rule)

    def save_model(self, path: str) -> str | None:
        """``path.nnz``: the network with what it takes to run it anywhere (``neuronet export``): the channels
        (candle columns, in the network's order), the window, horizon and traded step, the study rows'
        scaler, the candles' symbol, timeframe, digits and server clock, and each training round's span."""
        if self.net is None or self.scaler is None:
            return None
        from nn import save

        meta = {
            **self.model_metadata(),
            "channels": list(self._cols),
            "seq_len": self.seq_len,
            "pred_len": self.pred_len,
            "horizon": self._step,
            "scaler": self.scaler.to_dict(),
            "candles": self.bars.meta.to_dict() if hasattr(self.bars.meta, "to_dict") else None,
            "study_periods": self._study_span,
            "training_rounds": self.rounds,
        }
        return str(save(self.net, f"{path}.nnz", meta))

    def evaluate_predictions(self, bars: Bars) -> dict | None:
        """Per bar: the traded direction (no trade / down / up) against the realised move to ``horizon``."""
        close = bars.close
        n = len(close)
        y_true, y_pred, y_linear = np.full(n, -1), np.full(n, -1), np.full(n, -1)
        logged = [entry for entry in self._log if entry[0] < n]
        if logged:  # the linear baseline's forecast from the same closed bars, traded by the same rule
            data = self._matrix(bars)
            hist = np.stack([data[b - self.seq_len : b] for b, _, _, _ in logged])  # (M, L, C)
            linear = self.scaler.inverse(self.linear.predict(self.scaler.transform(hist)))
        for i, (bar, path, _, threshold) in enumerate(logged):
            y_pred[bar] = _direction(path[self._step - 1] - close[bar - 1], threshold)
            y_linear[bar] = _direction(linear[i, self._step - 1, self._close] - close[bar - 1], threshold)
            if bar - 1 + self._step < n:
                y_true[bar] = _direction(close[bar - 1 + self._step] - close[bar - 1], threshold)
        return {
            "classes": ["no_trade", "down", "up"],
            "y_true": y_true,
            "y_pred": y_pred,
            "proba": None,
            "baselines": {"linear_forecast": y_linear},
            "losses": self.forecast_losses(bars),
            "loss_horizon": self.pred_len,
        }

    def forecast_losses(self, bars: Bars) -> dict[str, np.ndarray]:
        """Per bar ``(N,)``: the squared error of the close forecast made at that bar's open, averaged over
        its ``pred_len`` steps, for the model, the naive forecast (the last close) and the linear one; NaN
        where no forecast was made or its path is not complete yet. The robustness analysis bootstraps
        these for the MSE's confidence interval and compares them in the Diebold-Mariano test."""
        close, t, n = bars.close, self.pred_len, len(bars)
        out = {name: np.full(n, np.nan) for name in ("model", "naive", "linear_forecast")}
        done = [(b, p) for b, p, _, _ in self._log if b + t <= n]
        if not done:
            return out
        idx = np.array([b for b, _ in done])
        true = np.stack([close[b : b + t] for b in idx])  # (M, T)
        hist = np.stack([self._matrix(bars)[b - self.seq_len : b] for b in idx])  # (M, L, C)
        linear = self.scaler.inverse(self.linear.predict(self.scaler.transform(hist)))[:, :, self._close]
        forecasts = {
            "model": np.stack([p for _, p in done]),
            "naive": close[idx - 1][:, None],
            "linear_forecast": linear,
        }
        for name, pred in forecasts.items():
            out[name][idx] = ((pred - true) ** 2).mean(axis=1)
        return out

    def report_section(self, bars: Bars) -> ReportSection | None:
        """The report's forecast part: the data of ``forecast_section`` and its charts."""
        section = self.forecast_section(bars)
        if section is None:
            return None
        from strategies.forecast_charts import forecast_charts  # Bokeh: only when a report is written

        return ReportSection("Forecast", section, forecast_charts(section))

    def forecast_section(self, bars: Bars, examples: int = 4) -> dict | None:
        """Report data: per-horizon errors of the model, the naive and the linear forecast on every bar with a
        complete realised path — in price units (``errors``) and in standardised units (``errors_std``: the
        close scaled by the study window's deviation, the unit of published forecasting tables) — direction
        accuracy, the harmonic weight over time, and a few forecast-vs-actual paths."""
        close, t = bars.close, self.pred_len
        done = [(b, p, w) for b, p, w, _ in self._log if b + t <= len(close)]
        if not done:
            return None
        idx = np.array([b for b, _, _ in done])
        true = np.stack([close[b : b + t] for b in idx])[:, :, None]  # (M, T, 1)
        pred = np.stack([p for _, p, _ in done])[:, :, None]
        last = close[idx - 1][:, None, None]
        hist = np.stack([self._matrix(bars)[b - self.seq_len : b] for b in idx])  # (M, L, C)
        lin = self.scaler.inverse(self.linear.predict(self.scaler.transform(hist)))
        c = self._close
        models = {"model": pred, "naive": np.repeat(last, t, axis=1), "linear": lin[:, :, c : c + 1]}
        errors = {k: {m: v.tolist() for m, v in horizon_errors(p, true).items()} for k, p in models.items()}
        sd = self.scaler.std[c]  # fitted on the study window's training rows only
        errors_std = {
            k: {m: v.tolist() for m, v in horizon_errors(p / sd, true / sd).items()}
            for k, p in models.items()
        }
        picks = np.linspace(0, len(done) - 1, min(examples, len(done))).astype(int)
        times = bars.time
        return {
            "horizon_steps": list(range(1, t + 1)),
            "errors": errors,
            "errors_std": errors_std,
            "direction_accuracy": {k: direction_accuracy(models[k], true, last) for k in ("model", "linear")},
            "weight": {"time": [str(times[b]) for b in idx], "value": [w for _, _, w in done]},
            "examples": [
                {
                    "time": str(times[idx[i]]),
                    "history": close[idx[i] - self.seq_len : idx[i]].tolist(),
                    "forecast": pred[i, :, 0].tolist(),
                    "actual": true[i, :, 0].tolist(),
                }
                for i in picks
            ],
        }


@dataclass(frozen=True)
class ForecastRule:
    """How ForecastEA trades a forecast (also the rule of an exported forecaster): at a bar's open, the
    forecast move of the close from the last closed bar to ``step`` bars ahead against the cost of a round
    trip, the last closed bar's spread times ``cost_multiple``."""

    lots: float = 0.1
    cost_multiple: float = 1.0
    step: int = 24  # forecast step (1..pred_len) that sets the trade

    def threshold(self, ea: ExpertAdvisor) -> float:
        """The move (price units) a trade must beat, from the last closed bar's spread (points)."""
        return self.cost_multiple * float(ea.bars.spread[-1]) * ea.point

    def to_dict(self) -> dict:
        return asdict(self)


def trade_forecast(ea: ExpertAdvisor, path: np.ndarray, rule: ForecastRule) -> None:
    """``path (T,)``: the close forecast for the next T bars, made at this bar's open. Long when the move to
    ``rule.step`` beats the threshold, short below minus it, flat in between; a position the other way is
    closed first (one net position)."""
    move = float(path[rule.step - 1]) - float(ea.bars.close[-1])
    threshold = rule.threshold(ea)
    want = 1 if move > threshold else -1 if move < -threshold else 0
    have = int(np.sign(ea.position))
    if want == have:
        return
    if have:
        ea.close()
    if want > 0:
        ea.buy(rule.lots, comment="forecast up")
    elif want < 0:
        ea.sell(rule.lots, comment="forecast down")


def _direction(move: float, threshold: float) -> int:
    return 2 if move > threshold else 1 if move < -threshold else 0
