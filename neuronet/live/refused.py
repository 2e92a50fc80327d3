"""The requests of a live account's run that were refused, read from its journal for the report."""

from __future__ import annotations

from collections.abc import Iterable

from neuronet.live import retcodes


def refused(records: Iterable[dict]) -> list[dict]:
    """The requests of the live run that were refused, by a check or a limit before the terminal
    ("refused") or by the terminal ("result" with a failing retcode), as the backtest lists its rejected
    requests; the time is that of the EA's call they came from. A request whose reply was lost (10012) and
    that was found on the terminal afterwards ("recovered") executed: it is not listed."""
    out, when, bar = [], None, None
    recovered: set[str] = set()
    for rec in records:
        if rec["type"] == "request" and "call" in rec:
            when, bar = rec.get("time"), rec.get("bar")
        note = rec.get("terminal") or {}
        code = note.get("retcode")
        if note.get("event") == "recovered":
            recovered.add(str(note.get("id")))
        failed = note.get("event") == "refused" or (
            note.get("event") == "result" and code not in retcodes.SUCCESS
        )
        if failed and isinstance(code, int):
            reason = note.get("reason") or note.get("message") or retcodes.message(code)
            row = {"time": when, "bar": bar, "action": note.get("action"), "retcode": code, "reason": reason}
            if rec.get("symbol"):  # journaled with the symbol it went to
                row["symbol"] = rec["symbol"]
            out.append({**row, "id": str(note.get("id"))})
    return [{k: v for k, v in r.items() if k != "id"} for r in out if r["id"] not in recovered]
