"""The report's charts as PNG bytes (matplotlib, Agg backend): nothing interactive to break on upgrades."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend must be chosen first
import numpy as np
import pandas as pd
from matplotlib.dates import AutoDateLocator, DateFormatter
from matplotlib.ticker import MaxNLocator

CHART_STYLE = {"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "font.size": 9}


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _dates(ax) -> None:
    """Date ticks in MetaTrader's form, few enough to read."""
    ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(DateFormatter("%Y.%m.%d"))


def balance_equity(curves: pd.DataFrame, currency: str) -> bytes:
    """Balance and equity at bar closes, and equity at each bar's worst prices (what the drawdowns use)."""
    time = curves.index.tz_localize(None)
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(10, 3.6))
        worst = curves["equity_worst"]
        ax.plot(time, worst, color="#e76f51", lw=0.6, alpha=0.7, label="equity at worst prices")
        ax.plot(time, curves["equity"], color="#2a9d8f", lw=0.9, label="equity at close")
        ax.plot(time, curves["balance"], color="#264653", lw=1.2, label="balance")
        ax.set_ylabel(currency)
        ax.set_title("Balance and equity (forward period)")
        ax.legend(loc="best")
        _dates(ax)
        return png_bytes(fig)


def drawdown(curves: pd.DataFrame, deposit: float) -> bytes:
    """The equity drawdown MetaTrader reports: from the running peak at closes to each bar's worst prices."""
    peak = np.maximum.accumulate(np.concatenate(([deposit], curves["equity"].to_numpy())))[:-1]
    dd = (curves["equity_worst"].to_numpy() - peak) / peak * 100.0
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(10, 2.4))
        ax.fill_between(curves.index.tz_localize(None), dd, 0, color="#e76f51", alpha=0.6, lw=0)
        ax.set_ylabel("%")
        ax.set_title("Equity drawdown: each bar's worst prices against the running peak")
        _dates(ax)
        return png_bytes(fig)


def _loss_panel(ax, df: pd.DataFrame) -> None:
    """Training (solid) and validation (dashed) loss, one colour per training round, the kept epoch ringed.

    One legend, outside the axes on the right, so it never hides a curve."""
    rounds = list(df.groupby("round"))
    colours = plt.get_cmap("tab10" if len(rounds) <= 10 else "tab20").colors
    many = len(rounds) > 1
    for k, (rnd, part) in enumerate(rounds):
        colour = colours[k % len(colours)]
        name = f"round {rnd}" if many else "training loss"
        ax.plot(part["epoch"], part["loss"], color=colour, marker=".", lw=1, label=name)
        if "val_loss" in part and part["val_loss"].notna().any():
            label = None if many else "validation loss"
            ax.plot(part["epoch"], part["val_loss"], color=colour, ls="--", lw=1, label=label)
        kept = part[part["kept"].fillna(False).astype(bool)] if "kept" in part else part.iloc[:0]
        for row in kept.itertuples():
            y = row.val_loss if "val_loss" in part and pd.notna(getattr(row, "val_loss", None)) else row.loss
            ax.scatter([row.epoch], [y], s=70, facecolors="none", edgecolors="k", zorder=5)
    if many and "val_loss" in df and df["val_loss"].notna().any():
        ax.plot([], [], color="0.4", ls="--", lw=1, label="validation (dashed)")
    if "kept" in df and df["kept"].fillna(False).astype(bool).any():
        ax.scatter([], [], s=70, facecolors="none", edgecolors="k", label="kept epoch")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title("Loss per epoch")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, borderaxespad=0)


def _time_panel(ax, df: pd.DataFrame) -> None:
    """Seconds per epoch: training apart from the kernel builds the first epoch of a process pays."""
    x = np.arange(1, len(df) + 1)
    wall = df["wall_s"].astype(float).to_numpy()
    build = df["build_s"].astype(float).fillna(0.0).to_numpy() if "build_s" in df else np.zeros(len(df))
    rounds = pd.factorize(df["round"])[0]
    if rounds.max() > 0:  # walk-forward: each round's epochs in that round's colour of the loss panel
        colours = plt.get_cmap("tab10" if rounds.max() < 10 else "tab20").colors
        shades = [colours[r % len(colours)] for r in rounds]
        ax.bar(x, wall - build, color=shades, label="training (by round)")
    else:
        ax.bar(x, wall - build, color="#8ab17d", label="training")
    if build.any():
        ax.bar(x, build, bottom=wall - build, color="#e9c46a", label="kernel builds")
    profiled = "device_s" in df and df["device_s"].notna().any()
    if profiled:
        ax.plot(x, df["device_s"].astype(float), color="#264653", marker=".", lw=1, label="device")
    ax.set_xlabel("epoch (all rounds)")
    ax.set_ylabel("seconds")
    note = "" if profiled else "\n(wall; device time: OpenCL with --profile)"
    ax.set_title(f"Time per epoch{note}", fontsize=9)
    ax.legend(loc="upper right", fontsize=7)


def training(epochs: list[dict]) -> bytes:
    """Loss per epoch (each training round its own colour), in-sample hit rates, and seconds per epoch."""
    df = pd.DataFrame(epochs)
    if "round" not in df:  # EAs that train once need not number their rounds
        df["round"] = 1
    rates = "train_hit_rate" in df and df["train_hit_rate"].notna().any() and df["round"].nunique() == 1
    with plt.rc_context(CHART_STYLE):
        fig, axes = plt.subplots(1, 3 if rates else 2, figsize=(12 if rates else 10, 3.4))
        _loss_panel(axes[0], df)
        if rates:
            ax = axes[1]
            for key, colour, label in (
                ("train_hit_rate", "#e9c46a", "forecast %"),
                ("train_missed_rate", "#9d0208", "undefine %"),
            ):
                ax.plot(df["epoch"], 100 * df[key].astype(float), color=colour, label=label)
            ax.set_xlabel("epoch")
            ax.set_ylabel("% of training rows")
            ax.set_title("In-sample rates (MQL5's)")
            ax.legend(loc="best", fontsize=7)
        _time_panel(axes[-1], df)
        for ax in axes:  # epochs are whole numbers, also when there are only a few
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        return png_bytes(fig)


def confusion(cm: list[list[int]], classes: list[str]) -> bytes:
    m = np.asarray(cm, dtype=float)
    with plt.rc_context({**CHART_STYLE, "axes.grid": False}):
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
        return png_bytes(fig)


def price(chart: dict, trades: pd.DataFrame, classes: list[str] | None) -> bytes:
    """The last forward bars: high/low range and close, true classes (filled), predicted (hollow), trades.

    A class named as a rise (buy, up, long) is a green up-triangle under the bar, a fall (sell, down, short)
    a red down-triangle over it, whatever its position in the EA's class list."""
    idx = chart["index"]
    x = np.arange(len(idx))  # bar positions: weekends and holidays leave no gaps
    with plt.rc_context(CHART_STYLE):
        fig, ax = plt.subplots(figsize=(10, 4.2))
        ax.vlines(x, chart["low"], chart["high"], color="#adb5bd", lw=0.8)
        ax.plot(x, chart["close"], color="#495057", lw=0.8, label="close")
        span = float(np.nanmax(chart["high"]) - np.nanmin(chart["low"])) or 1.0
        pad = span * 0.012
        if classes is not None and "y_true" in chart:
            for arr, hollow, what in ((chart["y_true"], False, "true"), (chart["y_pred"], True, "predicted")):
                off = pad * (2.2 if hollow else 1.0)
                for k, name in enumerate(classes[1:], start=1):
                    hit = arr == k
                    side = _direction(name)
                    y = chart["low"][hit] - off if side >= 0 else chart["high"][hit] + off
                    ax.scatter(
                        x[hit],
                        y,
                        marker={1: "^", -1: "v", 0: "o"}[side],
                        s=22,
                        color={1: "#2a9d8f", -1: "#e76f51", 0: "#6c757d"}[side],
                        facecolors="none" if hollow else None,
                        label=f"{what} {name}",
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
        ax.set_xticks(ticks, [f"{t:%Y.%m.%d %H:%M}" for t in stamps], rotation=15)
        ax.set_ylabel("price (bid)")
        what = f"true and predicted {'/'.join(classes[1:])}, " if classes is not None else ""
        ax.set_title(f"Price, {what}trades (last {len(x)} forward bars)")
        ax.legend(loc="best", fontsize=7, ncol=3)
        return png_bytes(fig)


def _direction(name: str) -> int:
    """+1 for a class that means a rise, -1 for a fall, 0 for anything else."""
    word = name.lower()
    return 1 if word in ("buy", "up", "long") else -1 if word in ("sell", "down", "short") else 0


def trade_breakdown(trades: pd.DataFrame, currency: str = "") -> bytes:
    """MetaTrader's trade views: net profit by entry hour and weekday, MAE/MFE against the result, and
    holding times in bars."""
    entry = pd.DatetimeIndex(trades["entry_time"])
    net = trades["net_profit"].to_numpy(dtype=float)
    with plt.rc_context(CHART_STYLE):
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
        return png_bytes(fig)
