"""Report figures: MetaTrader 5 Strategy Tester fields, the annualised figures of Python peers, and
prediction metrics on the forward period against trivial baselines.

Every function returns plain floats/ints/None (never NaN or inf) so the result serialises to JSON as is.
Money figures are in the deposit currency; trade figures use each trade's net profit (commission and swap
included), the way MetaTrader's report totals them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _num(x: float | None, digits: int = 6) -> float | None:
    """JSON-safe float: None for NaN/inf."""
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


def _count(x: float) -> int | float:
    """Counts stay integers; expected counts of a random baseline are fractional and stay floats."""
    x = float(x)
    return int(x) if x.is_integer() else round(x, 3)


def _ratio(a: float, b: float) -> float | None:
    return _num(a / b) if b else None


def drawdowns(curve: np.ndarray, deposit: float) -> dict:
    """MetaTrader's three drawdowns of a balance or equity curve.

    absolute: deposit minus the lowest value below it; maximal: largest peak-to-trough fall in money (with
    its percentage of the peak); relative: largest fall in percent (with its money), which may come from a
    different fall than the maximal one.
    """
    if len(curve) == 0:
        return {"absolute": 0.0, "maximal": 0.0, "maximal_pct": 0.0, "relative_pct": 0.0, "relative": 0.0}
    peak = np.maximum.accumulate(np.concatenate(([deposit], curve)))[1:]
    fall = peak - curve
    pct = np.where(peak > 0, fall / peak * 100.0, 0.0)
    i_max, i_rel = int(np.argmax(fall)), int(np.argmax(pct))
    return {
        "absolute": _num(max(0.0, deposit - float(curve.min()))),
        "maximal": _num(fall[i_max]),
        "maximal_pct": _num(pct[i_max]),
        "relative_pct": _num(pct[i_rel]),
        "relative": _num(fall[i_rel]),
    }


def streaks(profits: np.ndarray) -> dict:
    """Runs of winning (> 0) and losing (<= 0) trades: longest by count and by money, and average lengths.

    Each run's money is summed in trade order (as Python's ``sum`` of the run), for all runs at once; of
    runs that tie, the first one counts."""
    values = np.asarray(profits, dtype=np.float64)
    won = values > 0
    starts = (
        np.flatnonzero(np.concatenate(([True], won[1:] != won[:-1])))
        if len(values)
        else np.zeros(0, dtype=np.int64)
    )
    counts = np.diff(np.append(starts, len(values)))
    money = np.zeros(len(starts))
    for k in range(int(counts.max()) if len(counts) else 0):  # the k-th trade of every run that long
        longer = counts > k
        money[longer] += values[starts[longer] + k]
    kind = won[starts]
    wins, losses = (np.flatnonzero(kind == w) for w in (True, False))
    longest_w = _first(wins, counts, money, lambda c, m: (c == c.max()) & (m == m[c == c.max()].max()))
    longest_l = _first(losses, counts, money, lambda c, m: (c == c.max()) & (m == m[c == c.max()].min()))
    richest_w = _first(wins, counts, money, lambda c, m: m == m.max())
    poorest_l = _first(losses, counts, money, lambda c, m: m == m.min())
    return {
        "max_consecutive_wins": longest_w[0],
        "max_consecutive_wins_money": _num(longest_w[1]),
        "max_consecutive_losses": longest_l[0],
        "max_consecutive_losses_money": _num(longest_l[1]),
        "maximal_consecutive_profit": _num(richest_w[1]),
        "maximal_consecutive_profit_count": richest_w[0],
        "maximal_consecutive_loss": _num(poorest_l[1]),
        "maximal_consecutive_loss_count": poorest_l[0],
        "average_consecutive_wins": _num(np.mean(counts[wins])) if len(wins) else 0.0,
        "average_consecutive_losses": _num(np.mean(counts[losses])) if len(losses) else 0.0,
        "runs": len(starts),
    }


def _first(runs: np.ndarray, counts: np.ndarray, money: np.ndarray, best) -> tuple[int, float]:
    """(count, money) of the first of ``runs`` that ``best(counts, money)`` (over those runs) marks;
    (0, 0.0) without runs."""
    if not len(runs):
        return 0, 0.0
    i = runs[int(np.argmax(best(counts[runs], money[runs])))]
    return int(counts[i]), float(money[i])


def _z_score(profits: np.ndarray, runs: int) -> tuple[float | None, float | None]:
    """Runs test on the win/loss sequence; the probability is the two-sided normal confidence in percent."""
    n = len(profits)
    w = int((profits > 0).sum())
    lo = n - w
    p = 2.0 * w * lo
    if n < 2 or w == 0 or lo == 0 or p - n <= 0:
        return None, None
    z = (n * (runs - 0.5) - p) / math.sqrt(p * (p - n) / (n - 1))
    prob = math.erf(abs(z) / math.sqrt(2.0)) * 100.0
    return _num(z, 4), _num(prob, 2)


def _hpr(net: np.ndarray, deposit: float) -> dict:
    """Per-trade holding-period returns: AHPR, GHPR and MetaTrader's per-trade Sharpe ratio."""
    if len(net) == 0:
        return {"ahpr": None, "ghpr": None, "sharpe_ratio": None}
    after = deposit + np.cumsum(net)
    before = np.concatenate(([deposit], after[:-1]))
    hpr = np.where(before > 0, after / before, np.nan)
    ahpr = float(np.nanmean(hpr))
    ghpr = float(np.exp(np.nanmean(np.log(hpr)))) if np.all(hpr > 0) else None
    sd = float(np.nanstd(hpr))
    return {
        "ahpr": _num(ahpr),
        "ghpr": _num(ghpr),
        "sharpe_ratio": _ratio(ahpr - 1.0, sd) if sd > 1e-15 else None,
    }


def _balance_fit(net: np.ndarray, deposit: float) -> dict:
    """The balance graph's least-squares line: its correlation and standard error."""
    if len(net) == 0:
        return {"lr_correlation": None, "lr_standard_error": None}
    # MetaTrader's balance graph starts at the deposit: x = 0..n, y = deposit, balance after each trade.
    y = np.concatenate(([deposit], deposit + np.cumsum(net)))
    x = np.arange(len(y), dtype=np.float64)
    slope, icept = np.polyfit(x, y, 1)
    resid = y - (slope * x + icept)
    return {
        "lr_correlation": _num(np.corrcoef(x, y)[0, 1]) if y.std() > 0 else None,
        "lr_standard_error": _num(math.sqrt(float(resid @ resid) / (len(y) - 2))) if len(y) > 2 else None,
    }


def equity_drawdowns(equity: np.ndarray, worst: np.ndarray, deposit: float) -> dict:
    """MetaTrader's equity drawdowns on the path a bar's prices allow: in each bar the worst moment (every
    position at its worst price) comes before the close, peaks are reached at closes."""
    path = np.column_stack((worst, equity)).reshape(-1)  # (2F,): worst_0, close_0, worst_1, close_1, ...
    return drawdowns(path, deposit)


def trade_stats(
    trades: pd.DataFrame,
    curves: pd.DataFrame,
    *,
    deposit: float,
    deals: int,
    contract_size: float,
    equity_dd: dict | None = None,
) -> dict:
    """Every MetaTrader report field that bar data supports, backtesting.py's ``stats`` and the annualised
    figures on trading days, from the closed trades and the report's curve (``scoring.Curve.frame``), in
    the order of ``backtests.statistics.TABLE``. The equity drawdowns are ``equity_dd``
    (``backtests.equity_path``: on every price the mode models) where given, else estimated from the curve
    (peaks at closes, troughs at each bar's worst prices). ``backtests.scoring`` computes them, group by
    group."""
    from backtests.scoring import Curve, Inputs, TradeColumns, score

    inputs = Inputs(
        TradeColumns.of_frame(trades), Curve.of_frame(curves),
        deposit=deposit, deals=deals, contract_size=contract_size, equity_dd=equity_dd,
    )  # fmt: skip
    return score(inputs)


# -- the MetaTrader figures by group (``backtests.scoring``), each a function of a run's ``Inputs`` --------


def _span(i) -> dict:
    times = i.curve.time
    return {"start": str(times[0]), "end": str(times[-1]), "bars": len(times) - 1,
            "initial_deposit": _num(i.deposit, 2)}  # fmt: skip


def _money(i) -> dict:
    net = i.net
    wins, losses = net[net > 0], net[net <= 0]
    gross_profit, gross_loss = float(wins.sum()), float(losses.sum())
    return {
        "total_net_profit": _num(net.sum(), 2),
        "gross_profit": _num(gross_profit, 2),
        "gross_loss": _num(gross_loss, 2),
        "profit_factor": _ratio(gross_profit, -gross_loss),
        "expected_payoff": _ratio(float(net.sum()), len(net)),
    }


def _recovery(i) -> dict:
    return {"recovery_factor": _ratio(float(i.net.sum()), i.balance_dd["maximal"] or 0.0)}


def _final(i) -> dict:
    return {"final_balance": _num(i.curve.balance[-1], 2), "final_equity": _num(i.curve.equity[-1], 2)}


def _margin(i) -> dict:
    level = i.curve.margin_level
    return {"margin_level_min_pct": _num(np.nanmin(level), 2) if np.isfinite(level).any() else None}


def _z(i) -> dict:
    z, prob = _z_score(i.net, i.streaks["runs"])
    return {"z_score": z, "z_score_probability_pct": prob}


def _counts(i) -> dict:
    net, long_ = i.net, i.trades.buy
    wins, losses = net[net > 0], net[net <= 0]
    n = len(net)
    return {
        "total_trades": n,
        "total_deals": int(i.deals),
        "short_trades": int((~long_).sum()),
        "short_won_pct": _ratio(100.0 * float(((~long_) & (net > 0)).sum()), int((~long_).sum())),
        "long_trades": int(long_.sum()),
        "long_won_pct": _ratio(100.0 * float((long_ & (net > 0)).sum()), int(long_.sum())),
        "profit_trades": len(wins),
        "profit_trades_pct": _ratio(100.0 * len(wins), n),
        "loss_trades": len(losses),
        "loss_trades_pct": _ratio(100.0 * len(losses), n),
        "largest_profit_trade": _num(wins.max(), 2) if len(wins) else None,
        "largest_loss_trade": _num(losses.min(), 2) if len(losses) else None,
        "average_profit_trade": _num(wins.mean(), 2) if len(wins) else None,
        "average_loss_trade": _num(losses.mean(), 2) if len(losses) else None,
    }


def _costs(i) -> dict:
    n = len(i.net)
    return {
        "commission": _num(i.trades.commission.sum(), 2) if n else 0.0,
        "swap": _num(i.trades.swap.sum(), 2) if n else 0.0,
    }


_COUNT_KEYS = ("total_trades", "total_deals", "short_trades", "short_won_pct", "long_trades", "long_won_pct",
               "profit_trades", "profit_trades_pct", "loss_trades", "loss_trades_pct", "largest_profit_trade",
               "largest_loss_trade", "average_profit_trade", "average_loss_trade")  # fmt: skip
_STREAK_KEYS = ("max_consecutive_wins", "max_consecutive_wins_money", "max_consecutive_losses",
                "max_consecutive_losses_money", "maximal_consecutive_profit",
                "maximal_consecutive_profit_count", "maximal_consecutive_loss",
                "maximal_consecutive_loss_count", "average_consecutive_wins",
                "average_consecutive_losses")  # fmt: skip
_DD = ("absolute", "maximal", "maximal_pct", "relative_pct", "relative")


def _drawdown_group(prefix: str, which: str) -> tuple:
    return (tuple(f"{prefix}_drawdown_{k}" for k in _DD),
            lambda i: {f"{prefix}_drawdown_{k}": getattr(i, which)[k] for k in _DD})  # fmt: skip


# (keys, function of ``backtests.scoring.Inputs``): the MetaTrader figures, each computed by one group.
GROUPS = (
    (("start", "end", "bars", "initial_deposit"), _span),
    (("total_net_profit", "gross_profit", "gross_loss", "profit_factor", "expected_payoff"), _money),
    (("recovery_factor",), _recovery),
    (("final_balance", "final_equity"), _final),
    _drawdown_group("balance", "balance_dd"),
    _drawdown_group("equity", "equity_dd"),
    (("margin_level_min_pct",), _margin),
    (("z_score", "z_score_probability_pct"), _z),
    (("ahpr", "ghpr", "sharpe_ratio"), lambda i: _hpr(i.net, i.deposit)),
    (("lr_correlation", "lr_standard_error"), lambda i: _balance_fit(i.net, i.deposit)),
    (_COUNT_KEYS, _counts),
    (_STREAK_KEYS, lambda i: {k: i.streaks[k] for k in _STREAK_KEYS}),
    (("commission", "swap"), _costs),
)


# -- predictions ------------------------------------------------------------------------------------------


def _scores(cm: np.ndarray, classes: list[str]) -> dict:
    """Scores of a (C, C) confusion matrix (rows true, columns predicted); class 0 means "no signal"."""
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    diag = np.diag(cm)
    per_class = {}
    recalls = []
    for k, name in enumerate(classes):
        p = diag[k] / predicted[k] if predicted[k] > 0 else None
        r = diag[k] / support[k] if support[k] > 0 else None
        both = p is not None and r is not None
        f1 = (2 * p * r / (p + r) if p + r > 0 else 0.0) if both else None
        per_class[name] = {
            "precision": _num(p),
            "recall": _num(r),
            "f1": _num(f1),
            "support": _count(support[k]),
        }
        if r is not None:
            recalls.append(r)
    total = cm.sum()
    signals = predicted[1:].sum()
    real = support[1:].sum()
    return {
        "accuracy": _num(diag.sum() / total) if total else None,
        "balanced_accuracy": _num(np.mean(recalls)) if recalls else None,
        "per_class": per_class,
        # The EA's own figures: share of emitted signals that were right, share of real events called "none".
        "hit_rate": _num(diag[1:].sum() / signals) if signals > 0 else None,
        "missed_rate": _num(cm[1:, 0].sum() / real) if real > 0 else None,
        "signals": _count(signals),
        "events": _count(real),
    }


def prediction_report(evaluated: dict, forward_start: int, end: int) -> dict:
    """Confusion matrix and scores on forward bars ``[forward_start, end)`` only, and the same for baselines.

    Baselines: always predicting class 0 ("undefined"), drawing classes at random with the class
    frequencies of the study labels (its expected confusion matrix, so no seed is involved), and any the
    EA supplies as ``evaluated["baselines"]`` (name -> ``y_pred (N,)``, ``-1`` where it made none), such as
    a logistic regression fitted on the EA's training rows: each is scored on the same forward bars.
    """
    classes = list(evaluated["classes"])
    c = len(classes)
    y_true = np.asarray(evaluated["y_true"], dtype=np.int64)
    y_pred = np.asarray(evaluated["y_pred"], dtype=np.int64)
    idx = np.arange(len(y_true))
    fwd = (idx >= forward_start) & (idx < end) & (y_true >= 0) & (y_pred >= 0)
    cm = _confusion(y_true, y_pred, fwd, c)
    study = (idx < forward_start) & (y_true >= 0)
    prior = np.bincount(y_true[study], minlength=c).astype(np.float64)
    prior = prior / prior.sum() if prior.sum() > 0 else np.full(c, 1.0 / c)
    true_counts = cm.sum(axis=1).astype(np.float64)
    always = np.zeros((c, c))
    always[:, 0] = true_counts
    baselines = {
        "always_undefined": _scores(always, classes),
        "prior_random": _scores(np.outer(true_counts, prior), classes),
    }
    for name, pred in (evaluated.get("baselines") or {}).items():
        pred = np.asarray(pred, dtype=np.int64)
        scores = _scores(_confusion(y_true, pred, fwd & (pred >= 0), c).astype(np.float64), classes)
        baselines[name] = scores
    return {
        "classes": classes,
        "bars": int(fwd.sum()),
        "first_bar": forward_start,
        "confusion": cm.tolist(),
        "model": _scores(cm.astype(np.float64), classes),
        "baselines": baselines,
        "study_prior": [_num(p) for p in prior],
        "series": _series(evaluated, forward_start, end),
    }


def _series(evaluated: dict, forward_start: int, end: int) -> dict:
    """The forward bars' per-bar classes (``-1`` where none) and, for forecasters, per-bar losses
    (``None`` where none), as plain lists: what the robustness analysis resamples (confidence intervals,
    McNemar's and Diebold-Mariano's tests)."""
    window = slice(forward_start, end)

    def classes(values) -> list[int]:
        return np.asarray(values, dtype=np.int64)[window].tolist()

    out: dict = {
        "first_bar": forward_start,
        "y_true": classes(evaluated["y_true"]),
        "y_pred": classes(evaluated["y_pred"]),
        "baselines": {name: classes(pred) for name, pred in (evaluated.get("baselines") or {}).items()},
    }
    if evaluated.get("losses"):
        out["losses"] = {
            name: [
                float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)[window]
            ]
            for name, values in evaluated["losses"].items()
        }
        out["loss_horizon"] = int(evaluated.get("loss_horizon") or 1)
    return out


def _confusion(y_true: np.ndarray, y_pred: np.ndarray, rows: np.ndarray, c: int) -> np.ndarray:
    """``(C, C)`` counts over ``rows`` (a boolean mask): rows true class, columns predicted."""
    cm = np.zeros((c, c), dtype=np.int64)
    np.add.at(cm, (y_true[rows], y_pred[rows]), 1)
    return cm
