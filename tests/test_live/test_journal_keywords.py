"""A paper journal is replayed to rebuild the account: every request argument must mean on replay what it
meant when the EA made it, an expiration keyword in any case included (read back as a time, "TODAY" would
be the wall clock's now and "GTC" no time at all)."""

from __future__ import annotations

import pytest
from test_live.live_support import runner

from neuronet.live.journal import JournalRecords
from neuronet.live.rebuild import read_state
from strategies.base import ExpertAdvisor


class _Pending(ExpertAdvisor):
    """Places one sell limit far above the market at its first bar, with the expiration ``when``."""

    when: str = "today"

    def on_bar(self) -> None:
        if not self.orders() and len(self.bars) and not getattr(self, "_placed", False):
            self._placed = True
            self.sell_limit(0.1, float(self.bars.close[-1]) + 0.05, expiration=self.when)


@pytest.mark.parametrize("when", ["Today", "TODAY", "GTC", "Gtc"])
def test_an_expiration_keyword_in_any_case_replays_as_it_was_placed(port, sim, tmp_path, when):
    journal = tmp_path / "run.jsonl"
    live = runner(port, sim, journal, ea=_Pending, params={"when": when}, max_bars=1)
    live.run()
    (placed,) = live.broker.pending_orders
    state = read_state(str(journal), JournalRecords(journal))
    (rebuilt,) = state.broker.pending_orders
    assert rebuilt.expiration == placed.expiration
    runner(port, sim, journal, ea=_Pending, params={"when": when}, max_bars=1).run()  # and it resumes
