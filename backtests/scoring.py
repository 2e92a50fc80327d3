"""A run's statistics from its records, group by group, only the groups a caller asks for.

``backtests.statistics.TABLE`` names every figure of the report; here each figure belongs to one group: the
function that computes it with the figures that share its work (a curve's drawdowns, the runs of wins and
losses, the daily returns). ``Backtest.run`` asks for every group. An optimisation pass asks for the figures
its results table keeps and its criterion reads, so it skips the others and never builds the report's
tables (orders, deals, trades with their excursions) nor, unless a figure reads them, the curves at each
bar's worst prices. A figure is computed by the same function either way, so a pass's figures are the
report's, bit for bit.

What several groups read (the trades' net profits, the curve's drawdowns, the backtesting.py bar
period) is worked out once, on first use, by ``Inputs``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
import pandas as pd

from backtests import metrics, peers
from backtests.broker.columns import Events
from backtests.equity_path import path_drawdowns
from backtests.errors import StatisticError
from backtests.statistics import TABLE


@dataclass(frozen=True)
class TradeColumns:
    """The closed trades' columns the statistics read, in closing order (``TRADE_COLUMNS``' names; None
    where a table given by hand lacks the column: a figure reading it fails on it)."""

    net_profit: np.ndarray
    buy: np.ndarray | None  # bool: a long position's trade
    lots: np.ndarray | None
    entry_price: np.ndarray | None
    commission: np.ndarray | None
    swap: np.ndarray | None
    entry_time: pd.DatetimeIndex | None
    exit_time: pd.DatetimeIndex | None

    def __len__(self) -> int:
        return len(self.net_profit)

    @classmethod
    def of_frame(cls, trades: pd.DataFrame) -> TradeColumns:
        """From a trades table (the report's, or any frame with these columns)."""
        if not len(trades):
            empty, stamps = np.empty(0), pd.DatetimeIndex([], tz="UTC")
            return cls(empty, np.empty(0, bool), empty, empty, empty, empty, stamps, stamps)

        def column(name: str) -> np.ndarray | None:  # a figure reading an absent column fails on it
            return trades[name].to_numpy(float) if name in trades else None

        def stamps(name: str) -> pd.DatetimeIndex | None:
            return pd.DatetimeIndex(trades[name]) if name in trades else None

        return cls(
            trades["net_profit"].to_numpy(dtype=np.float64),
            trades["type"].to_numpy() == "buy" if "type" in trades else None,
            column("lots"),
            column("entry_price"),
            column("commission"),
            column("swap"),
            stamps("entry_time"),
            stamps("exit_time"),
        )

    @classmethod
    def of_ledger(cls, ledger) -> TradeColumns:
        """From a broker's ledger records, without building its trades table (``Ledger.trades_frame``: the
        same values and times, less the excursions the statistics do not read)."""
        trades = ledger.columns("trades")  # read from the rows recorded: no record built
        if not len(trades):
            return cls.of_frame(pd.DataFrame())
        column = trades.numbers
        return cls(
            column("net_profit"),
            trades.texts("type") == "buy",
            column("lots"),
            column("entry_price"),
            column("commission"),
            column("swap"),
            ledger.times(column("entry_bar", np.int64), trades.values("entry_ns")),
            ledger.times(column("exit_bar", np.int64), trades.values("exit_ns")),
        )


class Curve:
    """The report's curve as arrays: a first row for the start (the deposit at the close of the last study
    bar), then one row per forward bar with its close price, balance and equity at the close. The equity at
    each bar's worst prices and the margin level there come from ``worst`` (both columns, the start row
    first), called on first use only: an optimisation pass that reads neither never computes them."""

    def __init__(
        self,
        time: pd.DatetimeIndex,
        close: np.ndarray,
        balance: np.ndarray,
        equity: np.ndarray,
        worst: Callable[[], tuple[np.ndarray, np.ndarray]],
    ):
        self.time, self.close, self.balance, self.equity = time, close, balance, equity
        self._worst = worst

    @classmethod
    def of_bars(
        cls,
        time: pd.DatetimeIndex,
        close: np.ndarray,
        balance: np.ndarray,
        equity: np.ndarray,
        worst: Callable[[], tuple[np.ndarray, np.ndarray]],
        *,
        deposit: float,
        start_time: pd.Timestamp,
        start_close: float,
    ) -> Curve:
        """From the forward bars' columns, ``worst`` giving their equity at the worst prices and the margin
        held then, and the start row."""

        def worst_columns() -> tuple[np.ndarray, np.ndarray]:
            low, margin = worst()
            level = np.empty(len(low) + 1)  # the start row's NaN, then low / margin * 100.0 in place
            level[0], held = np.nan, level[1:]
            with np.errstate(divide="ignore", invalid="ignore"):
                np.multiply(np.divide(low, margin, out=held), 100.0, out=held)
            held[~(margin > 1e-12)] = np.nan  # no margin held: no level
            return np.concatenate(([deposit], low)), level

        index = pd.DatetimeIndex([start_time]).append(pd.DatetimeIndex(time))
        index.name = "time"
        return cls(
            index,
            np.concatenate(([start_close], close)),
            np.concatenate(([deposit], balance)),
            np.concatenate(([deposit], equity)),
            worst_columns,
        )

    @classmethod
    def of_frame(cls, curves: pd.DataFrame) -> Curve:
        """From a curve table (``frame``'s columns; the start row first)."""
        close, balance, equity, low, level = (
            curves[c].to_numpy(float) if c in curves else None
            for c in ("close", "balance", "equity", "equity_worst", "margin_level")
        )  # a figure reading an absent column fails on it; the others do not need it
        return cls(pd.DatetimeIndex(curves.index), close, balance, equity, lambda: (low, level))

    @cached_property
    def _worst_columns(self) -> tuple[np.ndarray, np.ndarray]:
        return self._worst()

    @property
    def equity_worst(self) -> np.ndarray:
        return self._worst_columns[0]

    @property
    def margin_level(self) -> np.ndarray:
        """Equity at the bar's worst prices / the margin held then, %; NaN without positions."""
        return self._worst_columns[1]

    def frame(self) -> pd.DataFrame:
        """The curve as the report's table (``Result.curves``)."""
        return pd.DataFrame(
            {
                "close": self.close,
                "balance": self.balance,
                "equity": self.equity,
                "equity_worst": self.equity_worst,
                "margin_level": self.margin_level,
            },
            index=self.time,
        )


class Inputs:
    """What the groups read: the trades, the curve and the account's figures, and what several groups
    share, each worked out once on first use."""

    def __init__(
        self,
        trades: TradeColumns,
        curve: Curve,
        *,
        deposit: float,
        deals: int = 0,
        contract_size: float = 1.0,
        equity_dd: dict | Callable[[], dict | None] | None = None,
        balance_path: Callable[[], np.ndarray] | None = None,
    ):
        self.trades, self.curve = trades, curve
        self.deposit, self.deals, self.contract_size = deposit, deals, contract_size
        self._equity_dd = equity_dd  # or the function that measures them on the path, called on first use
        self._balance_path = balance_path  # makes the balance after each deal, else the curve's is used

    @cached_property
    def net(self) -> np.ndarray:
        return self.trades.net_profit

    @cached_property
    def balance_dd(self) -> dict:
        path = self.curve.balance if self._balance_path is None else self._balance_path()
        return metrics.drawdowns(path, self.deposit)

    @cached_property
    def equity_dd(self) -> dict:
        """On the equity path where given (``backtests.equity_path``), else estimated from the curve."""
        measured = self._equity_dd() if callable(self._equity_dd) else self._equity_dd
        return measured or metrics.equity_drawdowns(self.curve.equity, self.curve.equity_worst, self.deposit)

    @cached_property
    def streaks(self) -> dict:
        return metrics.streaks(self.net)

    @cached_property
    def peer(self) -> peers.PeerInputs:
        return peers.PeerInputs(self.curve.time, self.curve.equity, self.curve.close)


@dataclass(frozen=True)
class Group:
    """Figures computed together: ``keys``, by ``fn(inputs)``."""

    keys: tuple[str, ...]
    fn: Callable[[Inputs], dict]


GROUPS: tuple[Group, ...] = tuple(Group(keys, fn) for keys, fn in (*metrics.GROUPS, *peers.GROUPS))
_GROUP_OF = {key: g for g in GROUPS for key in g.keys}
_ORDER = {s.key: k for k, s in enumerate(TABLE)}


def groups_of(keys: Iterable[str]) -> list[Group]:
    """The groups that compute ``keys``, each once; an unknown key is refused by name."""
    keys = list(keys)
    unknown = sorted({str(k) for k in keys if not isinstance(k, str) or k not in _GROUP_OF})
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(_GROUP_OF), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise StatisticError(f"no statistic named {', '.join(map(repr, unknown))}{hint}; the report's are "
                             "backtests.statistics.TABLE's keys")  # fmt: skip
    wanted = {id(_GROUP_OF[k]) for k in keys}
    return [g for g in GROUPS if id(g) in wanted]


def score(inputs: Inputs, keys: Iterable[str] | None = None) -> dict:
    """The statistics ``keys`` (default: every one) of a run, in the table's order, with the other figures
    of their groups (they cost nothing more)."""
    out: dict = {}
    for group in GROUPS if keys is None else groups_of(keys):
        out.update(group.fn(inputs))
    return dict(sorted(out.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))


class Figures(NamedTuple):
    """What a finished broker scores to (``broker_figures``)."""

    trades: pd.DataFrame | Callable[[], pd.DataFrame]  # or what builds it (``broker_figures``' ``tables``)
    curves: pd.DataFrame | Callable[[], pd.DataFrame]  # scoring.Curve.frame (likewise)
    stats: dict
    balance: np.ndarray  # (F,) at each forward bar's close
    equity: np.ndarray  # (F,)
    equity_path: pd.DataFrame | None  # backtests.equity_path.EquityPath.skeleton


def broker_figures(ctx, fs: int, last: int, account, path: bool | Callable = True, tables=None) -> Figures:
    """The trades, curves, MT5 statistics, balance and equity (at each bar's close) of a finished broker
    over the forward bars ``fs..last``, and the skeleton of its equity at every price the mode models that
    the equity drawdowns come from (the backtest and a live run's report share this; ``path``: what builds
    that skeleton, True for one symbol's ``path_drawdowns``, ``account_path.account_drawdowns`` for several
    symbols; False: the bar-level drawdowns only). ``tables``: the ledger's snapshot the trades table is
    of, when the tables are to be built on first read (``Result``): the trades and curves are then the
    functions that build them, and the statistics read the ledger's columns (the same values); None: both
    built now."""
    start = _start(ctx, fs)
    build = path_drawdowns if path is True else path
    found = build(ctx, fs, last, account.deposit, start) if build else None
    drawdowns = None if found is None else found.drawdowns
    if tables is None:
        trades = ctx.trades_frame()  # the report's table: the statistics read its columns, not the records
        inputs = _inputs(ctx, fs, last, account, drawdowns, trades)
    else:
        trades, inputs = tables.trades_frame, _inputs(ctx, fs, last, account, drawdowns)
    curve = inputs.curve
    stats = score(inputs)
    return Figures(trades, curve.frame() if tables is None else curve.frame, stats, curve.balance[1:],
                   curve.equity[1:], None if found is None else found.skeleton)  # fmt: skip


def pass_figures(ctx, fs: int, last: int, account, keys: Iterable[str] | None) -> tuple[dict, Curve]:
    """``broker_figures``' statistics ``keys`` (None: all) and the curve, and nothing else: no trades,
    orders or deals table, the equity path only for an equity drawdown, the worst prices of each bar only
    for the margin level (or an equity drawdown without a path)."""
    start = _start(ctx, fs)

    def measured() -> dict | None:
        found = path_drawdowns(ctx, fs, last, account.deposit, start, frame=False)
        return None if found is None else found.drawdowns

    inputs = _inputs(ctx, fs, last, account, measured)
    return score(inputs, keys), inputs.curve


def _start(ctx, fs: int) -> pd.Timestamp:
    """The report's first row: the close of the last study bar (a bar's period before the first bar)."""
    index = ctx.time
    return index[fs - 1] if fs > 0 else index[0] - (index[1] - index[0])


def _inputs(ctx, fs: int, last: int, account, equity_dd, trades: pd.DataFrame | None = None) -> Inputs:
    """The statistics' inputs; ``trades``: the trades table when one is built anyway (else the records')."""
    k = last - fs + 1
    balance, equity = (c[:k] for c in ctx.ledger.closing_curves(fs))
    index, close = ctx.time, ctx.closes
    curve = Curve.of_bars(
        index[fs : last + 1], close[fs : last + 1], balance, equity,
        lambda: tuple(c[:k] for c in ctx.worst_curves(fs)),
        deposit=account.deposit, start_time=_start(ctx, fs),
        start_close=float(close[fs - 1] if fs > 0 else ctx.opens[0]),
    )  # fmt: skip
    return Inputs(
        TradeColumns.of_ledger(ctx.ledger) if trades is None else TradeColumns.of_frame(trades), curve,
        deposit=account.deposit, deals=ctx.deals, contract_size=account.contract_size, equity_dd=equity_dd,
        balance_path=lambda: _balance_path(ctx.ledger.events("balance_events"), fs, last, curve.balance),
    )  # fmt: skip


def _balance_path(events: Events, fs: int, last: int, closes: np.ndarray) -> np.ndarray:
    """The balance after every deal of bars ``fs..last``, after the start row of the bars' ``closes`` (the
    balance moves only with deals, so every close is among them). MetaTrader's balance drawdown follows
    the balance from deal to deal ("the highest local balance value and the next lowest"): an entry's
    commission booked in the bar where another position's take-profit then lifts the balance is a low
    that no bar's close shows."""
    bars, money = events.bars, events.amounts
    before = closes[0] + sum(money[bars < fs].tolist())  # Python's own sum, as the balance is booked
    amounts = money[(fs <= bars) & (bars <= last)]
    return np.concatenate((closes[:1], before + np.cumsum(amounts))) if len(amounts) else closes
