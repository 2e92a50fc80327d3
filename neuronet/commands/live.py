"""``neuronet live EA``: run an expert advisor on a MetaTrader 5 terminal (paper by default), and
``neuronet live report JOURNAL``: the backtest's report from a run's journal (a live account's from the
journal and the terminal's deal history, reached with the same ``-o`` options).

The terminal is reached as the ``mt5`` data source reaches it (``-o host=... -o port=...``; the bridge
address defaults to 127.0.0.1). The EA, its ``-p`` parameters and the account options are the
backtest's. The journal defaults to ``journals/<EA>-<SYMBOL>-<TF>-<mode>.jsonl``; starting again with the
same journal resumes the run.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from backtests.report import environment, write_report
from datafeeds.terminal import TerminalSource
from datafeeds.timeframes import Timeframe
from neuronet.commands import values
from neuronet.commands.account import (
    Commission,
    Deposit,
    Hedging,
    Leverage,
    MarginHedged,
    Spread,
    SwapLong,
    SwapShort,
    account_settings,
)
from neuronet.commands.ea_options import EaArg, Param, ea_params, resolve_ea
from neuronet.commands.options import BrokerTz, Force, Opts, data_request, flag, out_folder
from neuronet.commands.summary import print_summary
from neuronet.live.credentials import load as load_credentials
from neuronet.live.errors import LiveError
from neuronet.live.limits import AccountLimits, Limits
from neuronet.live.multi_runner import MultiLiveRunner
from neuronet.live.report import journal_result
from neuronet.live.runner import LiveRunner, LiveSettings
from neuronet.live.terminal_trade import TerminalTrade

# TerminalSource keywords a user may give with -o (the rest of its settings belong to the runner).
_SOURCE_KEYS = frozenset(
    {
        "host",
        "port",
        "timeout",
        "connect_timeout",
        "clock",
        "login",
        "password",
        "server",
        "path",
        "portable",
        "page_size",
    }
)

JournalArg = Annotated[
    str | None,
    typer.Argument(
        help="With 'report': the journal of a run (a live account's also needs -o host=... -o port=...).",
        show_default=False,
        metavar="JOURNAL",
        parser=values.text,
    ),
]


def live(
    ea: EaArg,
    journal_arg: JournalArg = None,
    symbol: Annotated[
        str | None,
        typer.Option(
            "--symbol",
            help="Symbol to trade (default EURUSD; a multi-symbol EA's is its first declared one).",
            parser=values.text,
        ),
    ] = None,
    timeframe: Annotated[
        str | None,
        typer.Option(
            "--timeframe",
            help="Bar timeframe, e.g. H1 (default H1; a multi-timeframe EA's is its first declared one).",
            parser=values.timeframe,
        ),
    ] = None,
    opt: Opts = None,
    broker_tz: BrokerTz = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper/--live",
            help="Paper trading (default) or the terminal's account (needs the limits).",
            metavar="",
        ),
    ] = True,
    param: Param = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Journal file (default journals/<EA>-<SYMBOL>-<TF>-<mode>.jsonl); an existing "
            "one is resumed.",
            parser=values.path,
        ),
    ] = None,
    history: Annotated[
        int,
        typer.Option(
            "--history",
            help="Closed bars taken at the start (0 = all the terminal holds).",
            min=0,
            max=values.MAX_COUNT,
        ),
    ] = 5000,
    study_bars: Annotated[
        int,
        typer.Option(
            "--study-bars",
            help="on_study's window in bars (0 = the whole history).",
            min=0,
            max=values.MAX_COUNT,
        ),
    ] = 0,
    poll: Annotated[
        float,
        typer.Option("--poll", help="Seconds between looks at the terminal.", parser=values.seconds),
    ] = 1.0,
    skip_missed: Annotated[
        bool,
        flag(
            "--skip-missed",
            help="Skip (with a warning) bars that closed while "
            "the terminal was unreachable, instead of processing them in order.",
        ),
    ] = False,
    close_on_exit: Annotated[
        bool, flag("--close-on-exit", help="Close the EA's positions at the stop (default: leave them).")
    ] = False,
    max_bars: Annotated[
        int | None,
        typer.Option("--max-bars", help="Stop after this many bars closed.", min=1, max=values.MAX_COUNT),
    ] = None,
    max_quote_age: Annotated[
        float | None,
        typer.Option(
            "--max-quote-age",
            help="Paper: seconds a fill's quote may be older than the bar's open (0: stamped at or after "
            "it); an older one is refused and the run waits for a fresh one.",
            parser=values.seconds,
        ),
    ] = None,
    deposit: Deposit = 10_000.0,
    leverage: Leverage = 100.0,
    spread: Spread = None,
    commission: Commission = 0.0,
    swap_long: SwapLong = 0.0,
    swap_short: SwapShort = 0.0,
    hedging: Hedging = False,
    margin_hedged: MarginHedged = None,
    max_lots: Annotated[
        float | None,
        typer.Option(
            "--max-lots",
            help="--live: most lots per order (per symbol of a multi-symbol EA).",
            parser=values.positive,
        ),
    ] = None,
    max_positions: Annotated[
        int | None,
        typer.Option(
            "--max-positions",
            help="--live: most open positions and pending orders (per symbol of a multi-symbol EA).",
            min=1,
            max=values.MAX_COUNT,
        ),
    ] = None,
    max_account_positions: Annotated[
        int | None,
        typer.Option(
            "--max-account-positions",
            help="--live, multi-symbol EAs: most open positions and pending orders of all symbols together.",
            min=1,
            max=values.MAX_COUNT,
        ),
    ] = None,
    max_daily_loss: Annotated[
        float | None,
        typer.Option(
            "--max-daily-loss",
            help="--live: loss of the day (deposit currency, the whole account) that stops trading.",
            parser=values.positive,
        ),
    ] = None,
    allow_symbol: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-symbol", help="--live: a symbol orders may be sent for (repeatable).", parser=values.text
        ),
    ] = None,
    kill_switch: Annotated[
        Path | None,
        typer.Option(
            "--kill-switch", help="--live: while this file exists, no new orders.", parser=values.path
        ),
    ] = None,
    deviation: Annotated[
        int,
        typer.Option("--deviation", help="--live: accepted slippage, points.", min=0, max=values.MAX_COUNT),
    ] = 10,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="With 'report': the report folder (default reports/<journal name>); must be new or empty.",
            parser=values.path,
        ),
    ] = None,
    credentials: Annotated[
        Path | None,
        typer.Option(
            "--credentials",
            help="TOML file with login, password and server, readable by you only (chmod 600); default: "
            "the NEURONET_MT5_LOGIN/PASSWORD/SERVER variables, else the terminal as logged in.",
            parser=values.path,
        ),
    ] = None,
    force: Force = False,
) -> None:
    """Run an expert advisor on a MetaTrader 5 terminal, paper by default; or 'live report JOURNAL'."""
    if ea == "report":
        if journal_arg is None:
            raise LiveError("neuronet live report JOURNAL: give the journal file")
        _report(Path(journal_arg), out, force, _source(opt, broker_tz, credentials))
        return
    if journal_arg is not None:
        raise LiveError(f"unexpected argument {journal_arg!r}: 'neuronet live EA [options]' takes one EA")
    if out is not None:
        raise LiveError("--out is the folder of 'neuronet live report JOURNAL'; a run writes its --journal")
    cls = resolve_ea(ea)
    params = ea_params(param or [], cls)
    cls.resolve_params(params)  # a bad -p fails here, before the terminal is reached
    multi = len(cls.symbols) > 1 or len(cls.timeframes) > 1
    symbol, timeframe = _main_chart(cls, symbol, timeframe, multi)
    account = account_settings(
        deposit=deposit,
        leverage=leverage,
        spread=spread,
        commission=commission,
        swap_long=swap_long,
        swap_short=swap_short,
        hedging=hedging,
        margin_hedged=margin_hedged,
    )
    source = _source(opt, broker_tz, credentials)
    tf = Timeframe.parse(timeframe)
    mode = "paper" if paper else "live"
    chart = "+".join(cls.symbols) + "-" + "+".join(cls.timeframes) if multi else f"{symbol}-{tf.name}"
    path = journal or Path("journals") / _file_name(f"{cls.__name__}-{chart}-{mode}.jsonl")
    if path.is_dir():  # the journal refuses these too; said here before the run is announced
        raise LiveError(f"--journal: journal {path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise LiveError(
            f"--journal: journal {path} is not a regular file (a device or a pipe); give a file name"
        )
    settings = LiveSettings(
        symbol,
        tf,
        path,
        mode=mode,
        account=account,
        history_bars=history,
        study_bars=study_bars,
        poll_s=poll,
        skip_missed=skip_missed,
        close_on_exit=close_on_exit,
        max_bars=max_bars,
        **({} if max_quote_age is None else {"max_quote_age": max_quote_age}),
    )
    trading = None
    if not paper:
        limits = {
            "max_lots": max_lots,
            "max_positions": max_positions,
            "max_daily_loss": max_daily_loss,
            "symbols": tuple(allow_symbol or ()),
        }
        missing = [k for k, v in limits.items() if v is None or v == ()]
        if missing:
            options = ", ".join(
                "--" + ("allow-symbol" if k == "symbols" else k.replace("_", "-")) for k in missing
            )
            raise LiveError(f"--live trades real money and needs explicit limits: give {options}")
        traded = cls.symbols if multi else (symbol,)
        refused = [s for s in traded if s not in limits["symbols"]]
        if refused:
            verb = "is" if len(refused) == 1 else "are"
            raise LiveError(
                f"--live: {', '.join(refused)} {verb} not among --allow-symbol "
                f"{', '.join(limits['symbols'])} ({cls.__name__} trades {', '.join(traded)}); "
                "nothing was sent"
            )
        state = (lambda day=None: runner.account_state(day)) if multi else None
        trading = _terminal_trading(limits, kill_switch, deviation, max_account_positions, state)
    elif max_account_positions is not None:
        raise LiveError("--max-account-positions is a limit of --live; a paper run has none")
    if not paper and max_quote_age is not None:
        raise LiveError("--max-quote-age is a paper fill's; a live account fills at the terminal's own price")
    if max_account_positions is not None and not multi:
        raise LiveError(
            f"--max-account-positions caps several symbols together; {cls.__name__} trades {symbol} only: "
            "give --max-positions"
        )
    what = f"{', '.join(cls.symbols)} on {', '.join(cls.timeframes)}" if multi else f"{symbol} {tf.name}"
    typer.echo(f"{cls.__name__} {mode} on {what} at {source.cache_feed()}; journal {path}; Ctrl-C stops")
    make = MultiLiveRunner if multi else LiveRunner
    runner = make(cls, params, source, settings, trading=trading, status=typer.echo)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop: as clean as Ctrl-C
    try:
        summary = runner.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        source.close()
    typer.echo(
        f"stopped after {summary.bars_closed} bars ({summary.decisions} decisions, {summary.missed} "
        f"missed and processed, {summary.skipped} skipped, {summary.reconnects} reconnects); "
        f"journal {path}"
    )


def _file_name(name: str) -> str:
    """The default journal's file name: a symbol such as "BTC/USD" or "../x" stays one name in journals/."""
    return re.sub(r"[^A-Za-z0-9._#+-]", "_", name).lstrip(".") or "journal.jsonl"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _main_chart(cls: type, symbol: str | None, timeframe: str | None, multi: bool) -> tuple[str, str]:
    """The main chart: ``--symbol``/``--timeframe`` (EURUSD H1 by default), or a multi-symbol EA's first
    declared symbol and timeframe (options naming another one are refused, not silently overridden)."""
    if not multi:
        return symbol or "EURUSD", timeframe or "H1"
    main = (cls.symbols or (symbol or "EURUSD",))[0]
    main_tf = str((cls.timeframes or (timeframe or "H1",))[0]).upper()
    for option, given, declared in (("--symbol", symbol, main), ("--timeframe", timeframe, main_tf)):
        if given is not None and given.upper() != declared.upper():
            raise LiveError(
                f"{option} {given}: {cls.__name__} declares its own main chart {main} {main_tf} (symbols "
                f"{', '.join(cls.symbols or (main,))}; timeframes {', '.join(cls.timeframes or (main_tf,))})"
            )
    return main, main_tf


def _terminal_trading(
    limits: dict,
    kill_switch: Path | None,
    deviation: int,
    account_positions: int | None = None,
    account: Any = None,
) -> Any:
    """The terminal trade context of ``--live`` (``neuronet.live.terminal_trade``) under its limits; with
    ``account`` (a multi-symbol run's ``account_state``) also under the account-wide ones."""
    checked: Any = Limits(**limits, kill_switch=kill_switch)
    if account is not None:
        checked = AccountLimits(checked, account_positions, account)

    def make(source: TerminalSource, symbol: str, magic: int, record: Any, *, market: Any) -> TerminalTrade:
        return TerminalTrade(
            source,
            symbol,
            magic=magic,
            limits=checked,
            deviation=deviation,
            record=record,
            clock=source.clock,
            market=market,
        )

    return make


def _report(path: Path, out: Path | None, force: bool, source: TerminalSource) -> None:
    """A paper journal is scored by itself; a live account's also needs the terminal's deal history,
    reached with the same -o options as the run (connected only when the journal asks for it)."""
    folder = out or Path("reports") / path.stem
    with out_folder(folder, force):  # a journal refused here leaves no empty report folder behind
        try:
            result = journal_result(path, source)
        finally:
            source.close()
        page = write_report(result, folder, environment(), force=True)  # out_folder checked it
    print_summary(result, page, None)


def _source(opt: list[str] | None, broker_tz: str | None, credentials: Path | None) -> TerminalSource:
    """The terminal of ``-o host=... -o port=...`` (not connected until first used), logged in with the
    account of ``--credentials FILE``, else of ``-o login=...``, else of the ``NEURONET_MT5_*`` variables,
    else as the terminal is."""
    _, options = data_request("mt5", None, opt, broker_tz)
    unknown = sorted(set(options) - _SOURCE_KEYS)
    if unknown:
        raise LiveError(
            f"-o {unknown[0]}=...: not a terminal option (known: {', '.join(sorted(_SOURCE_KEYS))})"
        )
    given = sorted({"login", "password", "server"} & set(options))
    if credentials is not None and given:
        raise LiveError(f"--credentials and -o {given[0]}=... both name the account: give one")
    account = load_credentials(credentials) if credentials is not None or not given else None
    if account is not None:
        options.update(account.initialize_kwargs())
    return TerminalSource(**{**options, "retries": 0})
