"""A run's state rebuilt from its journal: the bars, the bar still forming, and a paper account.

Used twice: a restart with the same journal resumes from it (``neuronet live`` goes on after the last
bar processed), and ``neuronet live report`` scores it. A paper account is rebuilt by making the
journaled trade requests again on a fresh ``PaperBroker`` over the journaled bars and prices; the broker
is deterministic, so the answers must be the ones journaled — a difference means the journal was edited
or written by another version, and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from backtests.broker import AccountConfig
from datafeeds.candles import COLUMNS, CandleMeta, make_frame
from neuronet.live.context import REQUESTS, replay_args
from neuronet.live.errors import JournalError
from neuronet.live.journal import json_ready
from neuronet.live.paper import PaperBroker


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


def history_record(bars: pd.DataFrame) -> dict:
    """The ``history`` record's fields: the bars as columns, times in UTC seconds."""
    out = {"time": (bars.index.as_unit("s").asi8).tolist()}
    out.update({c: bars[c].to_numpy(dtype=np.float64).tolist() for c in COLUMNS})
    return out


def bar_record(t: int, when: pd.Timestamp, row: pd.Series, **extra) -> dict:
    return {"bar": t, "time": when, **{c: float(row[c]) for c in COLUMNS}, **extra}


def _frame(columns: dict, times: list, meta: CandleMeta, where: str) -> pd.DataFrame:
    try:
        index = pd.to_datetime(times, utc=True)
        return make_frame({c: np.asarray(columns[c], dtype=np.float64) for c in COLUMNS}, index, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where}: bars cannot be read ({type(exc).__name__}: {exc})") from None


def read_state(path: str, records: list[dict], *, paper: bool | None = None) -> JournalState:
    """Walk the records of one journal (``journal.read_journal``) into a ``JournalState``."""
    start = records[0]
    where = f"journal {path}"
    try:
        meta = CandleMeta.from_dict(start["meta"])
        account = AccountConfig(**start["account"])
        fs = int(start["forward_start"])
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where} line 1: the start record is incomplete ({exc})") from None
    history = next((r for r in records if r["type"] == "history"), None)
    if history is None:
        raise JournalError(f"{where}: no history record (the run stopped before its first bar)")
    hist = _frame(history, [pd.Timestamp(int(s), unit="s", tz="UTC") for s in history.get("time", [])], meta,
                  f"{where} line {history['_line']}")
    if len(hist) != fs:
        raise JournalError(f"{where} line {history['_line']}: {len(hist)} history bars, the start says {fs}")
    paper = start.get("mode") == "paper" if paper is None else paper
    broker = PaperBroker(hist, meta.point, account) if paper else None
    closed: list[dict] = []
    state = JournalState(path, start, meta, hist, fs, broker=broker)
    pending_result: dict | None = None
    for rec in records[1:]:
        kind, line = rec["type"], rec["_line"]
        try:
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
                got = {"value": rec.get("value"), "retcode": rec.get("retcode")}
                if got != pending_result:
                    raise JournalError(
                        f"{where} line {line}: the paper account answers {pending_result} where the journal "
                        f"has {got}; the journal was edited or written by another version")
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
                closed.append(rec)
            elif kind == "stop":
                state.stopped = rec
            elif kind == "request" and (rec.get("terminal") or {}).get("event") == "halted":
                state.halted_day = int(rec["terminal"]["day"])
        except JournalError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalError(f"{where} line {line}: {kind} record cannot be read ({exc})") from None
    if closed:
        run = _frame({c: [r[c] for r in closed] for c in COLUMNS}, [r["time"] for r in closed], meta, where)
        state.bars = pd.concat([hist, run])
        state.bars.attrs = hist.attrs
    return state
