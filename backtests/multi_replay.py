"""The replay of a multi-symbol, multi-timeframe EA (``backtests.multi`` says how the symbols share the
account and the timeline): open prices, every symbol's M1 bars (``backtests.merged``) or every symbol's
ticks (``backtests.merged_ticks``) worked in time order. ``Backtest`` hands a run here when it is given a
frame per symbol or the EA declares several symbols or timeframes; everything else is the one-symbol
replay's.

Open prices know each symbol's bar (open, high, low, close), never when one symbol's prices came relative
to another's, so each symbol holding positions or orders works its own range with the others standing
still. A symbol stands at its open until its own range has changed its positions: a pending order filled
inside the bar, a position closed or reduced there (a stop, a stop-out, a netting fill that reduces or
reverses it). From then on, where the account's money still reads its price (positions of its own, or
another symbol's positions whose profit it converts, even with its own all closed), while the symbols
after it work their ranges (their free-margin checks, their stop-outs, the converting pairs' steps of
``backtests.pair_moves``, any conversion through it), it stands at its close, or at its fill where that is
worse for the account:

- never at its open, a price from before the fill. A sell limit met at 1.10100 above an open of 1.09600
  shows 500 dollars a lot at the open, profit the position never had (the bar may never come back after
  the fill); that money would pay another order's margin (MetaTrader's trade server refuses it: 10019, no
  money) and hold off a stop-out. The same holds for what a closing deal left (a stop, a partial close, a
  reversal): its profit or loss is booked at that deal's price, so the rest valued at an earlier price
  mixes two moments the account never had at once.
- the close is the one price of the bar known to come after every deal of the symbol's range, whatever
  their order (open prices fill a bar's pending orders before they check its stops, not in time order), so
  the balance with every deal booked and the positions valued there is a state the account truly had.
  Where every deal of the range came at one price (a fill, a netting reversal's two deals), the state
  just after them is one too, and whether another symbol's order came nearer the fill or the close is
  unknown: the worse of the two for the account is taken (``after_range``), since a figure wrong in the
  trader's favour is the worse error and neither is a price the position did not see. Worse is judged
  with the other symbols at the worst of their bars, where a stop-out or a refusal can come: a converting
  pair's price weighs the positions it converts too (a loss in pounds costs more dollars at GBPUSD's
  higher price even where GBPUSD's own long is worth less at its lower fill). With deals at
  several prices, one of them may come before another's fill: the close alone is then known good.
- not the worst of the bar after the fill: that would pair one symbol's adverse extreme with another's at
  once, when nothing says they came together, and could make a stop-out or a refusal no price order
  produces. Where the order across symbols matters, ``ohlc1m`` and ``ticks`` walk every symbol in time.

A stop-loss or take-profit moved inside the bar needs a decision inside it, which open prices never have
(``on_bar`` decides at the open). Once every symbol has worked its range, each stands at its open again
until the next bar's open, which is what the EA's next decision sees; a one-symbol run has no other symbol
to walk after it, so its figures are those of the one-symbol rules.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from backtests.account_path import account_drawdowns
from backtests.bar_plan import BarPlan
from backtests.broker import AccountConfig
from backtests.broker.market import server_days
from backtests.broker.terms import check_spec_settings
from backtests.context import TradingContext
from backtests.errors import SymbolsError
from backtests.heap import settled_heap
from backtests.merged import closed_at, open_quotes, walk_bar
from backtests.merged import to_decision as minutes_to_decision
from backtests.merged_ticks import to_decision, walk_ticks
from backtests.multi import MultiSetup
from backtests.pair_moves import PairMoves, moved_by
from backtests.paths import COVERAGE, MODELS, M1Path, ModelDataError, check_inside, check_market
from backtests.periods import Periods, resolve
from backtests.replay import Result, _criterion, _lap, broker_figures, indicators_on
from backtests.ticks import TickPath
from datafeeds import meta_of
from strategies.base import call_hook, make_ea
from strategies.errors import EARuntimeError

log = logging.getLogger(__name__)


class MultiBacktest:
    """A multi-symbol run (see the module docstring); ``Backtest`` builds it and delegates ``run``."""

    def __init__(
        self,
        frames: Mapping[str, pd.DataFrame],
        ea: type,
        *,
        account: AccountConfig,
        forward,
        walk_forward,
        seed: int,
        model: str,
        specs: Mapping | None,
        m1: Mapping[str, pd.DataFrame] | None = None,
        ticks: Mapping[str, pd.DataFrame] | None = None,
        on_ready=None,
    ):
        if model not in MODELS:
            raise SymbolsError(f"model {model!r}: choose {', '.join(MODELS)}")
        if model == "ohlc1m" and not isinstance(m1, Mapping):
            raise SymbolsError("model 'ohlc1m' with several symbols needs m1={symbol: M1 candles, ...}")
        if model == "ticks" and not isinstance(ticks, Mapping):
            raise SymbolsError("model 'ticks' with several symbols needs ticks={symbol: ticks, ...}")
        if model != "ohlc1m" and m1 is not None:
            raise SymbolsError("M1 candles are only used by model 'ohlc1m'")
        if model != "ticks" and ticks is not None:
            raise SymbolsError("ticks are only used by model 'ticks'")
        check_spec_settings(account)  # each symbol's specification gives these
        self.setup = MultiSetup(frames, ea, specs, account.currency)
        self.paths = (
            minute_paths(self.setup, m1, account)
            if model == "ohlc1m"
            else tick_paths(self.setup, ticks, account)
            if model == "ticks"
            else {}
        )
        self.ea_class = ea
        self.on_ready = on_ready
        self.account = account
        self.seed = seed
        self.model = model
        self.meta = self.setup.meta
        self.periods: Periods = resolve(
            self.setup.aligned.time, forward, walk_forward, min_study=int(ea.min_study_bars)
        )

    def run(self, **params) -> Result:
        timings: dict[str, float] = {}
        clock = time.perf_counter()
        if "seed" in self.ea_class.param_defaults() and "seed" not in params:
            params["seed"] = self.seed
        ea = make_ea(self.ea_class, params)
        if ea.wants_ticks():
            log.warning(
                "%s.on_tick is not called in a multi-symbol run; it decides in on_bar only", type(ea).__name__
            )
        periods = self.periods.for_ea(int(ea.retrain_every))
        setup = self.setup
        views = setup.feeds()
        feed = views.feeds[setup.main]
        times = setup.aligned.time
        stamps = np.asarray(times.as_unit("ns").asi8, dtype=np.int64)
        fs, n = periods.forward_start, periods.n
        rng = np.random.default_rng(self.seed)
        m = len(feed)

        def probes() -> list[int]:
            start = views.visible_at(setup.main, int(stamps[fs]))
            points = {start, m // 2, int(rng.integers(max(2, m // 4), max(3, m)))}
            return sorted(p for p in points if 2 <= p < m)

        brokers = setup.brokers(self.account)
        for name, path in self.paths.items():
            brokers[name].attach_path(path.for_run(None))
        ctx = TradingContext(brokers, setup.main[0], indicators_on(feed, probes))
        main = ctx.main
        ea.attach(ctx, feed.bars, None, views=views)
        call_hook(ea, "on_init", where="before the first bar")
        if self.on_ready is not None:
            self.on_ready()
        timings["init_s"] = _lap(clock)
        clock = time.perf_counter()
        self._study(ea, views, periods, fs, stamps, brokers)
        timings["study_s"] = _lap(clock)
        clock = time.perf_counter()
        with settled_heap():  # the heap of before out of the collector's full passes (``backtests.heap``)
            self._replay(ea, views, periods, stamps, brokers, timings)
        timings["replay_s"] = round(_lap(clock) - timings.get("retrain_s", 0.0), 6)
        last = n - 1
        clock = time.perf_counter()
        for broker in brokers.values():
            broker.to_close(last)  # every conversion pair at its close before any end-of-test deal
        for broker in brokers.values():
            broker.finish(last)
        ea.mark_run(complete=True, interrupted=None)
        call_hook(ea, "on_deinit", where=f"after bar {last} ({times[last]})", bar=last, time=times[last])
        return self._score(ea, main, brokers, feed, periods, last, timings, clock)

    def _study(self, ea, views, periods, t: int, stamps, brokers) -> None:
        """``on_study`` before timeline bar ``t`` with the main chart's bars of the study window."""
        for broker in brokers.values():
            broker.t = t
        views.advance(int(stamps[t]))
        a, _ = periods.study_range(t)
        main = views.main
        start = views.visible_at(main, int(stamps[a])) if a > 0 else 0
        end = views.visible_at(main, int(stamps[t]))
        when = self.setup.aligned.time[t]
        bars = views.feeds[main].bars
        call_hook(ea, "on_study", bars.window(start, end), where=f"before bar {t} ({when})", bar=t, time=when)

    def _replay(self, ea, views, periods, stamps, brokers, timings) -> None:
        fs, n, every = periods.forward_start, periods.n, periods.retrain_every
        if every:
            timings["retrain_s"] = 0.0
        desks = list(brokers.values())
        on_bar, times = ea.on_bar, self.setup.aligned.time
        schedule = views.schedule(stamps)  # each bar's reveals, listed once: one pass of calls a bar
        opening, closing = (
            open_prices(desks) if not self.paths else price_paths(desks, ticks=self.model == "ticks")
        )
        for t in range(fs, n):
            if every and periods.retrains_at(t):
                tick = time.perf_counter()
                self._study(ea, views, periods, t, stamps, brokers)
                timings["retrain_s"] += time.perf_counter() - tick
            opening(t)
            for reveal, visible in schedule[t]:
                reveal(visible)
            try:
                on_bar()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                raise EARuntimeError(
                    type(ea).__name__, "on_bar", f"at bar {t} ({times[t]})", exc, t, times[t]
                ) from exc
            closing(t)

    def _score(self, ea, main, brokers, feed, periods, last, timings, clock) -> Result:
        fs = periods.forward_start
        times = self.setup.aligned.time
        records = main.ledger.snapshot()  # the records the figures are of: ``on_tester`` may still trade
        figures = broker_figures(main, fs, last, self.account, path=account_drawdowns)
        after = "after the run"
        feed.advance(len(feed))
        section = call_hook(ea, "report_section", feed.bars, where=after)
        timings["evaluate_s"] = _lap(clock)
        criterion = _criterion(ea, call_hook(ea, "on_tester", dict(figures.stats), where=after))
        charts = {
            name: symbol_chart(brokers[name], fs, last) for name in self.setup.symbols if name in brokers
        }
        return Result(
            ea=call_hook(ea, "describe", where=after),
            data={
                **self.meta.to_dict(),
                "bars": len(times),
                "first": str(times[0]),
                "last": str(times[-1]),
                "forward_first": str(times[fs]),
                "forward_last": str(times[last]),
                "model": self.model,
                **(
                    {
                        ("tick_quality" if self.model == "ticks" else "m1_quality"): {
                            n: p.quality(fs, last) for n, p in self.paths.items()
                        }
                    }
                    if self.paths
                    else {}
                ),
                "symbols": self.setup.describe(brokers, figures.trades),
                "timeframes": list(self.setup.timeframes),
            },
            account=self.account.to_dict(),
            periods=periods.to_dict(),
            trades=figures.trades,
            time=times[fs : last + 1],
            balance=figures.balance,
            equity=figures.equity,
            stats=figures.stats,
            predictions=None,
            training=list(ea.training_log),
            timings=timings,
            rejected=list(records.rejected),
            complete=True,
            seed=self.seed,
            custom_criterion=criterion,
            chart_data=charts[self.setup.main[0]],
            section=section,
            ea_instance=ea,
            orders=records.orders_frame,  # built on first read (``Result``)
            deals=records.deals_frame,
            curves=figures.curves,
            equity_path=figures.equity_path,
            symbol_charts=charts,
        )


def open_prices(desks: list) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """A bar's work before and after the EA's decision in open prices: every symbol enters the bar (so
    each reads the others' prices of the moment) before any is checked; a symbol with nothing open or
    pending has nothing to check, at the open or over the range; then the pairs that convert a held
    symbol's profit move through their bars (``backtests.pair_moves``).

    Each symbol works its range with the others standing at a price of theirs: the open, or, for a symbol
    whose own range changed its positions (a pending order filled, a position closed or reduced) and
    that still holds some or converts another's profit, its close or its fill, the worse for the account
    (``after_range``; the module docstring says why); after the bar every symbol stands at its open again,
    which the EA's next decision replaces with the next bar's."""
    books = [(d, d.book) for d in desks]

    def opening(t: int) -> None:
        for d in desks:
            d.enter(t)
        for d in desks:  # every symbol's rollover before any symbol's checks (``Broker.rollover``)
            d.rollover(t)
        for d, book in books:
            if book.positions or book.orders:
                d.open_checks(t, None)

    pairs = PairMoves(desks)
    moves = pairs.check if pairs else None  # the converting pairs are fixed for the run: asked once

    def closing(t: int) -> None:
        moved = []
        for d, book in books:
            if book.positions or book.orders:
                before, first = book.changes, d.ledger.deal_count()
                d.bar_range(t)
                if book.changes != before and (book.positions or _converts_held(d, desks)):
                    d.inside = after_range(d, t, first, desks)
                    moved.append(d)
        if moves is not None:
            moves(t)
        for d in moved:
            d.inside = None

    return opening, closing


def after_range(desk, t: int, first: int, desks: list) -> tuple[float, float]:
    """Where ``desk`` stands (bid, ask in points) once its open-prices range has changed its positions in
    bar ``t`` (``first``: the account's deals before that range): its close, or the price of its range's
    deals where they all came at one price (a fill, a netting reversal's two deals) and the account is
    worth less there than at the close. Both are states the account truly had after every deal of the
    range; the worse of the two is taken (the module docstring). Worse is judged with every other symbol of
    ``desks`` at the worst of its bar for the account (longs at its lowest bid, shorts at its highest ask),
    where a stop-out or a refused fill can come: ``desk``'s price converts the profit of other symbols'
    positions (GBPUSD, EURGBP's pounds), and a loss of theirs weighs more at the higher rate of the two even
    where ``desk``'s own positions are worth less at the other."""
    m = desk.market
    close = m.close_quote(t)
    symbol = desk.symbol
    made = {(deal.type, deal.price) for deal in desk.ledger.deals[first:] if deal.symbol == symbol}
    if len(made) != 1:
        return close
    ((kind, price),) = made
    points = desk.to_points(price)
    spread = m.s[t]  # the spread its range was worked at (``Broker.bar_range``)
    bid = points if kind == "sell" else points - spread  # a sell deals at the bid, a buy at the ask
    deal = (bid, bid + spread)
    others = [d for d in desks if d is not desk and d.book.positions and not closed_at(d, t)]
    kept = [d.inside for d in others]
    for d in others:
        worst = d.market.extremes()
        d.inside = (worst.bid_low.item(t), worst.ask_high.item(t))
    try:
        return deal if _equity_at(desk, deal) < _equity_at(desk, close) else close
    finally:
        for d, inside in zip(others, kept, strict=True):
            d.inside = inside


def _equity_at(desk, quote: tuple[float, float]) -> float:
    """The account's equity with ``desk`` standing at ``quote`` and every other symbol where it stands now:
    ``desk``'s own positions and those whose profit it converts, each valued at that quote."""
    kept, desk.inside = desk.inside, quote
    try:
        return desk.funds.equity_now()
    finally:
        desk.inside = kept


def _converts_held(desk, desks: list) -> bool:
    """Whether ``desk``'s price converts the profit of another symbol's open positions (``money_pairs``)."""
    return any(d.book.positions for d in moved_by(desks, desk))


def rollover(desks: list, t: int) -> None:
    """Every symbol's rollover of bar ``t`` (``Broker.rollover``) before any symbol's checks there, at the
    account's first price of the bar (the tester's first tick of it, after the server's midnight where the
    day changed between the bars): the symbols whose first minute or tick of the bar comes then stand at it,
    the others at their last minute's close or tick before the bar, so a swap converted through a pair or
    valued at a price reads that moment's price, never a first price of the bar still to come. The nights
    are those up to that moment's server day: where another symbol's bar opens only after a midnight the
    account has not reached yet, that night is charged at the first minute or tick after it
    (``Broker.midnights``) or at the decision where that comes first (``price_paths``), never before it."""
    if any(d.rolls(t) for d in desks):
        firsts = [d.price_path.opening_ns(t) if d.price_path.covers(t) else None for d in desks]
        first = min((ns for ns in firsts if ns is not None), default=None)
        day = (
            None if first is None else int(server_days(np.array([first], dtype=np.int64), desks[0].clock)[0])
        )
        kept = [(d.now, d.inside) for d in desks]
        for d, ns in zip(desks, firsts, strict=True):
            before = d.price_path.quote_before(t) if ns != first else None
            if before is not None:
                d.now, d.inside = None, before
        try:
            for d in desks:
                d.rollover(t, day, first)
        finally:
            for d, (now, inside) in zip(desks, kept, strict=True):
                d.now, d.inside = now, inside
    for d in desks:
        d.rolled = t  # looked at: none rolls again in its checks of this bar


def price_paths(desks: list, ticks: bool) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """The same for every symbol's minutes (``backtests.merged``) or ticks (``backtests.merged_ticks``):
    the bar opens at each symbol's first minute or tick, the prices move on to the decision, and after
    it the bar's minutes or ticks of every symbol are walked in time order. Each symbol's opening checks
    are made at its own first minute or tick, in time order with the other symbols' minutes or ticks
    before the decision (``merged.to_decision``, ``merged_ticks.to_decision``)."""
    walk = walk_ticks if ticks else walk_bar
    plan = BarPlan(desks, "right" if ticks else "left")  # each bar's moments and rows, found once a run
    days = server_days(np.asarray(plan.decision, dtype=np.int64), desks[0].clock).tolist()
    main = desks[0]

    def opening(t: int) -> None:
        entered = [d.enter(t) for d in desks]
        rollover(desks, t)
        if ticks:  # each symbol's opening checks at its own first tick, in time order with the others' ticks
            to_decision(desks, t, plan)
        else:  # each symbol's opening checks at its own first minute, in time order with the others' minutes
            minutes_to_decision(desks, t, plan, open_quotes(desks, t, entered, plan))
        # The decision's moment may be the account's first price after a midnight that the bar's rollover
        # came before (its first price earlier): the night is charged before the EA decides.
        if any(d.book.positions for d in desks):
            main.midnight(days[t], int(plan.decision[t]))

    def closing(t: int) -> None:
        walk(desks, t, plan)

    return opening, closing


def minute_paths(setup: MultiSetup, m1: Mapping[str, pd.DataFrame], account: AccountConfig) -> dict:
    """Each loaded symbol's M1 path on the account's timeline, its minutes checked against its own candles
    as a single-symbol run checks them (``backtests.paths``); minutes for a symbol not loaded are refused."""
    extra = sorted(set(m1) - set(setup.frames))
    if extra:
        raise SymbolsError(
            f"M1 candles for {', '.join(extra)}, which this run does not load "
            f"(loaded: {', '.join(setup.frames)})"
        )
    missing = [s for s in setup.frames if s not in m1]
    if missing:
        raise SymbolsError(f"model 'ohlc1m' needs the M1 candles of {', '.join(missing)} too")
    paths = {}
    for name, df in setup.frames.items():
        meta, minutes = meta_of(df), m1[name]
        check_market(df, meta, minutes, "M1 bars")
        fixed = account.spread
        if fixed is None and "spread" in minutes and not minutes["spread"].to_numpy().any():
            fixed = account.missing_spread
        own = M1Path(df.index, minutes, meta.point, fixed)
        check_inside(df, meta, minutes, own.starts, COVERAGE["ohlc1m"])
        paths[name] = M1Path(setup.aligned.time, minutes, meta.point, fixed)
    return paths


def tick_paths(setup: MultiSetup, ticks: Mapping[str, pd.DataFrame], account: AccountConfig) -> dict:
    """Each loaded symbol's tick path on the account's timeline, its ticks checked against its own candles
    as a single-symbol run checks them (``backtests.ticks``); ticks of a symbol the run does not load, a
    loaded symbol without ticks, and ticks of another market are one line naming the symbol."""
    extra = sorted(set(ticks) - set(setup.frames))
    if extra:
        raise SymbolsError(
            f"ticks for {', '.join(extra)}, which this run does not load (loaded: {', '.join(setup.frames)})"
        )
    missing = [s for s in setup.frames if s not in ticks]
    if missing:
        raise SymbolsError(f"model 'ticks' needs the ticks of {', '.join(missing)} too")
    paths = {}
    for name, df in setup.frames.items():
        meta, own_ticks = meta_of(df), ticks[name]
        try:
            check_market(df, meta, own_ticks, "ticks")
            own = TickPath(df.index, own_ticks, meta.point, account.spread)
            check_inside(df, meta, own_ticks, own.starts, COVERAGE["ticks"])
        except ModelDataError as exc:
            raise ModelDataError(f"{name}: {exc}") from None
        paths[name] = TickPath(setup.aligned.time, own_ticks, meta.point, account.spread)
        paths[name].screen_bars()
    return paths


def symbol_chart(broker, fs: int, last: int, span: int = 160) -> dict:
    """A symbol's last ``span`` forward bars on the account's timeline, as ``chart_data`` gives the main
    chart's (bar indices are the timeline's, as the trades' are; flat where the symbol had no bar)."""
    m = broker.market
    a = max(fs, last + 1 - span)
    return {
        "index": np.arange(a, last + 1),
        "time": m.time[a : last + 1],
        "open": m.opens[a : last + 1],
        "high": m.highs[a : last + 1],
        "low": m.lows[a : last + 1],
        "close": m.closes[a : last + 1],
    }
