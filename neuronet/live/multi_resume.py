"""What a multi-symbol run's journal says, read back to resume it (``multi_runner``).

The journal holds the run's identity (EA, parameters, symbols, timeframes, mode), each symbol's
specification, the history of every (symbol, timeframe), then in order: each bar opened with every
symbol's quote, each request of the EA with the symbol it went to (written before it was sent) and its
result, each decision, each bar closed with every symbol's bars, and on a live account the terminal's own
requests and answers. ``read_multi`` checks the identity and gives the records to replay; the terminal's
notes give the requests whose reply was lost or that were being sent when the run was killed (looked up by
symbol, comment and magic on resume, never sent again) and the day a daily loss halt began.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from backtests.broker import AccountConfig
from datafeeds.candles import CandleMeta
from datafeeds.symbols import SymbolSpec
from datafeeds.timeframes import Timeframe
from neuronet.live.answers import answered
from neuronet.live.context import replay_args
from neuronet.live.errors import JournalError
from neuronet.live.journal import JournalRecords, json_ready
from neuronet.live.multi_paper import Closed, Quote
from neuronet.live.owned import Owned, owned_of
from neuronet.live.rebuild import bars_frame, follow_lost_reply
from neuronet.live.terminal_requests import sent_magic

# Records replayed in order to rebuild the run's state (the rest are read for the live account only).
EVENTS = frozenset({"open", "request", "result", "decision", "bar", "tick"})
_BY_SYMBOL = frozenset({"order", "pending", "close"})  # requests that take symbol= (the rest go by ticket)


@dataclass
class MultiJournal:
    """A multi-symbol journal read back: its start, histories, events, and the live account's notes."""

    start: dict
    specs: dict[str, SymbolSpec]
    frames: dict[tuple[str, str], pd.DataFrame]
    events: list[dict] = field(default_factory=list)
    account: dict | None = None  # live: the first account record (who the run traded as)
    halted_day: int | None = None
    unresolved: dict[str, dict] = field(default_factory=dict)
    stopped: dict | None = None  # the last stop record
    magics: dict[str, set[int]] = field(default_factory=dict)  # live: each symbol's sent requests' numbers
    owned: dict[str, list[Owned]] = field(default_factory=dict)  # live: each symbol's positions seen open


def identity_of(start: dict) -> dict:
    """A journal's identity as ``MultiLiveRunner.identity`` gives it (a one-symbol journal's has its one
    symbol and timeframe as the sets)."""
    keys = ("ea", "params", "symbol", "timeframe", "symbols", "timeframes", "mode")
    out = {k: json_ready(start.get(k)) for k in keys}
    if out["symbols"] is None:
        out["symbols"], out["timeframes"] = [start.get("symbol")], [start.get("timeframe")]
    return out


def check_identity(path: Path, start: dict, mine: dict, account: AccountConfig) -> None:
    """A journal of another run (EA, parameters, symbol set, timeframes, mode, account settings) is
    refused in one line that names what differs."""
    theirs = identity_of(start)
    if theirs != mine:
        diff = ", ".join(f"{k} {theirs[k]!r} here {mine[k]!r}" for k in mine if theirs[k] != mine[k])
        raise JournalError(f"journal {path} belongs to another run ({diff}); give a new --journal")
    try:
        same = AccountConfig(**start["account"]) == account
    except (KeyError, TypeError, ValueError):
        same = False
    if not same:
        raise JournalError(f"journal {path} was written with other account settings; give a new --journal")


def read_multi(path: Path, records: JournalRecords) -> MultiJournal:
    """The journal at ``path`` read back (its identity already checked)."""
    start = records.start
    where = f"journal {path}"
    try:
        specs = {name: SymbolSpec(**values) for name, values in start["specs"].items()}
        meta = CandleMeta.from_dict(start["meta"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise JournalError(f"{where}: its start record cannot be read ({exc})") from None
    out = MultiJournal(start, specs, {})
    in_flight: dict[str, dict] = {}
    for rec in records:
        kind = rec.get("type")
        if kind == "history":
            key = (str(rec.get("symbol")), str(rec.get("timeframe")))
            out.frames[key] = feed_frame(rec, _meta(meta, specs, key), f"{where} line {rec.get('_line')}")
        elif kind in EVENTS and rec.get("source") != "terminal":
            out.events.append(rec)
        elif kind == "stop":
            out.stopped = rec
        elif kind == "account" and out.account is None:
            out.account = rec
        elif rec.get("source") == "terminal":
            note = rec.get("terminal") or {}
            if note.get("event") == "request" and out.events and out.events[-1]["type"] == "request":
                out.events[-1]["_sent"] = True  # the EA's request reached order_check/order_send
            if note.get("event") == "halted":
                out.halted_day = int(note["day"])
            follow_lost_reply(out.unresolved, in_flight, note)
            if (magic := sent_magic(note)) is not None:
                out.magics.setdefault(str(note.get("symbol")), set()).add(magic)
            if (position := owned_of(note, f"{where} line {rec.get('_line')}")) is not None:
                out.owned.setdefault(position.symbol, []).append(position)
    for tag, note in in_flight.items():  # killed while sending: looked up, counted open, never sent again
        out.unresolved.setdefault(tag, note)
    if (start.get("symbol"), start.get("timeframe")) not in out.frames:
        raise JournalError(f"{where}: it has no history of its main chart; give a new --journal")
    return out


def feed_frame(columns: dict, meta: CandleMeta, where: str) -> pd.DataFrame:
    """Bars journaled as columns (``rebuild.history_record``: times in UTC seconds) as a candle frame."""
    try:
        times = [pd.Timestamp(int(s), unit="s", tz="UTC") for s in columns.get("time", [])]
    except (TypeError, ValueError, OverflowError) as exc:
        raise JournalError(f"{where}: bar times cannot be read ({exc})") from None
    return bars_frame(columns, times, meta, where)


def _meta(main: CandleMeta, specs: dict[str, SymbolSpec], key: tuple[str, str]) -> CandleMeta:
    """The candles' identity of ``key``: the main chart's clock and source, the symbol's digits."""
    spec = specs.get(key[0])
    digits = spec.digits if spec is not None else main.digits
    return CandleMeta(key[0], Timeframe.parse(key[1]), digits, main.clock, source=main.source)


def replay(run: Any, events: list[dict], journal: Path) -> list[dict] | None:
    """Bring ``run`` (a ``MultiLiveRunner`` being resumed) to where its journal ends: every bar opened and
    closed again on its views and paper account, and on paper every request made again (each must give
    the answer journaled). Returns the requests journaled for a bar whose ``on_bar`` the stop cut short
    (decided again on resume, these not sent again), or None when no bar was cut short."""
    paper = run.paper.context if run.paper is not None else None
    decided: set[int] = set()
    made: list[dict] = []  # the EA's requests of the bar forming, with their journaled answers
    for rec in events:
        kind, where = rec["type"], f"journal {journal} line {rec.get('_line')}"
        try:
            if kind == "open":
                if int(rec["bar"]) != run.t:
                    raise JournalError(f"{where}: bar {rec['bar']} opens after bar {run.t - 1}")
                quotes = {
                    k: None if v is None else Quote(float(v[0]), float(v[1]))
                    for k, v in rec["quotes"].items()
                }
                run.open_bar(run.t, pd.Timestamp(rec["time"]), quotes)
                made = []
            elif kind == "tick" and run.paper is not None:
                run.paper.set_tick({k: Quote(float(v[0]), float(v[1])) for k, v in rec["quotes"].items()})
            elif kind == "request":
                entry = {"call": rec["call"], "symbol": rec.get("symbol"), "args": rec["args"], "value": None}
                entry["sent"] = bool(rec.get("_sent"))
                if paper is not None:
                    kw = {"symbol": rec["symbol"]} if rec.get("symbol") and rec["call"] in _BY_SYMBOL else {}
                    entry["made"] = getattr(paper, rec["call"])(*replay_args(rec["call"], rec["args"]), **kw)
                made.append(entry)
            elif kind == "result":
                entry = made[-1]
                entry["value"], entry["retcode"] = rec.get("value"), rec.get("retcode")
                if paper is not None and json_ready(entry["made"]) != json_ready(rec.get("value")):
                    raise JournalError(
                        f"{where}: {rec['call']} made again answers {entry['made']!r}, the journal "
                        f"{rec.get('value')!r}; the journal does not match its bars"
                    )
            elif kind == "decision":
                decided.add(int(rec["bar"]))
            elif kind == "bar":
                closed = {
                    k: None if v is None else Closed(float(v["high"]), float(v["low"]), float(v["close"]))
                    for k, v in rec["bars"].items()
                }
                new = {}
                for name, columns in (rec.get("feeds") or {}).items():
                    key = tuple(name.split(" ", 1))
                    new[key] = feed_frame(columns, run.views.feeds[key].meta, where)
                run.close_bar(int(rec["bar"]), closed, new)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise JournalError(
                f"{where}: a {kind} record cannot be replayed ({type(exc).__name__}: {exc})"
            ) from None
    if run.forming is None or run.forming[0] in decided:
        return None
    return answered(made, live=paper is None)
