"""A slow reference for the equity path of several symbols (``backtests.merged_path``): every price of
every symbol read one by one from the price paths, put in time order by Python's sort, the account valued
at each in plain Python (each symbol at its latest quote, a profit converted at the converting symbol's
latest quote) and the drawdowns found by a running peak. The events (where each deal, balance change and
swap takes effect on its symbol's prices) are the path's own (``path_events.event_table``)."""

from __future__ import annotations

from backtests.path_events import KEY_SHIFT, LAST_RANK, BarPrices, event_table
from backtests.paths import M1Path


def _prices(desk, k: int, first: int, last: int) -> list[tuple]:
    """((ns, symbol, rank), bar, bid, ask) of every price of ``desk``'s bars ``first..last``."""
    path, own, out = desk.price_path, BarPrices(desk), []
    opens = desk.market.time.as_unit("ns").asi8
    for t in range(first, last + 1):
        s, e = int(path.starts[t]), int(path.starts[t + 1])
        if e <= s:
            bids, asks = own.own_quotes(slice(t, t + 1))
            out += [((int(opens[t]), k, i), t, float(bids[i]), float(asks[i])) for i in range(4)]
        elif isinstance(path, M1Path):
            for r in range(s, e):
                ns, spread = int(path.time_ns[r]), float(path.spread[r])
                for i in range(4):
                    bid = float(path.points[r, i])
                    out.append(((ns, k, 4 * (r - s) + i), t, bid, bid + spread))
        else:
            for r in range(s, e):
                out.append(
                    ((int(path.ns[r]), k, r - s), t, float(path.bid_points[r]), float(path.ask_points[r]))
                )
    return out


def reference_drawdowns(broker, first: int, last: int, deposit: float) -> dict:
    """The account's equity drawdowns (``metrics.drawdowns``' keys) at every price of every symbol."""
    desks = list(broker.funds.desks)
    bars = {d.symbol: BarPrices(d) for d in desks}
    keys, owners, moments, moves = event_table(broker.ledger, bars)
    opens = [*broker.market.time.as_unit("ns").asi8.tolist(), 2**63 - 1]
    prices = [p for k, d in enumerate(desks) for p in _prices(d, k, first, last)]
    where = {(sort[1], t, sort[2]): sort for sort, t, _, _ in prices}  # (symbol, bar, rank)
    items = [(sort, 1, t, bid, ask) for sort, t, bid, ask in prices]
    for j in range(len(keys)):
        t, rank, k = int(keys[j]) >> KEY_SHIFT, int(keys[j]) & LAST_RANK, int(owners[j])
        if rank == LAST_RANK:
            sort = (opens[t + 1], -1, 0)
        elif k >= 0:
            sort = where.get((k, t, rank), (opens[t + 1], -1, 0))
        else:
            sort = (int(moments[j]) if moments[j] >= 0 else opens[t], -1, 0)
        items.append((sort, 0, t, j, None))  # before the price of its place
    items.sort(key=lambda x: (x[2], x[0], x[1]))
    state = [0.0] * moves.shape[1]
    quotes: dict[str, tuple[float, float]] = {}
    firsts = {}
    for (_, k, _), _, _, bid, ask in (x for x in items if x[1] == 1):
        firsts.setdefault(desks[k].symbol, (bid, ask))
    peak, low = deposit, deposit
    fall = fall_pct = rel = rel_pct = 0.0
    for sort, kind, _, a, b in items:
        if kind == 0:
            state = [x + float(y) for x, y in zip(state, moves[a], strict=True)]
            continue
        quotes[desks[sort[1]].symbol] = (a, b)
        equity = deposit + state[0]
        for k, d in enumerate(desks):
            long_lots, long_value, short_lots, short_value = state[1 + 4 * k : 5 + 4 * k]
            if not (long_lots or short_lots):
                continue
            bid, ask = quotes.get(d.symbol, firsts[d.symbol])
            amount = (
                d.config.contract_size
                / d.scale
                * (long_lots * bid - long_value + short_value - short_lots * ask)
            )
            equity += _converted(d, amount, quotes, firsts)
        peak = max(peak, equity)
        low = min(low, equity)
        if peak - equity > fall:
            fall, fall_pct = peak - equity, (peak - equity) / peak * 100 if peak > 0 else 0.0
        pct = (peak - equity) / peak * 100 if peak > 0 else 0.0
        if pct > rel_pct:
            rel, rel_pct = peak - equity, pct
    return {"absolute": max(0.0, deposit - low), "maximal": fall, "maximal_pct": fall_pct,
            "relative_pct": rel_pct, "relative": rel}  # fmt: skip


def _converted(desk, amount: float, quotes: dict, firsts: dict) -> float:
    rate = desk.money.profit
    if rate.unity:
        return amount
    pair = desk if rate.pair is None else rate.pair
    bid, ask = (q / pair.scale for q in quotes.get(pair.symbol, firsts[pair.symbol]))
    if rate.divide:
        return amount / (ask if amount > 0 else bid)
    return amount * (bid if amount > 0 else ask)
