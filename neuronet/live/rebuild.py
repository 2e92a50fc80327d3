"""A run's state rebuilt from its journal: the bars, the bar still forming, and a paper account.

Used twice: a restart with the same journal resumes from it (``neuronet live`` goes on after the last
bar processed), and ``neuronet live report`` scores it. A paper account is rebuilt by making the
journaled trade requests again on a fresh ``PaperBroker`` over the journaled bars and prices; the broker
is deterministic, so the answers must be the ones journaled — a difference means the journal was edited
or written by another version, and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig
from datafeeds.candles import COLUMNS, CandleMeta, make_frame
from neuronet.live.answers import answered
from neuronet.live.context import REQUESTS, replay_args
from neuronet.live.errors import JournalError
from neuronet.live.journal import json_ready
from neuronet.live.owned import Owned, owned_of
from neuronet.live.paper import PaperBroker
from neuronet.live.terminal_requests import sent_magic


@dataclass
class JournalState:
    """What a journal says: its start record, the closed bars (history first), the forming bar."""

    path: str
    start: dict
    meta: CandleMeta
    bars: pd.DataFrame  # every closed bar, the history's and the run's
    forward_start: int
    forming: tuple[int, pd.Timestamp] | None = None  # bar index and open time of a bar decided, not closed
    decided: set[int] = field(default_factory=set)  # bars whose on_bar finished
    broker: PaperBroker | None = None  # paper runs only
    stopped: dict | None = None  # the last stop record
    halted_day: int | None = None  # live: the last server day the daily loss limit was reached on
    unresolved: dict[str, dict] = field(default_factory=dict)  # live: lost replies not settled (id -> note)
    account: dict | None = None  # live: the first account record (who the run traded as)
    again: list[dict] = field(default_factory=list)  # the cut bar's requests, answered when decided again
    magics: set[int] = field(default_factory=set)  # live: the magic numbers of the requests sent
    owned: dict[int, Owned] = field(default_factory=dict)  # live: its positions seen open (``owned``)


def history_record(bars: pd.DataFrame) -> dict:
    """The ``history`` record's fields: the bars as columns, times in UTC seconds."""
    out = {"time": (bars.index.as_unit("s").asi8).tolist()}
    out.update({c: bars[c].to_numpy(dtype=np.float64).tolist() for c in COLUMNS})
    return out


def bar_record(t: int, when: pd.Timestamp, row: pd.Series, **extra) -> dict:
    return {"bar": t, "time": when, **{c: float(row[c]) for c in COLUMNS}, **extra}


class _Closed:
    """The bars a journal records as closed, kept as columns of floats (not as records) while it is read."""

    def __init__(self) -> None:
        self.columns: dict[str, list[float]] = {c: [] for c in COLUMNS}
        self.times: list[pd.Timestamp] = []

    def __len__(self) -> int:
        return len(self.times)

    def append(self, rec: dict, when: pd.Timestamp) -> None:
        for c in COLUMNS:
            self.columns[c].append(float(rec[c]))
        self.times.append(when)


def follow_lost_reply(unresolved: dict[str, dict], in_flight: dict[str, dict], note: dict) -> None:
    """Follow the terminal's requests whose reply was lost: "unresolved" until "recovered" or "not
    executed" (a resumed live run looks the rest up again, ``TerminalTrade.restore_unresolved``). A
    "request" without its "result" (``in_flight``) was being sent when the run was killed: its outcome is
    as unknown as a lost reply's (``read_state`` adds those left at the end)."""
    event, tag = note.get("event"), str(note.get("id"))
    if event == "request":
        tag = str(note["id"])
        in_flight[tag] = {
            "event": "unresolved",
            "id": tag,
            "symbol": note.get("symbol"),  # looked up among that symbol's deals, counted in its limits
            "reason": "the run stopped while it was sent",
            "request": note.get("request") or {},
            "at": None,
        }
    elif event == "result":
        in_flight.pop(tag, None)
    elif event == "unresolved":
        unresolved[str(note["id"])] = note
    elif event in ("recovered", "not executed"):
        unresolved.pop(tag, None)


def _follow_requests(made: list[dict], rec: dict) -> None:
    """Keep ``made``, the EA's requests of the bar forming with their answers (``answers.answered``)."""
    kind = rec.get("type")
    if kind == "open":
        made.clear()
    elif rec.get("source") == "terminal":
        if (rec.get("terminal") or {}).get("event") == "request" and made:
            made[-1]["sent"] = True  # it reached order_check/order_send
    elif kind == "request":
        made.append({"call": rec.get("call"), "symbol": rec.get("symbol"), "args": rec.get("args", [])})
        made[-1]["value"] = None
    elif kind == "result" and made:
        made[-1]["value"], made[-1]["retcode"] = rec.get("value"), rec.get("retcode")


def bars_frame(columns: dict, times: list, meta: CandleMeta, where: str) -> pd.DataFrame:
    try:
        index = pd.to_datetime(times, utc=True)
        return make_frame({c: np.asarray(columns[c], dtype=np.float64) for c in COLUMNS}, index, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where}: bars cannot be read ({type(exc).__name__}: {exc})") from None


def read_state(path: str, records: Iterable[dict], *, paper: bool | None = None) -> JournalState:
    """Walk the records of one journal (``journal.JournalRecords``, read once, a record at a time; a list
    will do) into a ``JournalState``."""
    records = iter(records)
    start = next(records)
    where = f"journal {path}"
    try:
        meta = CandleMeta.from_dict(start["meta"])
        account = AccountConfig(**start["account"])
        fs = int(start["forward_start"])
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where} line 1: the start record is incomplete ({exc})") from None
    history = next((r for r in records if r["type"] == "history"), None)  # the record after the start
    if history is None:
        raise JournalError(f"{where}: no history record (the run stopped before its first bar)")
    hist = bars_frame(
        history,
        [pd.Timestamp(int(s), unit="s", tz="UTC") for s in history.get("time", [])],
        meta,
        f"{where} line {history['_line']}",
    )
    if len(hist) != fs:
        raise JournalError(f"{where} line {history['_line']}: {len(hist)} history bars, the start says {fs}")
    paper = start.get("mode") == "paper" if paper is None else paper
    broker = PaperBroker(hist, meta.point, account) if paper else None
    closed = _Closed()
    state = JournalState(path, start, meta, hist, fs, broker=broker)
    pending_result: dict | None = None
    in_flight: dict[str, dict] = {}  # live: terminal requests without their result yet (id -> note)
    made: list[dict] = []  # the EA's requests of the bar forming (``answers``)
    for rec in records:
        kind, line = rec["type"], rec["_line"]
        try:
            _follow_requests(made, rec)
            if kind == "open":
                t, when = int(rec["bar"]), pd.Timestamp(rec["time"])
                if t != fs + len(closed) or state.forming is not None:
                    raise JournalError(f"{where} line {line}: bar {t} opens out of order")
                if broker is not None:
                    if rec.get("missed"):
                        broker.add_bar(when, float(rec["bid"]), float(rec["spread_points"]))
                    else:
                        broker.open_bar(when, float(rec["bid"]), float(rec["ask"]))
                state.forming = (t, when)
            elif kind == "tick" and broker is not None:
                broker.set_tick(float(rec["bid"]), float(rec["ask"]))
            elif kind == "request" and broker is not None:
                if rec.get("call") not in REQUESTS:
                    raise JournalError(f"{where} line {line}: unknown request {rec.get('call')!r}")
                value = getattr(broker, rec["call"])(*replay_args(rec["call"], rec.get("args", [])))
                pending_result = {"value": json_ready(value), "retcode": broker.last_retcode}
            elif kind == "result" and broker is not None and pending_result is not None:
                got = {"value": json_ready(rec.get("value")), "retcode": rec.get("retcode")}
                if got != pending_result:
                    raise JournalError(
                        f"{where} line {line}: the paper account answers {pending_result} where the journal "
                        f"has {got}; the journal was edited or written by another version"
                    )
                pending_result = None
            elif kind == "decision":
                state.decided.add(int(rec["bar"]))
            elif kind == "bar":
                t, when = int(rec["bar"]), pd.Timestamp(rec["time"])
                if t != fs + len(closed):
                    raise JournalError(f"{where} line {line}: bar {t} closes out of order")
                if broker is not None:
                    if state.forming is None:  # a bar skipped: never decided on
                        broker.add_bar(when, float(rec["open"]), float(rec["spread"]))
                    broker.close_bar(t, float(rec["high"]), float(rec["low"]), float(rec["close"]))
                state.forming = None
                closed.append(rec, when)
            elif kind == "stop":
                state.stopped = rec
            elif kind == "account" and state.account is None:
                state.account = rec
            elif kind == "request" and (rec.get("terminal") or {}).get("event") == "halted":
                state.halted_day = int(rec["terminal"]["day"])
            note = rec.get("terminal") or {}
            follow_lost_reply(state.unresolved, in_flight, note)
            if (magic := sent_magic(note)) is not None:
                state.magics.add(magic)
            if (position := owned_of(note, f"{where} line {line}")) is not None:
                state.owned[position.ticket] = position
        except JournalError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field of the wrong kind
            raise JournalError(f"{where} line {line}: {kind} record cannot be read ({exc})") from None
    for tag, note in in_flight.items():  # killed while sending: looked up, counted open, never sent again
        state.unresolved.setdefault(tag, note)
    if state.forming is not None and state.forming[0] not in state.decided:
        state.again = answered(made, live=broker is None)
    if closed:
        run = bars_frame(closed.columns, closed.times, meta, where)
        state.bars = pd.concat([hist, run])
        state.bars.attrs = hist.attrs
    return state
