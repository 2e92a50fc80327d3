"""What the merged walks of several symbols' minutes or ticks ask of every bar, worked out once per run.

Each bar of a merged walk (``backtests.merged``, ``backtests.merged_ticks``) needs the moment the EA decides
(the main symbol's first minute or tick of the bar, else the bar's opening time), the symbols with minutes or
ticks in it and a bar of their own, and where each symbol stands at that moment: its first minute at or
after it, or its last tick at or before it. Asked per bar, these were NumPy searches on small slices, several
per symbol and bar (each a few microseconds of call overhead); here they are one vectorised search per symbol
and run over every bar at once, read back per bar from Python lists. The answers are the same: the rows are
sorted in time and grouped by the same bar edges, so a search over the whole path lands inside the bar's
span (a row before the bar is older than its opening, one after it not older than its close).
"""

from __future__ import annotations

import numpy as np

from backtests.pair_moves import money_pairs


class BarPlan:
    """Per bar of one run: ``decision[t]`` (UTC ns), ``walking[t]`` (the desks with rows in bar ``t`` and a
    bar of their own, in the desks' order), ``late[t]`` (those of them, the main symbol's aside, whose first
    row of the bar comes after the decision), and per desk ``at[desk][t]``: with ``side="left"`` its first row
    at or after the decision (minutes: where its walk after the decision starts), with ``side="right"`` its
    last row at or before it (ticks: the tick it stands at; -1 where it has had none yet). ``starts[desk]``:
    its rows' bar edges as a list. With ``side="right"`` also ``opening[desk][t]``: the moment of its opening
    checks (``backtests.merged_ticks``), its first tick of the bar, or the decision where that comes later."""

    def __init__(self, desks: list, side: str):
        main = desks[0].price_path
        edges = main.starts
        opens = main.edges_ns[:-1]
        rows = main.row_ns
        covered = edges[1:] > edges[:-1]
        if len(rows):
            first = rows[np.minimum(edges[:-1], len(rows) - 1)]
            decision = np.where(covered, first, opens)
        else:
            decision = np.asarray(opens)
        self.decision: list[int] = decision.tolist()
        self.walking: list[list] = [[] for _ in range(len(opens))]
        self.late: list[list] = [[] for _ in range(len(opens))]
        self.at: dict = {}
        self.starts: dict = {}
        self.opening: dict = {}
        # The merged tick walk's last stop-out bound: ((bar, the account's revision), answer)
        self.stop_out: tuple | None = None
        # Whether a symbol's money is converted through another's price (``pair_moves.money_pairs``)
        self.converted = any(money_pairs(d) for d in desks)
        for d in desks:
            path = d.price_path
            if path is None:
                continue
            starts = path.starts
            own = starts[1:] > starts[:-1]
            closed = d.market.closed
            if closed is not None:
                own &= ~np.asarray(closed, dtype=bool)
            for t in np.flatnonzero(own).tolist():
                self.walking[t].append(d)
            if d is not desks[0] and len(path.row_ns):
                first = path.row_ns[np.minimum(starts[:-1], len(path.row_ns) - 1)]
                for t in np.flatnonzero(own & (first > decision)).tolist():
                    self.late[t].append(d)
            found = np.searchsorted(path.row_ns, decision, side=side)
            if side == "right":
                found = found - 1
                if d is desks[0]:  # the main symbol decides at its own first tick of the bar
                    found = np.where(covered, edges[:-1], found)
            self.at[d] = found.tolist()
            self.starts[d] = starts.tolist()
            if side == "right" and len(path.row_ns):
                first = path.row_ns[np.minimum(starts[:-1], len(path.row_ns) - 1)]
                self.opening[d] = np.where(first <= decision, first, decision).tolist()
