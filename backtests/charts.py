"""The report's charts as PNG bytes (matplotlib, Agg backend): nothing interactive to break on upgrades."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend must be chosen first
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

_STYLE = {"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "font.size": 9}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def balance_equity(time: pd.DatetimeIndex, balance: np.ndarray, equity: np.ndarray, currency: str) -> bytes:
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(10, 3.6))
        ax.plot(time, equity, color="#2a9d8f", lw=0.9, label="equity")
        ax.plot(time, balance, color="#264653", lw=1.2, label="balance")
        ax.set_ylabel(currency)
        ax.set_title("Balance and equity (forward period)")
        ax.legend(loc="best")
        return _png(fig)


def drawdown(time: pd.DatetimeIndex, equity: np.ndarray, deposit: float) -> bytes:
    peak = np.maximum.accumulate(np.concatenate(([deposit], equity)))[1:]
    dd = (equity - peak) / peak * 100.0
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(10, 2.4))
        ax.fill_between(time, dd, 0, color="#e76f51", alpha=0.6, lw=0)
        ax.set_ylabel("%")
        ax.set_title("Equity drawdown from the running peak")
        return _png(fig)


def training(epochs: list[dict]) -> bytes:
    """Loss per epoch (each training round its own line) and wall/device seconds per epoch."""
    df = pd.DataFrame(epochs)
    if "round" not in df:  # EAs that train once need not number their rounds
        df["round"] = 1
    with plt.rc_context(_STYLE):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.2))
        for rnd, part in df.groupby("round"):
            label = f"round {rnd}" if df["round"].nunique() > 1 else "training loss"
            a1.plot(part["epoch"], part["loss"], marker=".", lw=1, label=label)
            if "val_loss" in part and part["val_loss"].notna().any():
                a1.plot(part["epoch"], part["val_loss"], ls="--", lw=1, label=f"{label} (validation)")
        if "train_hit_rate" in df and df["train_hit_rate"].notna().any() and df["round"].nunique() == 1:
            twin = a1.twinx()
            twin.plot(
                df["epoch"],
                100 * df["train_hit_rate"].astype(float),
                color="#e9c46a",
                lw=1,
                label="forecast %",
            )
            twin.plot(
                df["epoch"],
                100 * df["train_missed_rate"].astype(float),
                color="#9d0208",
                lw=1,
                label="undefine %",
            )
            twin.set_ylabel("% (in-sample)")
            twin.grid(False)
            handles, labels = a1.get_legend_handles_labels()
            more, names = twin.get_legend_handles_labels()
            # One legend where the curves rarely are: losses fall low, the hit rate climbs high.
            twin.legend(handles + more, labels + names, loc="center right", fontsize=7)
        else:
            a1.legend(loc="best")
        a1.set_xlabel("epoch")
        a1.set_ylabel("training loss")
        a1.set_title("Loss per epoch")
        x = np.arange(1, len(df) + 1)
        a2.bar(x, df["wall_s"], color="#8ab17d", label="wall")
        profiled = "device_s" in df and df["device_s"].notna().any()
        if profiled:
            a2.plot(x, df["device_s"].astype(float), color="#264653", marker=".", lw=1, label="device")
        for ax in (a1, a2):  # epochs are whole numbers, also when there are only a few
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        a2.set_xlabel("epoch (all rounds)")
        a2.set_ylabel("seconds")
        note = "" if profiled else " (wall; device time: OpenCL with --profile)"
        a2.set_title(f"Time per epoch{note}")
        a2.legend(loc="best")
        return _png(fig)


def confusion(cm: list[list[int]], classes: list[str]) -> bytes:
    m = np.asarray(cm, dtype=float)
    with plt.rc_context({**_STYLE, "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(4.2, 3.6))
        ax.imshow(m, cmap="Blues")
        rows = m.sum(axis=1, keepdims=True)
        share = np.divide(m, rows, out=np.zeros_like(m), where=rows > 0)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                colour = "white" if m[i, j] > m.max() / 2 else "black"
                # count, and its share of the true class (the row): the recall sits on the diagonal
                ax.text(j, i, f"{int(m[i, j])}\n{share[i, j]:.0%}", ha="center", va="center", color=colour)
        ax.set_xticks(range(len(classes)), classes)
        ax.set_yticks(range(len(classes)), classes)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title("Confusion matrix (forward; % of true row)")
        return _png(fig)


def price(chart: dict, trades: pd.DataFrame, classes: list[str] | None) -> bytes:
    """The last forward bars: high/low range and close, true fractals (filled), predicted (hollow), trades."""
    idx = chart["index"]
    x = np.arange(len(idx))  # bar positions: weekends and holidays leave no gaps
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(10, 4.2))
        ax.vlines(x, chart["low"], chart["high"], color="#adb5bd", lw=0.8)
        ax.plot(x, chart["close"], color="#495057", lw=0.8, label="close")
        span = float(np.nanmax(chart["high"]) - np.nanmin(chart["low"])) or 1.0
        pad = span * 0.012
        if classes is not None and "y_true" in chart:
            for arr, hollow, what in ((chart["y_true"], False, "true"), (chart["y_pred"], True, "predicted")):
                off = pad * (2.2 if hollow else 1.0)
                buy, sell = arr == 1, arr == 2
                face = "none" if hollow else None
                ax.scatter(
                    x[buy],
                    chart["low"][buy] - off,
                    marker="^",
                    s=22,
                    color="#2a9d8f",
                    facecolors=face,
                    label=f"{what} {classes[1]}",
                )
                ax.scatter(
                    x[sell],
                    chart["high"][sell] + off,
                    marker="v",
                    s=22,
                    color="#e76f51",
                    facecolors=face,
                    label=f"{what} {classes[2]}",
                )
        if len(trades):
            first, last = int(idx[0]), int(idx[-1])
            inside = trades[(trades.entry_bar >= first) & (trades.entry_bar <= last)]
            shown: set[str] = set()
            for row in inside.itertuples():
                colour = "#1d3557" if row.type == "buy" else "#9d0208"
                xs = [row.entry_bar - first, min(row.exit_bar, last) - first]
                label = None if row.type in shown else f"{row.type} trade (entry ●, exit ×)"
                shown.add(row.type)
                ax.plot(xs, [row.entry_price, row.exit_price], color=colour, lw=1.2, label=label)
                ax.scatter(xs[:1], [row.entry_price], marker="o", s=14, color=colour)
                ax.scatter(xs[1:], [row.exit_price], marker="x", s=18, color=colour)
        ticks = np.linspace(0, len(x) - 1, min(8, len(x))).astype(int)
        stamps = pd.DatetimeIndex(chart["time"])[ticks]
        ax.set_xticks(ticks, [f"{t:%Y-%m-%d %H:%M}" for t in stamps], rotation=15)
        ax.set_ylabel("price (bid)")
        ax.set_title(f"Price, fractals and trades (last {len(x)} forward bars)")
        ax.legend(loc="best", fontsize=7, ncol=3)
        return _png(fig)


def trade_breakdown(trades: pd.DataFrame, currency: str = "") -> bytes:
    """MetaTrader's trade views: net profit by entry hour and weekday, MAE/MFE against the result, and
    holding times in bars."""
    entry = pd.DatetimeIndex(trades["entry_time"])
    net = trades["net_profit"].to_numpy(dtype=float)
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(2, 2, figsize=(10, 5.6))
        for ax, key, labels, title in (
            (axes[0, 0], entry.hour, [str(h) for h in range(24)], "Net profit by entry hour (UTC)"),
            (
                axes[0, 1],
                entry.day_of_week,
                ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
                "Net profit by entry weekday (UTC)",
            ),
        ):
            sums = pd.Series(net).groupby(np.asarray(key)).sum().reindex(range(len(labels)), fill_value=0.0)
            ax.bar(range(len(labels)), sums.to_numpy(), color=np.where(sums >= 0, "#2a9d8f", "#e76f51"))
            ax.set_xticks(range(len(labels)), labels, fontsize=7)
            ax.set_ylabel(f"net profit {currency}".strip())
            ax.set_title(title)
        ax = axes[1, 0]
        ax.scatter(trades["mae"], net, s=8, color="#e76f51", alpha=0.6, label="MAE")
        ax.scatter(trades["mfe"], net, s=8, color="#2a9d8f", alpha=0.6, label="MFE")
        ax.set_xlabel(f"excursion while open {currency}".strip())
        ax.set_ylabel(f"net profit {currency}".strip())
        ax.set_title("MAE / MFE against the result")
        ax.legend(loc="best")
        ax = axes[1, 1]
        held = (trades["exit_bar"] - trades["entry_bar"]).to_numpy()
        ax.hist(held, bins=min(40, max(5, len(np.unique(held)))), color="#8ab17d")
        ax.set_xlabel("bars held")
        ax.set_ylabel("trades")
        ax.set_title("Holding time")
        return _png(fig)
