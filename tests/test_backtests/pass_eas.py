"""Expert advisors that reach every corner of a pass's figures: pending orders with expiry and a trailed
stop, SL/TP on both sides of a hedging account, a custom criterion (``on_tester``) and several symbols on
one account. The lean optimisation pass and ``Backtest.run`` are compared on them."""

from __future__ import annotations

from backtests.broker import AccountConfig
from datafeeds.synthetic import synthetic_candles
from strategies.base import ExpertAdvisor


class TrailingBreakout(ExpertAdvisor):
    """A buy stop above the last high (good for the day), then the stop trailed ``trail`` points behind."""

    trail = 200

    def on_bar(self):
        for pos in self.positions():
            sl = self.bid - self.trail * self.point
            if pos.side > 0 and (pos.sl is None or sl > pos.sl):
                self.modify(pos.ticket, sl=sl)
        if not self.positions() and not self.orders():
            self.buy_stop(0.1, max(self.bars.high[-1], self.ask) + 50 * self.point, expiration="today")


class HedgedBrackets(ExpertAdvisor):
    """Every ``every`` bars a buy and a sell at once (a hedging account holds both), each with its own SL
    and TP ``sl``/``tp`` points away, plus a sell limit above the market; ``on_tester`` scores the pass by
    its net profit per deal."""

    every = 7
    sl = 300
    tp = 200
    size = 1.0  # lots of the buy; the sell is twice as large

    def on_bar(self):
        if len(self.bars) % self.every:
            return
        self.buy(0.1 * self.size, sl_points=self.sl, tp_points=self.tp)
        self.sell(0.2 * self.size, sl_points=self.sl, tp_points=self.tp)
        if not self.orders():
            self.sell_limit(0.1, self.bid + 150 * self.point, tp=self.bid, expiration="today")

    def on_tester(self, stats: dict) -> float | None:
        deals = stats["total_deals"]
        return stats["total_net_profit"] / deals if deals else None


class Idle(ExpertAdvisor):
    """Never trades: every trade figure is undefined or zero."""

    def on_bar(self):
        pass


class Flip(ExpertAdvisor):
    """Follows each symbol's last bar: long after an up bar, short after a down bar."""

    symbols = ("EURUSD", "GBPUSD")
    lots = 0.1

    def on_bar(self):
        for s in self.symbols:
            bars = self.data(s)
            if len(bars) < 2:
                continue
            up = bars.close[-1] > bars.close[-2]
            held = self.position_of(s)
            if (up and held <= 0) or (not up and held >= 0):
                self.close(symbol=s)
                (self.buy if up else self.sell)(self.lots, symbol=s, comment=s)


HEDGING = AccountConfig(hedging=True)


def flip_frames(n: int = 600) -> dict:
    return {s: synthetic_candles(s, "H1", n, seed=i + 1) for i, s in enumerate(Flip.symbols)}
