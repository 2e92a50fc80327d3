"""Several symbols and timeframes in one backtest, as MetaTrader 5's tester runs a multi-currency EA.

The account's timeline is the union of the symbols' main-timeframe bars (``backtests.alignment``); each
symbol has its own broker on it, all on one account (``backtests.broker.portfolio``). At each bar of the
timeline every broker enters the bar (so each reads the others' prices of that moment), runs its opening
checks, the EA decides with every declared (symbol, timeframe) revealed up to the bars closed by then
(``strategies.views``), and each broker works its bar's range. The EA's requests reach the brokers
through ``backtests.context.TradingContext``, whose one-broker case is a single-symbol run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from backtests.alignment import align
from backtests.broker import AccountConfig, Broker
from backtests.broker.portfolio import conversion, open_brokers
from backtests.errors import SymbolsError
from datafeeds import meta_of
from datafeeds.resample import can_resample, resample
from datafeeds.symbols import SymbolSpec, find_spec
from datafeeds.timeframes import Timeframe
from strategies.bars import BarFeed
from strategies.views import DataViews


def declared(ea_class: Any, frames: Mapping[str, pd.DataFrame]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The EA's symbols and timeframes (its class attributes; empty: the data's first symbol and its
    timeframe), checked: names unique, every symbol loaded, every timeframe one MetaTrader has."""
    first = next(iter(frames))
    symbols = tuple(ea_class.symbols) or (first,)
    main_tf = meta_of(frames[symbols[0]] if symbols[0] in frames else frames[first]).timeframe.name
    frames_ = tuple(str(t).strip().upper() for t in ea_class.timeframes) or (main_tf,)
    for kind, names in (("symbols", symbols), ("timeframes", frames_)):
        if any(not isinstance(s, str) or not s.strip() for s in names):
            raise SymbolsError(f"{ea_class.__name__}.{kind}: names, not {names!r}")
        if len(set(names)) != len(names):
            raise SymbolsError(f"{ea_class.__name__}.{kind} names one twice: {', '.join(names)}")
    for tf in frames_:
        try:
            Timeframe.parse(tf)
        except ValueError as exc:
            raise SymbolsError(f"{ea_class.__name__}.timeframes: {exc}") from None
    missing = [s for s in symbols if s not in frames]
    if missing:
        raise SymbolsError(
            f"{ea_class.__name__} reads {', '.join(missing)}, but no candles were given for "
            f"{'it' if len(missing) == 1 else 'them'} (loaded: {', '.join(frames)})"
        )
    if frames_[0] != main_tf:
        raise SymbolsError(
            f"{ea_class.__name__}'s main timeframe is {frames_[0]}, "
            f"but the candles of {symbols[0]} are {main_tf}"
        )
    return symbols, frames_


def timeframe_frames(
    frames: Mapping[str, pd.DataFrame], symbols: tuple[str, ...], timeframes: tuple[str, ...]
) -> dict[tuple[str, str], pd.DataFrame]:
    """Every declared (symbol, timeframe): the given candles, or bars built from them where the timeframe
    is a whole number of the given one (``datafeeds.resample``, as the terminal builds them); a finer
    timeframe than the data's is refused by name."""
    out = {}
    for name in symbols:
        df = frames[name]
        have = meta_of(df).timeframe
        for tf in timeframes:
            want = Timeframe.parse(tf)
            if want == have:
                out[(name, tf)] = df
            elif want.seconds > have.seconds and can_resample(have, want):
                out[(name, tf)] = resample(df, want)
            else:
                raise SymbolsError(
                    f"timeframe {tf} of {name}: the candles given are {have.name}, which cannot make {tf} "
                    f"bars; give {name}'s {tf} candles or a finer timeframe"
                )
    return out


def symbol_specs(frames: Mapping[str, pd.DataFrame], user: Mapping[str, SymbolSpec] | None) -> dict:
    """The specification of every loaded symbol (a user table first, then the built-in one); its digits
    must be the candles' (prices on another grid would be other money)."""
    specs = {}
    for name, df in frames.items():
        spec = find_spec(name, user or {})
        digits = meta_of(df).digits
        if spec.digits != digits:
            raise SymbolsError(
                f"symbol {name}: its specification has {spec.digits} digits, its candles {digits}; "
                "give a specification that matches the data (symbols file)"
            )
        specs[name] = spec
    return specs


class MultiSetup:
    """What a multi-symbol run is made of, built and checked once per ``Backtest``: the aligned timeline,
    the specifications, and the candles of every declared (symbol, timeframe)."""

    def __init__(
        self, frames: Mapping[str, pd.DataFrame], ea_class: Any, specs: Mapping | None, currency: str = "USD"
    ):
        if not frames:
            raise SymbolsError("no candles given: a multi-symbol backtest needs a frame per symbol")
        for name, df in frames.items():
            meta = meta_of(df)
            if meta.symbol != name:
                raise SymbolsError(f"the candles given as {name} are {meta.symbol}'s")
        self.symbols, self.timeframes = declared(ea_class, frames)
        main = self.symbols[0]
        main_tf = meta_of(frames[main]).timeframe
        main_clock = meta_of(frames[main]).clock
        for name, df in frames.items():
            if meta_of(df).clock != main_clock:  # one account, one server: its days, rollovers and bars
                raise SymbolsError(
                    f"the candles of {name} are on a {meta_of(df).clock.text()} server clock, those of "
                    f"{main} on {main_clock.text()}: one account's symbols share one server clock"
                )
            if meta_of(df).timeframe != main_tf:
                raise SymbolsError(
                    f"the candles of {name} are {meta_of(df).timeframe.name}, "
                    f"those of {main} {main_tf.name}: "
                    "give every symbol on the main timeframe (the others are built from it)"
                )
        # The main symbol first: its broker is the harness's context and its bars the report's chart.
        self.frames = {main: frames[main], **{k: v for k, v in frames.items() if k != main}}
        self.specs = symbol_specs(self.frames, specs)
        intraday = main_tf.seconds < 86_400  # a day, week or month has no fixed length on a server clock
        self.aligned = align(self.frames, pd.Timedelta(seconds=main_tf.seconds) if intraday else None)
        self._check_conversions(currency)
        self.views = timeframe_frames(self.frames, self.symbols, self.timeframes)
        self.main = (main, self.timeframes[0])
        self.meta = meta_of(self.frames[main])

    def _check_conversions(self, currency: str) -> None:
        """Every conversion a symbol needs is loaded (``ConversionError`` otherwise), and a pair it converts
        through has a bar wherever the symbol has one: a rate from a stale bar would be a made-up rate."""
        tracks = self.aligned.tracks
        for name, spec in self.specs.items():
            needs = [(spec.profit_currency, "profit")]
            if spec.calc_mode not in ("cfd", "cfd_leverage"):
                needs.append((spec.margin_currency, "margin"))
            for cur, what in needs:
                rate = conversion(spec, cur, currency, self.frames, what)
                pair = rate.name
                if rate.pair is None or pair == name:
                    continue
                gaps = tracks[pair].closed & ~tracks[name].closed
                if gaps.any():
                    first = self.aligned.time[int(np.argmax(gaps))]
                    raise SymbolsError(
                        f"symbol {name}: its {what} is converted through {pair}, which has no bar at "
                        f"{int(gaps.sum())} of {name}'s bars (the first at {first}); give {pair}'s candles "
                        "without gaps over the same span"
                    )

    def feeds(self) -> DataViews:
        """Fresh feeds (one run's), nothing visible yet."""
        return DataViews({k: BarFeed.from_frame(df, meta_of(df)) for k, df in self.views.items()}, self.main)

    def brokers(self, account: AccountConfig) -> dict[str, Broker]:
        """One broker per loaded symbol on the timeline, the main symbol's first."""
        time = self.aligned.time
        columns = {
            name: (tr.open, tr.high, tr.low, tr.close, tr.spread, time)
            for name, tr in self.aligned.tracks.items()
        }
        main = self.main[0]
        brokers = open_brokers(columns, self.specs, account, self.meta.clock)
        for name, broker in brokers.items():
            broker.market.close_gaps(self.aligned.tracks[name].closed)
        assert next(iter(brokers)) == main
        return brokers

    def describe(self, brokers: Mapping[str, Broker], trades: pd.DataFrame) -> dict:
        """Per symbol, for the report: its specification's main fields, the bars it lacked on the
        timeline, and its trades' figures (``symbol_table``)."""
        lacked = self.aligned.lacked
        table = symbol_table(trades, list(brokers))
        out = {}
        for name in brokers:
            spec = self.specs[name]
            out[name] = {
                "bars": len(self.frames[name]),
                "lacked_bars": lacked[name],
                "traded": name in self.symbols,
                "digits": spec.digits,
                "contract_size": spec.contract_size,
                "profit_currency": spec.profit_currency,
                "margin_currency": spec.margin_currency,
                **table[name],
            }
        return out


def symbol_table(trades: pd.DataFrame, symbols: list[str]) -> dict[str, dict]:
    """Per symbol: trades, net profit, profit factor, win rate and largest loss (deposit currency; net of
    commission and swap, as MetaTrader's per-symbol figures)."""
    out = {}
    for name in symbols:
        mine = trades[trades["symbol"] == name] if len(trades) else trades
        net = mine["net_profit"].to_numpy(dtype=float) if len(mine) else np.zeros(0)
        gross_win, gross_loss = float(net[net > 0].sum()), float(-net[net < 0].sum())
        out[name] = {
            "trades": len(net),
            "net_profit": round(float(net.sum()), 2),
            "profit_factor": None if gross_loss == 0 else round(gross_win / gross_loss, 4),
            "win_rate": None if not len(net) else round(float((net > 0).mean()), 4),
            "largest_loss": round(float(min(0.0, net.min())) if len(net) else 0.0, 2),
        }
    return out
