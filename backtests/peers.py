"""The figures that carry backtesting.py's names, computed exactly as backtesting.py 0.6 computes them, and
the same annualised figures on the data's real trading days.

A trader puts our report next to backtesting.py's ``stats``; a figure of the same name must be the same
number, so ``backtesting_stats`` follows ``backtesting._stats.compute_stats`` step by step (a test runs both
on the same equity and trades). Its input is the report's own curve: the equity at each bar's close,
starting with the deposit at the close of the last study bar (backtesting.py's equity starts at the cash
before the first trade, and its buy & hold starts at the close of the first bar the strategy decides on).

backtesting.py annualises with a fixed 252 periods a year (365 when a fifth of the bars fall on weekends)
and groups returns by calendar day, so an FX week's Sunday-evening bars make a sixth "day" (about 312 a
year). ``trading_day_stats`` therefore gives the annualised figures again under their own names, on
trading days (weekend bars count to the next Monday) and with the periods per year measured from the data.

What depends on the bar times alone (the bar period, the periods per year, each bar's trading day, the
calendar bins of the return series) is computed once per distinct index and kept (``functools.lru_cache``
keyed by the instants and the time zone): an optimisation scores hundreds of passes over the same bars,
and these pandas calendar operations were a fifth of a pass.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from backtests.metrics import _num


def _timedelta(value) -> str | None:
    return str(value) if isinstance(value, pd.Timedelta) and not pd.isna(value) else None


def _geometric_mean(returns: pd.Series | np.ndarray) -> float:
    """backtesting.py's geometric mean: 0 when any return is -100 % or worse (a missing return counts as
    0, as its ``fillna(0)`` does; on the array, which sums as pandas' ``Series.sum`` does without NaN)."""
    r = np.asarray(returns, dtype=np.float64)
    r = np.where(np.isnan(r), 0.0, r) + 1
    if np.any(r <= 0):
        return 0.0
    return float(np.exp(np.log(r).sum() / (len(r) or np.nan)) - 1)


class _Stamps:
    """A DatetimeIndex as a cache key: equal to another holding the same instants in the same time zone.
    Its hash reads a sample of the instants (an optimisation's passes look up the same bars hundreds of
    times, and hashing all of a million would cost more than the calendar work it saves); equality compares
    them all."""

    __slots__ = ("_hash", "_ns", "_tz", "index")

    _SAMPLE = 64  # instants hashed, evenly spaced, and the last

    def __init__(self, index: pd.DatetimeIndex):
        self.index = index
        self._ns, self._tz = index.asi8, str(index.tz)
        step = max(1, len(self._ns) // self._SAMPLE)
        self._hash = hash((len(self._ns), self._tz, self._ns[::step].tobytes(), self._ns[-1:].tobytes()))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Stamps)
            and self._hash == other._hash
            and self._tz == other._tz
            and (_same_memory(self._ns, other._ns) or np.array_equal(self._ns, other._ns))
        )


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are views of the same elements (then equal without reading them)."""
    return a.shape == b.shape and a.strides == b.strides and a.ctypes.data == b.ctypes.data


def _drawdown_runs(dd: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Duration and depth of each drawdown, indexed at the bar where it ends (backtesting.py's rule: a
    drawdown ends at the next bar at a new peak, or at the last bar)."""
    iloc = (dd == 0).to_numpy().nonzero()[0]  # increasing: backtesting.py's ``np.unique`` of it and the
    if not len(iloc) or iloc[-1] != len(dd) - 1:  # last bar is the same rows, the last added once
        iloc = np.append(iloc, len(dd) - 1)
    prev = np.r_[np.nan, iloc[:-1]]
    keep = iloc > prev + 1
    ends, starts = iloc[keep], prev[keep].astype(np.int64)
    if not len(ends):
        return pd.Series(dtype=object), pd.Series(dtype=float)
    duration = pd.Series(dd.index[ends] - dd.index[starts], index=dd.index[ends])
    # each drawdown's NaN-skipping max over its rows ``start..end``, all at once: ``reduceat`` over the
    # pairs of bounds (what it reduces between one drawdown's end and the next one's start is dropped;
    # the array padded, as a bound may be one past its last row)
    bounds = np.column_stack([starts, ends + 1]).ravel()
    depth = np.fmax.reduceat(np.append(dd.to_numpy(np.float64), 0.0), bounds)[0::2]
    return duration, pd.Series(depth, index=dd.index[ends])


def _ceil(value, period: pd.Timedelta):
    """Durations rounded up to the data's resolution, as backtesting.py shows them."""
    if not isinstance(value, pd.Timedelta) or pd.isna(value):
        return value
    resolution = getattr(period, "resolution_string", None) or period.resolution
    return value.ceil(resolution)


def trade_returns(
    lots: np.ndarray, entry_price: np.ndarray, net: np.ndarray, contract_size: float
) -> pd.Series:
    """Each trade's net profit over its entry value (backtesting.py's ``ReturnPct``; swap included)."""
    if not len(net):
        return pd.Series(dtype=float)
    return pd.Series(net / (lots * contract_size * entry_price))


def _bars_of(index: pd.DatetimeIndex, times: pd.Series) -> np.ndarray:
    """The row of the bar each time falls in: the last bar opening at or before it."""
    return index.searchsorted(pd.DatetimeIndex(times), side="right") - 1


def _period(index: pd.DatetimeIndex) -> pd.Timedelta:
    """The bar period as backtesting.py infers it: the median gap of the last 100 bars."""
    return _period_of(_Stamps(index))


@functools.lru_cache(maxsize=8)
def _period_of(stamps: _Stamps) -> pd.Timedelta:
    return pd.Series(stamps.index[-100:]).diff().dropna().median()


def _periods_per_year(index: pd.DatetimeIndex) -> tuple[int, bool]:
    """backtesting.py's periods per year, and whether the data trades at weekends."""
    return _periods_per_year_of(_Stamps(index))


@functools.lru_cache(maxsize=8)
def _periods_per_year_of(stamps: _Stamps) -> tuple[int, bool]:
    index = stamps.index
    freq_days = _period(index).days
    weekends = bool(index.day_of_week.to_series().between(5, 6).mean() > 2 / 7 * 0.6)
    annual = {7: 52, 31: 12, 365: 1}.get(freq_days, 365 if weekends else 252)
    return annual, weekends


@functools.lru_cache(maxsize=8)
def _bin_ends(stamps: _Stamps, freq: str) -> np.ndarray:
    """Position of the last bar of each non-empty ``resample(freq)`` bin of the index."""
    positions = pd.Series(np.arange(len(stamps.index), dtype=np.float64), index=stamps.index)
    ends = positions.resample(freq).last().dropna().to_numpy(np.int64)
    ends.flags.writeable = False  # shared by every caller of the cache
    return ends


def _resampled_last(equity: np.ndarray, index: pd.DatetimeIndex, freq: str) -> np.ndarray:
    """``Series(equity, index).resample(freq).last().dropna()``'s values: the last equity of each bin."""
    if np.isnan(equity).any():  # bins' last non-NaN values: pandas' own path
        return pd.Series(equity, index=index).resample(freq).last().dropna().to_numpy()
    return equity[_bin_ends(_Stamps(index), freq)]


def _pct_change(values: np.ndarray) -> np.ndarray:
    """``Series(values).pct_change().dropna()``'s values: each over the one before, less one (NaN dropped:
    the first, and 0 over 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        change = values[1:] / values[:-1] - 1
    return change[~np.isnan(change)]


class PeerInputs:
    """What backtesting.py's figures share, worked out once on first use: the curve (``index``, ``equity``
    and ``close``, the start row first), the bar period and periods per year, the drawdown series and the
    calendar-day returns."""

    def __init__(self, index: pd.DatetimeIndex, equity: np.ndarray, close: np.ndarray):
        self.index, self.equity, self.close = index, equity, close

    @functools.cached_property
    def period(self) -> pd.Timedelta:
        return _period(self.index)

    @functools.cached_property
    def annual(self) -> int:
        return _periods_per_year(self.index)[0]

    @functools.cached_property
    def dd(self) -> np.ndarray:
        """The equity's fall below its running peak, as a fraction (backtesting.py's ``DrawdownPct``)."""
        fraction = np.maximum.accumulate(self.equity)
        np.divide(self.equity, fraction, out=fraction)
        return np.subtract(1, fraction, out=fraction)  # (one array for the three steps)

    @functools.cached_property
    def duration(self) -> pd.Timedelta:
        return self.index[-1] - self.index[0]

    @functools.cached_property
    def ret_pct(self) -> float:
        return (self.equity[-1] - self.equity[0]) / self.equity[0] * 100

    @functools.cached_property
    def bh_pct(self) -> float:
        return (self.close[-1] - self.close[0]) / self.close[0] * 100

    @functools.cached_property
    def day(self) -> pd.Series:
        """Returns of the last equity of each calendar period (day, or week, month, year for such bars)."""
        freq = {7: "W", 31: "ME", 365: "YE"}.get(self.period.days, "D")
        return pd.Series(_pct_change(_resampled_last(self.equity, self.index, freq)))


def backtesting_stats(curves: pd.DataFrame, trades: pd.DataFrame, contract_size: float) -> dict:
    """backtesting.py's ``stats`` on the report's curve (``equity`` and ``close`` columns, first row the
    start) and trades; keys are the names in snake case, percentages as backtesting.py prints them."""
    from backtests.scoring import Curve, Inputs, TradeColumns, score

    deposit = float(curves["equity"].iloc[0])
    inputs = Inputs(
        TradeColumns.of_frame(trades), Curve.of_frame(curves), deposit=deposit, contract_size=contract_size
    )
    return score(inputs, [k for keys, fn in GROUPS if fn is not _trading_days for k in keys])


def _curve_figures(i) -> dict:
    p = i.peer
    equity, duration = p.equity, p.duration
    years = (duration.days + duration.seconds / 86400) / 365.25
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # a short run's CAGR overflows: None
        cagr = ((equity[-1] / equity[0]) ** (1 / years) - 1) * 100 if years else None
    return {
        "duration": _timedelta(duration),
        "equity_final": _num(equity[-1], 2),
        "equity_peak": _num(equity.max(), 2),
        "return_pct": _num(p.ret_pct, 4),
        "buy_and_hold_return_pct": _num(p.bh_pct, 4),
        "cagr_pct": _num(cagr, 4),
    }


def _exposure(i) -> dict:
    # A trade is held in the bars from the one its entry falls in to the one its exit falls in: a fill at
    # 10:23 inside the 10:00 bar counts that bar (the next bar's row would drop it and count one too many).
    index, trades = i.peer.index, i.trades
    entry = _bars_of(index, trades.entry_time) if len(trades) else []
    exit_ = _bars_of(index, trades.exit_time) if len(trades) else []
    return {
        "exposure_time_pct": _num(_held(len(index), np.asarray(entry), np.asarray(exit_)).mean() * 100, 4)
    }


def _held(n: int, entry: np.ndarray, exit_: np.ndarray) -> np.ndarray:
    """1 at each of ``n`` bars inside some trade's ``held[entry : exit + 1]`` (the slices of Python: an entry
    before the first bar, -1, starts at the last one), else 0: every trade's bounds counted at once."""
    start = np.where(entry < 0, np.maximum(entry + n, 0), entry).astype(np.int64)
    stop = np.minimum(exit_ + 1, n).astype(np.int64)
    some = start < stop
    inside = np.bincount(start[some], minlength=n + 1)
    inside -= np.bincount(stop[some], minlength=n + 1)
    held = np.cumsum(inside[:n], out=inside[:n])
    return (held > 0).astype(np.int64)


def _annualised(i) -> dict:
    p = i.peer
    annual, day = p.annual, p.day
    values = day.to_numpy()  # no NaN (``_pct_change`` drops them): NumPy's mean is pandas' here
    g = _geometric_mean(values)
    ann = (1 + g) ** annual - 1
    var = day.var(ddof=1)
    vol = math.sqrt((var + (1 + g) ** 2) ** annual - (1 + g) ** (2 * annual)) * 100 if len(day) > 1 else None
    # the losses' root mean square (backtesting.py's ``clip(-inf, 0)``; a -0.0 or 0.0 squares alike)
    downside = float(np.sqrt(np.mean(np.minimum(values, 0.0) ** 2)) * np.sqrt(annual)) if len(day) else 0.0
    max_dd = _max_dd(p)
    return {
        "return_ann_pct": _num(ann * 100, 4),
        "volatility_ann_pct": _num(vol, 4),
        "sharpe_ratio_ann": _num(ann * 100 / vol, 4) if vol else None,
        "sortino_ratio": _num(ann / downside, 4) if downside else None,
        "calmar_ratio": _num(ann / max_dd, 4) if max_dd else None,
    }


def _max_dd(p: PeerInputs) -> float:
    return float(np.nan_to_num(np.fmax.reduce(p.dd)))  # the NaN-skipping max, as pandas' Series.max


def _beta(i) -> dict:
    p = i.peer
    equity, close = p.equity, p.close
    beta = None
    # An equity wiped out (a stop-out to zero) has no log return: its NaN gives no beta, as backtesting.py's.
    with np.errstate(divide="ignore", invalid="ignore"):
        eq_log, mkt_log = _log_ratio(equity), _log_ratio(close)
        if len(eq_log) > 1:
            cov = np.cov(eq_log, mkt_log)
            beta = cov[0, 1] / cov[1, 1] if cov[1, 1] else None
    return {
        "alpha_pct": _num(p.ret_pct - beta * p.bh_pct, 4) if beta is not None else None,
        "beta": _num(beta, 4),
    }


def _log_ratio(values: np.ndarray) -> np.ndarray:
    """``np.log(values[1:] / values[:-1])``, the logarithm taken in the ratios' own array."""
    ratio = np.divide(values[1:], values[:-1])
    return np.log(ratio, out=ratio)


def _drawdown_figures(i) -> dict:
    p = i.peer
    dd_dur, dd_depth = _drawdown_runs(pd.Series(p.dd, index=p.index))
    return {
        "max_drawdown_pct": _num(-_max_dd(p) * 100, 4),
        "avg_drawdown_pct": _num(-dd_depth.mean() * 100, 4) if len(dd_depth) else None,
        "max_drawdown_duration": _timedelta(_ceil(dd_dur.max(), p.period)) if len(dd_dur) else None,
        "avg_drawdown_duration": _timedelta(_ceil(dd_dur.mean(), p.period)) if len(dd_dur) else None,
    }


def _trade_figures(i) -> dict:
    trades, period = i.trades, i.peer.period
    n = len(trades)
    pl = pd.Series(trades.net_profit) if n else pd.Series(dtype=float)
    rets = trade_returns(trades.lots, trades.entry_price, trades.net_profit, i.contract_size)
    win = float((pl > 0).mean()) if n else None
    held_for = trades.exit_time - trades.entry_time
    with np.errstate(divide="ignore", invalid="ignore"):  # backtesting.py's NaN cases become None
        loss_sum = np.float64(abs(rets[rets < 0].sum()))
        pf = np.float64(rets[rets > 0].sum()) / loss_sum
        pl_sd = np.float64(pl.std()) if n > 1 else np.float64("nan")
        sqn = math.sqrt(n) * np.float64(pl.mean()) / pl_sd if n > 1 else None
        payoff = np.float64(pl[pl > 0].mean()) / -np.float64(pl[pl < 0].mean())
        kelly = win - (1 - win) / payoff if n else None
    return {
        "win_rate_pct": _num(win * 100, 4) if n else None,
        "best_trade_pct": _num(rets.max() * 100, 4) if n else None,
        "worst_trade_pct": _num(rets.min() * 100, 4) if n else None,
        "avg_trade_pct": _num(_geometric_mean(rets) * 100, 4) if n else None,
        "max_trade_duration": _timedelta(_ceil(held_for.max(), period)) if n else None,
        "avg_trade_duration": _timedelta(_ceil(held_for.mean(), period)) if n else None,
        "profit_factor_returns": _num(pf, 4),
        "expectancy_pct": _num(rets.mean() * 100, 4) if n else None,
        "sqn": _num(sqn, 4),
        "kelly_criterion": _num(kelly, 4),
    }


def trading_days(index: pd.DatetimeIndex, weekends: bool) -> pd.DatetimeIndex:
    """Each bar's trading day (midnight UTC): without weekend trading, Saturday and Sunday bars (the FX
    week opens on Sunday evening) belong to the following Monday."""
    return _trading_days_of(_Stamps(index), weekends)


@functools.lru_cache(maxsize=8)
def _trading_days_of(stamps: _Stamps, weekends: bool) -> pd.DatetimeIndex:
    index = stamps.index
    day = index.normalize()
    if weekends:
        return day
    shift = np.where(index.day_of_week == 5, 2, np.where(index.day_of_week == 6, 1, 0))
    return day + pd.to_timedelta(shift, unit="D")


def day_closes(index: pd.DatetimeIndex, equity: np.ndarray) -> np.ndarray:
    """The curve's equity at the start (its first row) and at the end of each trading day after it (the
    last equity of the day; weekend bars count to the next Monday unless the data trades at weekends)."""
    _, weekends = _periods_per_year(index[1:])
    ends = _day_ends(_Stamps(index[1:]), weekends)
    later = equity[1:]
    if ends is None or np.isnan(later).any():  # days' last non-NaN values, or days out of order: pandas' path
        later = pd.Series(later).groupby(trading_days(index[1:], weekends).asi8).last().to_numpy()
    else:
        later = later[ends]
    return np.concatenate((equity[:1], later))


@functools.lru_cache(maxsize=8)
def _day_ends(stamps: _Stamps, weekends: bool) -> np.ndarray | None:
    """Position of the last bar of each trading day of the index (None unless the days run in order)."""
    days = _trading_days_of(stamps, weekends).asi8
    if len(days) == 0 or np.any(days[1:] < days[:-1]):
        return None
    ends = np.flatnonzero(np.append(days[1:] != days[:-1], True))
    ends.flags.writeable = False  # shared by every caller of the cache
    return ends


def trading_day_stats(curves: pd.DataFrame) -> dict:
    """Annualised return, volatility, Sharpe and Sortino as backtesting.py defines them (geometric mean
    daily return compounded over a year), on trading-day returns with the periods per year measured: the
    share of weekdays (or calendar days, for data that trades at weekends) that hold bars, times their
    number in a year."""
    return _day_figures(pd.DatetimeIndex(curves.index), curves["equity"].to_numpy(np.float64))


def _trading_days(i) -> dict:
    return _day_figures(i.peer.index, i.peer.equity)


def _day_figures(index: pd.DatetimeIndex, equity: np.ndarray) -> dict:
    keys = ("trading_days_per_year", "td_return_ann_pct", "td_volatility_ann_pct", "td_sharpe_ratio")
    empty = dict.fromkeys((*keys, "td_sortino_ratio"))
    if len(index) < 3:
        return empty
    _, weekends = _periods_per_year(index[1:])
    days = trading_days(index[1:], weekends)
    daily = day_closes(index, equity)
    rets = pd.Series(daily[1:] / daily[:-1] - 1)
    per_year = (
        (len(daily) - 1)
        / _days_between(days[0], days[-1], weekends)
        * (365.25 if weekends else 365.25 * 5 / 7)
    )
    if len(rets) < 2:
        return empty
    g = _geometric_mean(rets)
    ann = (1 + g) ** per_year - 1
    vol = math.sqrt((rets.var(ddof=1) + (1 + g) ** 2) ** per_year - (1 + g) ** (2 * per_year))
    values = rets.to_numpy()
    if np.isnan(values).any():  # pandas' mean skips a NaN return
        downside = float(np.sqrt(np.mean(rets.clip(-np.inf, 0) ** 2)) * np.sqrt(per_year))
    else:  # the losses' root mean square, as ``_annualised``'s: NumPy's mean is pandas' without NaN
        downside = float(np.sqrt(np.mean(np.minimum(values, 0.0) ** 2)) * np.sqrt(per_year))
    return {
        "trading_days_per_year": _num(per_year, 2),
        "td_return_ann_pct": _num(ann * 100, 4),
        "td_volatility_ann_pct": _num(vol * 100, 4),
        "td_sharpe_ratio": _num(ann / vol, 4) if vol else None,
        "td_sortino_ratio": _num(ann / downside, 4) if downside else None,
    }


@functools.lru_cache(maxsize=8)
def _days_between(first: pd.Timestamp, last: pd.Timestamp, weekends: bool) -> int:
    """The calendar days from ``first`` to ``last`` (both included), weekdays only without weekends."""
    span = pd.date_range(first, last, freq="D")
    return len(span) if weekends else int((span.day_of_week < 5).sum())


# (keys, function of ``backtests.scoring.Inputs``): backtesting.py's figures and those on trading days.
GROUPS = (
    (("duration", "equity_final", "equity_peak", "return_pct", "buy_and_hold_return_pct", "cagr_pct"),
     _curve_figures),
    (("exposure_time_pct",), _exposure),
    (("return_ann_pct", "volatility_ann_pct", "sharpe_ratio_ann", "sortino_ratio", "calmar_ratio"),
     _annualised),
    (("alpha_pct", "beta"), _beta),
    (("max_drawdown_pct", "avg_drawdown_pct", "max_drawdown_duration", "avg_drawdown_duration"),
     _drawdown_figures),
    (("win_rate_pct", "best_trade_pct", "worst_trade_pct", "avg_trade_pct", "max_trade_duration",
      "avg_trade_duration", "profit_factor_returns", "expectancy_pct", "sqn", "kelly_criterion"),
     _trade_figures),
    (("trading_days_per_year", "td_return_ann_pct", "td_volatility_ann_pct", "td_sharpe_ratio",
      "td_sortino_ratio"), _trading_days),
)  # fmt: skip
