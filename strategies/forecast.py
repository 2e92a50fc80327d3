"""Forecasting with ATFNet/PatchTST: sliding windows, honest baselines and error metrics, and ``ForecastEA``.

The helpers implement the long-horizon forecasting protocol of the ATFNet paper (and of the DLinear/PatchTST
line of work): windows of ``seq_len`` past points predict the next ``pred_len`` points of every channel.
Every model is reported next to two baselines, because on financial series the naive forecast is hard to
beat (on the daily Exchange-rate benchmark it ties or beats most deep models):
- naive: repeat the last known value over the whole horizon;
- linear: the best linear map from the ``seq_len`` past points to the ``pred_len`` future points, shared by
  all channels, fitted by least squares on the training windows. DLinear (Zeng et al. 2023) is a linear map
  of exactly this kind (trend + remainder, each mapped linearly), so its class is covered and the least-
  squares fit is the best of it on the training data.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nn import get_backend
from nn.atfnet import ATFNet, PatchTST
from nn.callbacks import EarlyStopping
from nn.model import Sequential
from strategies.base import Bars, ExpertAdvisor, ReportSection

log = logging.getLogger(__name__)


# --- data ----------------------------------------------------------------------------------------------
def sliding_windows(
    data: np.ndarray, seq_len: int, pred_len: int, start: int = 0, stop: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``data (N, C)`` rows ``[start, stop)`` -> ``X (M, seq_len, C)``, ``Y (M, pred_len, C)``.

    Window ``m`` sees rows ``start+m .. start+m+seq_len-1`` and targets the next ``pred_len`` rows;
    ``M = stop − start − seq_len − pred_len + 1`` (0 when the span is too short).
    """
    stop = len(data) if stop is None else stop
    m = stop - start - seq_len - pred_len + 1
    c = data.shape[1]
    if m <= 0:
        return np.zeros((0, seq_len, c)), np.zeros((0, pred_len, c))
    span = data[start:stop]
    win = np.lib.stride_tricks.sliding_window_view(span, seq_len + pred_len, axis=0)  # (M, C, L+T)
    win = np.transpose(win[:m], (0, 2, 1))  # (M, L+T, C)
    return np.ascontiguousarray(win[:, :seq_len]), np.ascontiguousarray(win[:, seq_len:])


def naive_forecast(x: np.ndarray, pred_len: int) -> np.ndarray:
    """``x (M, L, C)`` -> ``(M, pred_len, C)``: the last known value repeated."""
    return np.repeat(x[:, -1:, :], pred_len, axis=1)


class LinearBaseline:
    """Least-squares linear forecaster ``y = W·x + b`` (``x`` of L points -> T points), one map for all
    channels; a tiny ridge term (``l2``) keeps the normal equations well conditioned."""

    def __init__(self, l2: float = 1e-6) -> None:
        self.l2 = l2
        self.coef: np.ndarray | None = None  # (L + 1, T)

    def fit(self, x: np.ndarray, y: np.ndarray) -> LinearBaseline:
        a = _rows(x)  # (M·C, L + 1)
        t = np.transpose(y, (0, 2, 1)).reshape(-1, y.shape[1])  # (M·C, T)
        gram = a.T @ a + self.l2 * len(a) * np.eye(a.shape[1])
        self.coef = np.linalg.solve(gram, a.T @ t)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.coef is None:
            raise ValueError("LinearBaseline.predict: call fit first")
        m, _, c = x.shape
        return np.transpose((_rows(x) @ self.coef).reshape(m, c, -1), (0, 2, 1))  # (M, T, C)


def _rows(x: np.ndarray) -> np.ndarray:
    m, length, c = x.shape
    flat = np.transpose(x, (0, 2, 1)).reshape(m * c, length)  # (M·C, L): one row per series
    return np.hstack([flat, np.ones((m * c, 1))])


def horizon_errors(pred: np.ndarray, true: np.ndarray) -> dict[str, np.ndarray]:
    """Per-horizon MSE and MAE ``(T,)`` over windows and channels of ``(M, T, C)`` arrays."""
    err = pred - true
    return {"mse": (err**2).mean(axis=(0, 2)), "mae": np.abs(err).mean(axis=(0, 2))}


def direction_accuracy(pred: np.ndarray, true: np.ndarray, last: np.ndarray) -> float:
    """Share of (window, step, channel) where the forecast move from the last known value has the sign of
    the actual move; steps where the actual value equals the last value are left out. ``last (M, 1, C)``."""
    actual = np.sign(true - last)
    mask = actual != 0
    if not mask.any():
        return float("nan")
    return float((np.sign(pred - last)[mask] == actual[mask]).mean())


# --- models ----------------------------------------------------------------------------------------------
MODELS = ("atfnet", "patchtst")


def build_forecaster(
    model: str,
    seq_len: int,
    channels: int,
    pred_len: int,
    *,
    lr: float = 1e-4,
    backend: str = "opencl",
    seed: int = 0,
    **sizes: Any,
) -> Sequential:
    """A compiled ATFNet or PatchTST model ``(seq_len, C) -> (pred_len, C)`` trained with MSE and Adam whose
    learning rate halves every epoch (the official ``type1`` schedule). ``sizes``: the layer's keywords."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: expected one of {', '.join(MODELS)}")
    kind = ATFNet if model == "atfnet" else PatchTST
    layer = kind(pred_len, seed=seed, **sizes)
    optimizer = {"type": "adam", "lr": lr, "schedule": {"type": "step", "step_size": 1, "gamma": 0.5}}
    return Sequential([layer], (seq_len, channels), "mse", optimizer, get_backend(backend), seed)


def train_forecaster(
    net: Sequential,
    train: tuple[np.ndarray, np.ndarray],
    val: tuple[np.ndarray, np.ndarray] | None,
    *,
    epochs: int,
    batch_size: int,
    patience: int = 3,
    progress: bool = False,
    callbacks: tuple = (),
):
    """Fit with early stopping on the validation loss (best weights restored), as the paper's protocol."""
    hooks = list(callbacks)
    if val is not None:
        hooks.append(EarlyStopping("val_loss", patience, restore_best=True))
    return net.fit(
        *train, epochs=epochs, batch_size=batch_size, validation_data=val, callbacks=hooks, progress=progress
    )


# --- the expert advisor -------------------------------------------------------------------------------
class ForecastEA(ExpertAdvisor):
    """Trades the direction of an ATFNet (or PatchTST) forecast of the next ``pred_len`` bars.

    ``on_study`` standardises the ``channels`` with the study window's own mean and deviation (never later
    bars), trains on every window of the study period (the last 10% of windows for early stopping) and fits
    the linear baseline. At each bar's open the model forecasts the closes of the next ``pred_len`` bars from
    the last ``seq_len`` closed bars; the move to step ``horizon`` (default: the last step) is compared with
    the cost of a round trip (the current spread, times ``cost_multiple``): long above it, short below minus
    it, flat in between. The position is reversed or closed when the decision changes.
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

    def on_init(self) -> None:
        self._cols = [c.strip() for c in self.channels.split(",") if c.strip()]
        unknown = [c for c in self._cols if c not in Bars.COLUMNS]
        if unknown or "close" not in self._cols:
            raise ValueError(
                f"ForecastEA channels {self.channels!r}: use candle columns ({', '.join(Bars.COLUMNS)}) "
                "including close"
            )
        self._step = self.horizon or self.pred_len
        if not 1 <= self._step <= self.pred_len:
            raise ValueError(f"ForecastEA horizon must be in 1..pred_len={self.pred_len}, got {self.horizon}")
        self._close = self._cols.index("close")
        self._log: list[tuple[int, np.ndarray, float, float]] = []  # bar, forecast (T,), weight, threshold
        self.model: Sequential | None = None

    def _matrix(self, bars: Bars) -> np.ndarray:
        return np.stack([getattr(bars, c) for c in self._cols], axis=1)  # (N, C)

    def on_study(self, bars: Bars) -> None:
        data = self._matrix(bars)
        need = self.seq_len + self.pred_len + 10
        if len(data) < need:
            raise ValueError(f"ForecastEA needs a study window of at least {need} bars, got {len(data)}")
        self._mean, self._std = data.mean(axis=0), data.std(axis=0) + 1e-12
        x, y = sliding_windows((data - self._mean) / self._std, self.seq_len, self.pred_len)
        cut = max(1, len(x) - max(1, len(x) // 10))  # chronological: the newest windows validate
        sizes = dict(
            d_model=self.d_model,
            n_heads=self.n_heads,
            e_layers=self.layers,
            d_ff=self.d_ff,
            dropout=self.dropout,
        )
        if self.model == "atfnet":
            sizes |= dict(
                fnet_d_model=self.d_model,
                fnet_d_ff=self.d_ff,
                fnet_layers=self.layers,
                complex_dropout=self.dropout,
            )
        self.model = build_forecaster(
            self.model,
            self.seq_len,
            len(self._cols),
            self.pred_len,
            lr=self.lr,
            backend=self.backend,
            seed=self.seed,
            **sizes,
        )
        history = train_forecaster(
            self.model,
            (x[:cut], y[:cut]),
            (x[cut:], y[cut:]) if cut < len(x) else None,
            epochs=self.epochs,
            batch_size=self.batch_size,
        )
        for r in history.epochs:
            self.record_epoch(
                {
                    "epoch": r.epoch,
                    "loss": r.loss,
                    "val_loss": r.val_loss,
                    "wall_s": r.wall_s,
                    "device_s": r.device_s,
                }
            )
        self.linear = LinearBaseline().fit(x, y)

    def _forecast(self, data: np.ndarray) -> tuple[np.ndarray, float]:
        """``data (seq_len, C)`` prices -> forecast ``(pred_len, C)`` prices and the harmonic weight."""
        z = ((data - self._mean) / self._std)[None]
        pred = self.model.predict(z, batch_size=1)[0] * self._std + self._mean
        layer = self.model.layers[0]
        weight = getattr(layer, "last_weight", None)
        w = float(self.model.backend.to_numpy(weight)[0, self._close]) if weight is not None else float("nan")
        return pred, w

    def on_bar(self) -> None:
        bars = self.bars
        if self.model is None or len(bars) < self.seq_len:
            return
        pred, w = self._forecast(self._matrix(bars)[-self.seq_len :])
        last = float(bars.close[-1])
        threshold = self.cost_multiple * float(bars.spread[-1]) * self.point
        self._log.append((bars.offset + len(bars), pred[:, self._close], w, threshold))
        move = pred[self._step - 1, self._close] - last
        want = 1 if move > threshold else -1 if move < -threshold else 0
        have = int(np.sign(self.position))
        if want == have:
            return
        if have:
            self.close()
        if want > 0:
            self.buy(self.lots, comment="forecast up")
        elif want < 0:
            self.sell(self.lots, comment="forecast down")

    def evaluate_predictions(self, bars: Bars) -> dict | None:
        """Per bar: the traded direction (no trade / down / up) against the realised move to ``horizon``."""
        close = bars.close
        n = len(close)
        y_true, y_pred = np.full(n, -1), np.full(n, -1)
        for bar, path, _, threshold in self._log:
            y_pred[bar] = _direction(path[self._step - 1] - close[bar - 1], threshold)
            if bar - 1 + self._step < n:
                y_true[bar] = _direction(close[bar - 1 + self._step] - close[bar - 1], threshold)
        return {"classes": ["no_trade", "down", "up"], "y_true": y_true, "y_pred": y_pred, "proba": None}

    def report_section(self, bars: Bars) -> ReportSection | None:
        """The report's forecast part: the data of ``forecast_section`` and its charts."""
        section = self.forecast_section(bars)
        if section is None:
            return None
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
        lin = self.linear.predict((hist - self._mean) / self._std) * self._std + self._mean
        c = self._close
        models = {"model": pred, "naive": np.repeat(last, t, axis=1), "linear": lin[:, :, c : c + 1]}
        errors = {k: {m: v.tolist() for m, v in horizon_errors(p, true).items()} for k, p in models.items()}
        sd = float(self._std[c])  # fitted on the study window only
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


def _direction(move: float, threshold: float) -> int:
    return 2 if move > threshold else 1 if move < -threshold else 0


def forecast_charts(section: dict) -> dict[str, bytes]:
    """PNG charts of a ``ForecastEA.forecast_section``: forecast vs actual paths, per-horizon error of the
    model and both baselines, the harmonic weight over time (ATFNet only)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def png(fig) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        return buf.getvalue()

    charts: dict[str, bytes] = {}
    examples = section["examples"]
    fig, axes = plt.subplots(1, len(examples), figsize=(3.2 * len(examples), 2.6), squeeze=False)
    for ax, ex in zip(axes[0], examples, strict=True):
        n, t = len(ex["history"]), len(ex["actual"])
        ax.plot(range(n), ex["history"], color="0.5", lw=1)
        ax.plot(range(n, n + t), ex["actual"], color="k", lw=1, label="actual")
        ax.plot(range(n, n + t), ex["forecast"], color="tab:blue", lw=1.2, label="forecast")
        ax.set_title(ex["time"][:16], fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    charts["forecast_vs_actual"] = png(fig)
    fig, ax = plt.subplots(figsize=(6, 3))
    for name, err in section["errors"].items():
        ax.plot(section["horizon_steps"], err["mae"], label=name)
    ax.set_xlabel("bars ahead")
    ax.set_ylabel("MAE (price)")
    ax.legend(fontsize=8)
    charts["horizon_error"] = png(fig)
    values = np.asarray(section["weight"]["value"], dtype=np.float64)
    if np.isfinite(values).any():
        fig, ax = plt.subplots(figsize=(6, 2.5))
        ax.plot(_times(section["weight"]["time"]), values, lw=0.8)
        ax.set_ylabel("harmonic weight w")
        ax.set_ylim(0, 1)
        charts["harmonic_weight"] = png(fig)
    return charts


def _times(texts: list[str]) -> np.ndarray:
    """ISO timestamps as numpy datetimes (timezone dropped) for plotting."""
    return np.array([t[:19] for t in texts], dtype="datetime64[s]")
