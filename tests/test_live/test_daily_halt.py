"""The daily loss halt survives a restart: journaled with its server day, resumed by the runner, lifted
only when the server day ends (not when the day's loss shrinks, nor at the UTC date)."""

from __future__ import annotations

import pandas as pd
from test_live.test_account_report import live_run

from neuronet.live.journal import read_journal
from neuronet.live.limits import Limits
from strategies.base import ExpertAdvisor

HALT = Limits(max_lots=1.0, max_positions=2, max_daily_loss=0.01, symbols=("EURUSD",))


class _Churn(ExpertAdvisor):
    """Buys 0.1 lots on one bar and closes on the next: each round trip pays the spread at least."""

    def on_bar(self) -> None:
        if self.positions():
            self.close()
        else:
            self.buy(0.1)


def _deals(sim) -> list[tuple[int, int]]:
    """(broker time, entry) of the terminal's deals."""
    deals = sim.conn.modules.MetaTrader5.history_deals_get(0, 2**31 - 1) or ()
    return [(int(d.time), int(d.entry)) for d in deals]


def _halts(journal) -> list[dict]:
    return [
        r["terminal"] for r in read_journal(journal) if (r.get("terminal") or {}).get("event") == "halted"
    ]


def test_a_restart_keeps_the_halt_until_the_server_day_ends(port, sim, tmp_path):
    journal = tmp_path / "live.jsonl"
    live_run(port, sim, journal, ea=_Churn, params={}, limits=HALT, bars=6)
    halts = _halts(journal)
    assert len(halts) == 1 and halts[0]["day_pnl"] <= -0.01
    day = halts[0]["day"]
    assert day == int(pd.Timestamp("2024-03-07").value // 10**9) // 86400  # the broker's day of the start
    # The loss is gone (a fresh book: today's P&L reads 0), as after a losing position recovered.
    sim.state.reset()
    start = len(read_journal(journal))
    live_run(port, sim, journal, ea=_Churn, params={}, limits=HALT, bars=12)
    after = read_journal(journal)[start:]
    refused = [
        r for r in after if r["type"] == "result" and r.get("call") == "order" and r["retcode"] == 10027
    ]
    assert refused, "orders go out again on the halted day after a restart"
    midnight = (day + 1) * 86400
    deals = _deals(sim)
    assert deals and all(t >= midnight for t, _ in deals)  # trading resumed only on the next server day
    opened_bars = [
        r["bar"]
        for r in after
        if r["type"] == "result" and r.get("call") == "order" and r["retcode"] == 10009
    ]
    assert opened_bars and min(opened_bars) > max(r["bar"] for r in refused)
