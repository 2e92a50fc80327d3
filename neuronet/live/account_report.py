"""The report of a live-account run: the journal's bars and settings, the terminal's deals and orders.

The journal holds what the run saw (its bars, in broker time converted to UTC) and who it was (the
``account`` record: the EA's magic number and the account's balance, currency and leverage at the start;
the magic numbers its requests carried). The money is the terminal's: ``history_deals_get`` and
``history_orders_get`` over the run's span, kept where the symbol is the run's and the magic number one of
the run's (or the position they belong to is the run's, opened in the span or before it: ``carried``), and
booked into the backtest's ledger by ``TerminalLedger``. The span runs from the opening of
the first bar the run decided on to the end of the bar that was forming at its last closed bar (a close
made at the stop falls there), in the journal's broker clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig
from backtests.broker.portfolio import open_brokers
from datafeeds.candles import CandleMeta
from datafeeds.symbols import SpecError, spec_from_symbol_info
from datafeeds.terminal_errors import error_from_last_error
from neuronet.live import retcodes
from neuronet.live.carried import Carried, carried_positions
from neuronet.live.errors import JournalError
from neuronet.live.identity import check_same_account
from neuronet.live.owned import Owned, owned_in
from neuronet.live.rebuild import JournalState
from neuronet.live.terminal_ledger import StopChange, TerminalLedger

RES_S_OK = 1
COLUMNS = ("open", "high", "low", "close", "spread")  # a broker's bar columns, then the times


@dataclass(frozen=True)
class RunIdentity:
    """What the journal says about the account and the EA of a live run."""

    magics: frozenset[int]
    balance: float
    currency: str
    leverage: float
    login: int | None = None  # the trading account (None: a journal of an older neuronet)
    server: str | None = None


def run_identity(path: str, records: Iterable[dict]) -> RunIdentity:
    """The magic numbers of the run (the EA's, and any its requests carried) and its account at the start
    (``records`` is passed over twice: a ``JournalRecords`` reads it again from disk)."""
    account = next((r for r in records if r["type"] == "account"), None)
    if account is None:
        raise JournalError(
            f"journal {path}: no account record (written by an older neuronet, or the run "
            "stopped before it reached the terminal); its deals cannot be told from others'"
        )
    try:
        magics = {int(account["magic"])}
        for rec in records:
            request = (rec.get("terminal") or {}).get("request") if rec["type"] == "request" else None
            if isinstance(request, dict) and "magic" in request:
                magics.add(int(request["magic"]))
        login = account.get("login")
        return RunIdentity(
            frozenset(magics),
            float(account["balance"]),
            str(account["currency"]),
            float(account["leverage"]),
            None if login is None else int(login),
            None if login is None else str(account["server"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(
            f"journal {path} line {account['_line']}: the account record cannot be read ({exc})"
        ) from None


def stop_changes(path: str, records: Iterable[dict]) -> list[StopChange]:
    """The run's successful ``sltp`` requests (the EA's ``modify``), from the terminal's records in the
    journal: a request's id, position and levels, its success from its result or, after a lost reply,
    from its recovery; its time is that of the EA's call it came from."""
    asked: dict[str, tuple[int, int, float | None, float | None]] = {}
    out: list[StopChange] = []
    when = None
    for rec in records:
        note = rec.get("terminal")
        note = note if isinstance(note, dict) else {}
        try:
            if rec["type"] == "request" and "call" in rec:
                when = pd.Timestamp(rec["time"]).value
            elif note.get("event") == "request" and note.get("action") == "sltp" and when is not None:
                req = note["request"]
                levels = (float(req.get("sl") or 0.0) or None, float(req.get("tp") or 0.0) or None)
                asked[str(note["id"])] = (when, int(req["position"]), *levels)
            elif note.get("event") in ("result", "recovered") and note.get("retcode") in retcodes.SUCCESS:
                change = asked.pop(str(note.get("id")), None)
                if change is not None:
                    out.append(StopChange(*change))
        except (KeyError, TypeError, ValueError) as exc:
            where = f"journal {path} line {rec['_line']}"
            raise JournalError(f"{where}: a change of stops cannot be read ({exc})") from None
    return out


def _read(source: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """A terminal read: the answer, or the terminal's error raised as a ``TerminalError``."""
    answer, error = source.call(name, *args, **kwargs)
    if error is not None and error[0] != RES_S_OK:
        raise error_from_last_error(f"{name}()", *error)
    return answer


def check_login(path: str, who: RunIdentity, source: Any) -> None:
    """The terminal must be logged in to the account the run traded on: another's deals are not its money."""
    if who.login is not None:
        journaled = {"login": who.login, "server": who.server}
        check_same_account(
            path, journaled, _read(source, "account_info"), "log it in to that account for the report"
        )


def scored_config(path: str, start: dict, who: RunIdentity, **settings: Any) -> AccountConfig:
    """The account a live run is scored with: the run's settings, with the terminal account's balance at the
    start as the deposit, its currency and leverage, and no modelled costs (the deals carry the
    terminal's own commission, fees and swaps); ``settings`` replace further fields."""
    try:
        return replace(
            AccountConfig(**start["account"]),
            deposit=who.balance,
            currency=who.currency,
            leverage=who.leverage,
            spread=None,
            commission=0.0,
            swap_long=0.0,
            swap_short=0.0,
            **settings,
        )
    except ValueError as exc:  # a balance or leverage of 0: nothing a report can be scored on
        raise JournalError(f"journal {path}: the account at the start cannot be scored on ({exc})") from None


def run_span(times: pd.DatetimeIndex, first: int, meta: CandleMeta) -> tuple[int, int]:
    """The run's span in broker seconds ``[lo, hi)``: from the opening of bar ``first`` (the first live
    bar) to the end of the bar forming after the last closed one (a close at the stop falls there)."""
    step = pd.Timedelta(seconds=meta.timeframe.seconds)
    first_utc, end_utc = times[first], times[-1] + 2 * step
    utc = np.array([first_utc.value // 10**9, end_utc.value // 10**9], dtype=np.int64)
    lo, hi = (int(v) for v in meta.clock.to_broker_seconds(utc))
    return lo, hi


def journaled_deals(records: Iterable[dict]) -> set[int]:
    """The deal tickets the terminal answered the run's requests with (its "result" notes)."""
    out = set()
    for rec in records:
        note = rec.get("terminal") if rec.get("source") == "terminal" else None
        if not isinstance(note, dict) or note.get("event") != "result":
            continue
        if note.get("retcode") in retcodes.SUCCESS and int(note.get("deal") or 0) > 0:
            out.add(int(note["deal"]))
    return out


@dataclass(frozen=True)
class RunRows:
    """One symbol's part of the terminal's history that is the run's (``run_history``)."""

    deals: list[Any]
    orders: list[Any]
    carried: dict[int, Carried]  # its positions opened before the run with deals in it (``carried``)


def run_history(
    source: Any,
    who: RunIdentity,
    symbols: Iterable[str],
    span: tuple[int, int],
    path: str,
    made: set[int],
    owned: dict[int, Owned] | None = None,
) -> dict[str, RunRows]:
    """Per symbol of the run, the terminal's buy and sell deals and its orders over ``span`` carrying one
    of the run's magic numbers, or belonging to a position the run opened in it (deals of other symbols,
    other EAs and manual trades are not the run's, unless they close or change its positions).
    ``made``: the deals the journal says the run made (``journaled_deals``); one the terminal's history
    lacks (a history cut short) is refused: the report would leave its money out, or take the rest of its
    position for one opened before the run. A position of the run opened before the span and closed in
    it (by the EA, by hand, by another EA) is the run's too (``carried.carried_positions``; ``owned``: the
    journal's "owned" notes, ``owned.owned_in``)."""
    lo, hi = span
    deals = _read(source, "history_deals_get", lo, hi) or ()
    orders = _read(source, "history_orders_get", lo, hi) or ()
    lacked = sorted(made - {int(d.ticket) for d in deals})
    if lacked:
        raise JournalError(
            f"journal {path}: the terminal's deal history lacks deal(s) {', '.join(f'#{t}' for t in lacked)} "
            "that the run made (its history is cut short: load more of it in the terminal's History tab)"
        )

    def inside(rows: Any, symbol: str, when: str) -> list[Any]:
        return [r for r in rows if r.symbol == symbol and lo <= int(getattr(r, when)) < hi]

    def position_deals(pid: int) -> Any:
        return _read(source, "history_deals_get", position=pid)

    def position_held(pid: int) -> float | None:
        """Position ``pid``'s signed lots open on the terminal now (0 when closed)."""
        rows = _read(source, "positions_get", ticket=pid)
        if rows is None:
            return None
        return sum(float(p.volume) * (1 if int(p.type) == 0 else -1) for p in rows if int(p.ticket) == pid)

    def run_rows(symbol: str) -> RunRows:
        """The run's deals and orders of ``symbol``: of its magic numbers, and any other of a position they
        opened, in the span or before it (closed by hand, that deal and its order carry magic 0; by
        another EA, its number): its money is the run's, as MetaTrader books it on the run's position
        (``DEAL_POSITION_ID``)."""
        rows = [d for d in inside(deals, symbol, "time") if int(d.type) in (0, 1)]
        opened = {int(d.position_id) for d in rows if int(d.magic) in who.magics and int(d.entry) == 0}
        carried = carried_positions(position_deals, who.magics, rows, owned or {}, lo, path, position_held)
        runs = opened | set(carried)

        def ours(r: Any) -> bool:
            return int(r.magic) in who.magics or int(getattr(r, "position_id", 0) or 0) in runs

        mine = [o for o in inside(orders, symbol, "time_setup") if ours(o)]
        return RunRows([d for d in rows if ours(d)], mine, carried)

    return {name: run_rows(name) for name in symbols}


def terminal_ledger(
    path: str, records: Iterable[dict], state: JournalState, source: Any
) -> tuple[TerminalLedger, AccountConfig, RunIdentity]:
    """The run's ``TerminalLedger``, booked from the terminal behind ``source`` (``TerminalSource`` or any
    object with its ``call``), and the account it was scored with."""
    who = run_identity(path, records)
    check_login(path, who, source)
    start, meta, bars, fs = state.start, state.meta, state.bars, state.forward_start
    symbol = str(start["symbol"])
    info = _read(source, "symbol_info", symbol)
    if info is None:
        raise JournalError(f"journal {path}: the terminal has no symbol {symbol!r}")
    span = run_span(bars.index, fs, meta)
    rows = run_history(source, who, (symbol,), span, path, journaled_deals(records), owned_in(records, path))[
        symbol
    ]
    try:  # no modelled costs: the deals carry the terminal's swaps
        spec = replace(spec_from_symbol_info(info), swap_long=0.0, swap_short=0.0)
    except SpecError as exc:
        raise JournalError(f"journal {path}: {exc}") from None
    config = scored_config(path, start, who, contract_size=spec.contract_size)
    # The symbol's money in the account currency (USDJPY's yen in dollars, EURUSD's dollars on a euro
    # account), as the multi-symbol report values it: open positions and the end-of-test close included.
    cols = (*(bars[c].to_numpy(dtype=np.float64) for c in COLUMNS), bars.index.as_unit("ns"))
    broker = open_brokers({symbol: cols}, {symbol: spec}, scored_config(path, start, who), meta.clock)
    ledger = TerminalLedger(broker[symbol], meta.clock)
    ledger.carry(rows.carried)
    ledger.book(rows.deals, rows.orders, fs, stop_changes(path, records))
    return ledger, config, who
