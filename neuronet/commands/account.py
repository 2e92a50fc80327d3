"""The account options of ``run``, ``backtest``, ``optimize`` and ``live``: declared once here, and built
into one ``backtests.AccountConfig`` by ``account_settings``, so every command trades on the same settings
with the same defaults and refuses a bad value the same way (one line naming the option, exit status 2).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from backtests import AccountConfig
from neuronet.commands.errors import CommandError
from neuronet.commands.options import flag

Deposit = Annotated[float, typer.Option("--deposit", help="Initial deposit (deposit currency).")]
Leverage = Annotated[float, typer.Option("--leverage", help="Account leverage 1:N.")]
Spread = Annotated[
    int | None,
    typer.Option(
        "--spread",
        help="Fixed spread in points (default: each bar's own; candles without any spread, such as the "
        f"sample, trade with {AccountConfig.missing_spread} points).",
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

# Each setting's option, named when its value is refused.
OPTIONS = {
    "deposit": "--deposit",
    "leverage": "--leverage",
    "spread": "--spread",
    "commission": "--commission",
    "swap_long": "--swap-long",
    "swap_short": "--swap-short",
    "hedging": "--hedging",
    "margin_hedged": "--margin-hedged",
}


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
    refuses is a ``CommandError`` naming its option, e.g. ``--deposit nan: invalid account setting ...``."""
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
    for name, value in given.items():  # one at a time, so the message names the option at fault
        try:
            AccountConfig(**{name: value})
        except ValueError as exc:
            raise CommandError(f"{OPTIONS[name]} {value}: {exc}") from None
    return AccountConfig(**given)
