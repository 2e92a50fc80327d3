"""The runner looks up the requests whose reply was lost (``TerminalTrade.unresolved``) once the terminal
answers again, and keeps them while it still cannot be asked."""

from __future__ import annotations

from test_live.live_support import OPEN_SOURCES, PARAMS
from test_live.test_runner import _FakeTerminalTrade

from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalConnectionError
from datafeeds.timeframes import Timeframe
from neuronet.live.runner import LiveRunner, LiveSettings
from strategies.sma import SmaCrossEA


class _Lost(_FakeTerminalTrade):
    """A trade context holding one request whose reply was lost; the first look-up fails."""

    def __init__(self, *args):
        super().__init__(*args)
        self.unresolved = {"nn0badc0de": {"action": 1}}
        self.looks = 0

    def resolve(self):
        self.looks += 1
        if self.looks == 1:
            raise TerminalConnectionError("the bridge is still down")
        self.unresolved = {}
        return {"nn0badc0de": None}


def test_lost_requests_are_looked_up_when_the_terminal_answers(port, sim, tmp_path, caplog):
    made: list[_Lost] = []

    def factory(*args):
        made.append(_Lost(*args))
        return made[-1]

    source = TerminalSource("127.0.0.1", port, retries=0)
    OPEN_SOURCES.append(source)
    settings = LiveSettings(
        "EURUSD", Timeframe.H1, tmp_path / "j.jsonl", mode="live", history_bars=300, max_bars=4
    )
    LiveRunner(
        SmaCrossEA, PARAMS, source, settings, trading=factory, sleep=sim.sleep, status=lambda _: None
    ).run()
    assert made[0].looks == 2 and made[0].unresolved == {}  # the failed look kept it for the next one
    assert "cannot be looked up yet: the bridge is still down" in caplog.text
