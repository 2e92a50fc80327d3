"""Result records of the terminal API: named tuples with the official field names (a subset of them).

The official package returns structseq-like objects with ``_asdict()``; named tuples give the same access
(``info.digits``, ``info._asdict()``) and, like the real ones, do not cross an RPyC bridge by value.
"""

from collections import namedtuple

TerminalInfo = namedtuple(
    "TerminalInfo",
    "community_account community_connection connected dlls_allowed trade_allowed tradeapi_disabled "
    "email_enabled ftp_enabled notifications_enabled mqid build maxbars codepage ping_last "
    "community_balance retransmission company name language path data_path commondata_path",
)

AccountInfo = namedtuple(
    "AccountInfo",
    "login trade_mode leverage limit_orders margin_so_mode trade_allowed trade_expert margin_mode "
    "currency_digits fifo_close balance credit profit equity margin margin_free margin_level "
    "margin_so_call margin_so_so name server currency company",
)

SymbolInfo = namedtuple(
    "SymbolInfo",
    "custom chart_mode select visible session_deals time digits spread spread_float trade_calc_mode "
    "trade_mode trade_stops_level trade_freeze_level trade_exemode swap_mode swap_rollover3days "
    "expiration_mode filling_mode order_mode bid ask last point trade_tick_value trade_tick_size "
    "trade_contract_size volume_min volume_max volume_step swap_long swap_short margin_initial "
    "currency_base currency_profit currency_margin description path name",
)

Tick = namedtuple("Tick", "time bid ask last volume time_msc flags volume_real")

TradeRequest = namedtuple(
    "TradeRequest",
    "action magic order symbol volume price stoplimit sl tp deviation type type_filling type_time "
    "expiration comment position position_by",
)

OrderSendResult = namedtuple(
    "OrderSendResult", "retcode deal order volume price bid ask comment request_id retcode_external request"
)

TradePosition = namedtuple(
    "TradePosition",
    "ticket time time_msc time_update time_update_msc type magic identifier reason volume price_open sl tp "
    "price_current swap profit symbol comment external_id",
)

TradeDeal = namedtuple(
    "TradeDeal",
    "ticket order time time_msc type entry magic position_id reason volume price commission swap profit fee "
    "symbol comment external_id",
)

TradeOrder = namedtuple(
    "TradeOrder",
    "ticket time_setup time_setup_msc time_done time_done_msc time_expiration type type_time type_filling "
    "state magic position_id position_by_id reason volume_initial volume_current price_open sl tp "
    "price_current price_stoplimit symbol comment external_id",
)

OrderCheckResult = namedtuple(
    "OrderCheckResult",
    "retcode balance equity profit margin margin_free margin_level comment request",
)
