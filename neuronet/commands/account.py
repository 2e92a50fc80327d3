"""The account options of ``run``, ``backtest``, ``optimize`` and ``live``: declared once here, and built
into one ``backtests.AccountConfig`` by ``account_settings``, so every command trades on the same settings
with the same defaults and refuses a bad value the same way (one line naming the option, exit status 2).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from backtests import AccountConfig
from neuronet.commands import values
from neuronet.commands.options import flag

Deposit = Annotated[float, typer.Option("--deposit", help="Initial deposit (deposit currency).")]
Leverage = Annotated[float, typer.Option("--leverage", help="Account leverage 1:N.")]
Spread = Annotated[
    int | None,
    typer.Option(
        "--spread",
        help="Fixed spread in points (default: each bar's own; candles without any spread, such as the "
        f"sample, trade with {AccountConfig.missing_spread} points).",
        max=values.MAX_COUNT,
    ),
]
Commission = Annotated[float, typer.Option("--commission", help="Commission per lot per deal (each side).")]
SwapLong = Annotated[float, typer.Option("--swap-long", help="Swap of longs, points per lot per night.")]
SwapShort = Annotated[float, typer.Option("--swap-short", help="Swap of shorts, points per lot per night.")]
Hedging = Annotated[bool, flag("--hedging", help="Hedging account (default: netting).")]
MarginHedged = Annotated[
    float | None,
    typer.Option(
        "--margin-hedged",
        help="Hedged margin (MetaTrader's SYMBOL_MARGIN_HEDGED): units per lot that the hedged volume of a "
        "--hedging account is charged as (default: the contract size, so a hedged pair holds one lot's "
        "margin; 0: none).",
    ),
]


def account_settings(
    *,
    deposit: float,
    leverage: float,
    spread: int | None,
    commission: float,
    swap_long: float,
    swap_short: float,
    hedging: bool,
    margin_hedged: float | None = None,
) -> AccountConfig:
    """The account of the options given (the others at ``AccountConfig``'s defaults). A value the account
    refuses is a ``backtests.AccountError`` naming the setting and its option, e.g. ``invalid account setting
    deposit=nan (--deposit): must be a finite amount > 0``."""
    given: dict[str, Any] = {
        "deposit": deposit,
        "leverage": leverage,
        "spread": spread,
        "commission": commission,
        "swap_long": swap_long,
        "swap_short": swap_short,
        "hedging": hedging,
        "margin_hedged": margin_hedged,
    }
    return AccountConfig(**given)
