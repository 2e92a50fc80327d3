"""Progress shown during a backtest: the replayed bars and the EA's training epochs (tqdm bars, on stderr).

Kept apart from the replay so the loop's module holds the loop; both bars are updated coarsely (every few
thousand bars, once per epoch record), so showing progress costs nothing per bar."""

from __future__ import annotations


class BarProgress:
    """A tqdm bar over replayed bars, updated every few thousand bars so it costs nothing per bar."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="bar", desc="replay", leave=False)

    def to(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.update(self._bar.total - self._bar.n)
            self._bar.close()
            self._bar = None


class EpochProgress:
    """Epoch progress from the EA's training records: loss and seconds per epoch.

    One bar per training round (walk-forward retrains, or a record count reaching the announced total, start
    a new one), so the count never runs past its total."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._bar = None
        self._round = None

    def update(self, record: dict) -> None:
        if not self.enabled:
            return
        total = record.get("epochs")
        full = self._bar is not None and total is not None and self._bar.n >= (self._bar.total or 0)
        if self._bar is not None and (record.get("round") != self._round or full):
            self.close()
        if self._bar is None:
            from tqdm import tqdm

            self._round = record.get("round")
            desc = "training" if self._round is None else f"training round {self._round}"
            self._bar = tqdm(total=total, unit="epoch", desc=desc, leave=False)
        self._bar.update(1)
        shown = {"loss": f"{record.get('loss') or float('nan'):.4f}", "s": f"{record.get('wall_s') or 0:.2f}"}
        for key, label in (("train_hit_rate", "forecast"), ("train_missed_rate", "undefine")):
            if record.get(key) is not None:
                shown[label] = f"{100 * record[key]:.1f}%"
        self._bar.set_postfix(shown)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
