"""The simulated terminal's order handling (used by live-trading tests): fills, positions, deals, and the
rejections users meet (unsupported filling mode, bad volume, unknown symbol)."""

from __future__ import annotations


def buy(mt5, volume=0.1, **extra):
    request = {
        "action": mt5.TRADE_ACTION_DEAL,
        "symbol": "EURUSD",
        "volume": volume,
        "type": mt5.ORDER_TYPE_BUY,
        "type_filling": mt5.ORDER_FILLING_FOK,
        "magic": 7,
        "comment": "t",
    }
    return mt5.order_send({**request, **extra})


def test_a_market_buy_fills_at_the_ask_and_opens_a_position(native_mt5):
    import MetaTrader5 as mt5

    assert mt5.initialize()
    tick = mt5.symbol_info_tick("EURUSD")
    result = buy(mt5)
    assert result.retcode == mt5.TRADE_RETCODE_DONE and result.price == tick.ask
    assert result.request.symbol == "EURUSD"
    (pos,) = mt5.positions_get(symbol="EURUSD")
    assert (pos.ticket, pos.type, pos.volume, pos.price_open) == (
        result.order,
        mt5.POSITION_TYPE_BUY,
        0.1,
        tick.ask,
    )
    assert pos.price_current == tick.bid
    assert pos.profit == round((tick.bid - tick.ask) * 0.1 * 100_000, 2) < 0  # the spread, paid


def test_closing_in_parts_records_deals_with_profit(native_mt5):
    import MetaTrader5 as mt5

    assert mt5.initialize()
    ticket = buy(mt5, volume=0.3).order
    tick = mt5.symbol_info_tick("EURUSD")
    close = {
        "action": mt5.TRADE_ACTION_DEAL,
        "symbol": "EURUSD",
        "type": mt5.ORDER_TYPE_SELL,
        "position": ticket,
        "type_filling": mt5.ORDER_FILLING_IOC,
    }
    assert mt5.order_send({**close, "volume": 0.1}).retcode == mt5.TRADE_RETCODE_DONE
    assert mt5.positions_get(ticket=ticket)[0].volume == 0.2
    assert mt5.order_send({**close, "volume": 0.2}).retcode == mt5.TRADE_RETCODE_DONE
    assert mt5.positions_get() == () and mt5.positions_total() == 0
    deals = mt5.history_deals_get(position=ticket)
    assert [d.entry for d in deals] == [mt5.DEAL_ENTRY_IN, mt5.DEAL_ENTRY_OUT, mt5.DEAL_ENTRY_OUT]
    assert [d.volume for d in deals] == [0.3, 0.1, 0.2]
    assert deals[2].profit == round((tick.bid - tick.ask) * 0.2 * 100_000, 2)


def test_rejections(native_mt5):
    import MetaTrader5 as mt5

    assert mt5.initialize()
    assert buy(mt5, type_filling=mt5.ORDER_FILLING_RETURN).retcode == mt5.TRADE_RETCODE_INVALID_FILL == 10030
    assert buy(mt5, volume=0.015).retcode == mt5.TRADE_RETCODE_INVALID_VOLUME
    assert buy(mt5, volume=500.0).retcode == mt5.TRADE_RETCODE_INVALID_VOLUME
    assert buy(mt5, symbol="NOPE") is None and mt5.last_error()[0] == mt5.RES_E_INVALID_PARAMS
    wrong_side = buy(mt5, position=buy(mt5).order)  # a buy cannot close a buy
    assert wrong_side.retcode == mt5.TRADE_RETCODE_INVALID
    assert mt5.positions_total() == 1
    info = mt5.symbol_info("EURUSD")
    assert info.filling_mode & mt5.SYMBOL_FILLING_FOK and info.volume_step == 0.01


def test_trading_needs_a_session(native_mt5):
    import MetaTrader5 as mt5

    assert buy(mt5) is None and mt5.last_error() == (-10004, "No IPC connection")
