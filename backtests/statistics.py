"""The one table of report statistics: key, label, section, format and glossary line of every figure.

report.json's ``stats`` (its keys and their order), ``Result.stats``, the HTML tables, the glossary, the
console summary and the README's list of keys all read this table, so a figure cannot be shown without its
definition or defined under another name (a test checks every statistic has each field and every key the
metrics compute is in the table). Where MetaTrader prints two figures in one cell ("Short Trades (won
%)"), the second names the first in ``joins`` and is shown in its row, as the Strategy Tester shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

SECTIONS = {
    "mt5": "MetaTrader 5",
    "backtesting.py": "backtesting.py",
    "trading_days": "Annualised on trading days",
}
FORMATS = ("money", "ratio", "pct", "count", "time", "duration")


@dataclass(frozen=True)
class Statistic:
    """One report figure. ``fmt``: how it is printed (``FORMATS``); ``joins``: the key of the row it is
    shown in, in brackets (``pattern`` places it), instead of a row of its own."""

    key: str
    label: str
    section: str
    fmt: str
    glossary: str
    joins: str | None = None
    pattern: str = "({})"


def _s(key, label, section, fmt, glossary, joins=None, pattern="({})") -> Statistic:
    return Statistic(key, label, section, fmt, glossary, joins, pattern)


_MT = "mt5"
_PY = "backtesting.py"
_TD = "trading_days"

TABLE: tuple[Statistic, ...] = (
    _s("bars", "Bars", _MT, "count", "forward bars replayed (the tested period)."),
    _s("initial_deposit", "Initial Deposit", _MT, "money",
       "account money at the start of the forward period."),
    _s("total_net_profit", "Total Net Profit", _MT, "money",
       "sum of every trade's net profit (profit + commission + swap)."),
    _s("gross_profit", "Gross Profit", _MT, "money", "sum of the winning trades' net profits."),
    _s("gross_loss", "Gross Loss", _MT, "money",
       "sum of the losing trades' net profits (a trade of exactly 0 counts as a loss)."),
    _s("profit_factor", "Profit Factor", _MT, "ratio", "Gross Profit / |Gross Loss|."),
    _s("expected_payoff", "Expected Payoff", _MT, "money", "Total Net Profit / Total Trades."),
    _s("recovery_factor", "Recovery Factor", _MT, "ratio",
       "Total Net Profit / Balance Drawdown Maximal (MQL5's STAT_PROFIT / STAT_BALANCE_DD)."),
    _s("final_balance", "Final Balance", _MT, "money", "balance after the last forward bar."),
    _s("final_equity", "Final Equity", _MT, "money", "equity at the last forward bar's close."),
    _s("sharpe_ratio", "Sharpe Ratio", _MT, "ratio",
       "per trade, not annualised: (AHPR − 1) / standard deviation of the trade HPRs."),
    _s("z_score", "Z-Score", _MT, "ratio", "runs test on the win/loss sequence."),
    _s("z_score_probability_pct", "Z-Score confidence %", _MT, "pct",
       "the two-sided normal confidence of the Z-Score, in brackets beside it.", "z_score", "({}%)"),
    _s("ahpr", "AHPR", _MT, "ratio",
       "arithmetic mean of the trade holding-period returns, balance after / balance before each trade."),
    _s("ghpr", "GHPR", _MT, "ratio", "geometric mean of the same holding-period returns."),
    _s("lr_correlation", "LR Correlation", _MT, "ratio",
       "correlation of the balance graph with its least-squares line; the graph is the deposit (x = 0) "
       "then the balance after each of the n trades (x = 1..n)."),
    _s("lr_standard_error", "LR Standard Error", _MT, "money",
       "standard error of that balance graph about its line: √(Σ residual² / (n − 1))."),
    _s("margin_level_min_pct", "Margin Level (min) %", _MT, "pct",
       "lowest equity / margin in %, equity at each bar's worst prices (margin_level)."),
    _s("balance_drawdown_absolute", "Balance Drawdown Absolute", _MT, "money",
       "deposit − lowest balance below it (the balance after each deal)."),
    _s("balance_drawdown_maximal", "Balance Drawdown Maximal", _MT, "money",
       "largest fall of the balance from a running peak, money (% of that peak)."),
    _s("balance_drawdown_maximal_pct", "Balance Drawdown Maximal %", _MT, "pct",
       "that fall in % of its peak, in brackets beside it.", "balance_drawdown_maximal", "({}%)"),
    _s("balance_drawdown_relative_pct", "Balance Drawdown Relative %", _MT, "pct",
       "largest fall of the balance in % of its peak (money); may be another fall."),
    _s("balance_drawdown_relative", "Balance Drawdown Relative", _MT, "money",
       "the money of that fall, in brackets beside it.", "balance_drawdown_relative_pct"),
    _s("equity_drawdown_absolute", "Equity Drawdown Absolute", _MT, "money",
       "deposit − lowest equity at any modelled price (equity_path)."),
    _s("equity_drawdown_maximal", "Equity Drawdown Maximal", _MT, "money",
       "largest fall of the equity from a running peak to a later trough, on every price the mode models "
       "(equity_path), money (% of the peak)."),
    _s("equity_drawdown_maximal_pct", "Equity Drawdown Maximal %", _MT, "pct",
       "that fall in % of its peak, in brackets beside it.", "equity_drawdown_maximal", "({}%)"),
    _s("equity_drawdown_relative_pct", "Equity Drawdown Relative %", _MT, "pct",
       "the largest equity fall in % of its peak (money); may be another fall."),
    _s("equity_drawdown_relative", "Equity Drawdown Relative", _MT, "money",
       "the money of that fall, in brackets beside it.", "equity_drawdown_relative_pct"),
    _s("total_trades", "Total Trades", _MT, "count", "closing deals (a partial close is a trade)."),
    _s("total_deals", "Total Deals", _MT, "count",
       "every deal: entries, additions, partial and full closes."),
    _s("short_trades", "Short Trades (won %)", _MT, "count",
       "closed sell positions, share with net profit > 0."),
    _s("short_won_pct", "Short trades won %", _MT, "pct",
       "share of the short trades with net profit > 0.", "short_trades", "({}%)"),
    _s("long_trades", "Long Trades (won %)", _MT, "count",
       "closed buy positions, share with net profit > 0."),
    _s("long_won_pct", "Long trades won %", _MT, "pct",
       "share of the long trades with net profit > 0.", "long_trades", "({}%)"),
    _s("profit_trades", "Profit Trades (% of total)", _MT, "count", "trades with net profit > 0."),
    _s("profit_trades_pct", "Profit trades %", _MT, "pct",
       "their share of all trades.", "profit_trades", "({}%)"),
    _s("loss_trades", "Loss Trades (% of total)", _MT, "count", "trades with net profit ≤ 0."),
    _s("loss_trades_pct", "Loss trades %", _MT, "pct", "their share of all trades.", "loss_trades", "({}%)"),
    _s("largest_profit_trade", "Largest profit trade", _MT, "money", "largest net profit of one trade."),
    _s("largest_loss_trade", "Largest loss trade", _MT, "money", "lowest net profit of one trade."),
    _s("average_profit_trade", "Average profit trade", _MT, "money", "Gross Profit / Profit Trades."),
    _s("average_loss_trade", "Average loss trade", _MT, "money", "Gross Loss / Loss Trades."),
    _s("max_consecutive_wins", "Maximum consecutive wins ($)", _MT, "count",
       "longest run of winning trades, its count (money)."),
    _s("max_consecutive_wins_money", "Maximum consecutive wins money", _MT, "money",
       "the net profit of that run, in brackets beside it.", "max_consecutive_wins"),
    _s("max_consecutive_losses", "Maximum consecutive losses ($)", _MT, "count",
       "longest run of losing trades, its count (money)."),
    _s("max_consecutive_losses_money", "Maximum consecutive losses money", _MT, "money",
       "the net loss of that run, in brackets beside it.", "max_consecutive_losses"),
    _s("maximal_consecutive_profit", "Maximal consecutive profit (count)", _MT, "money",
       "largest money of one run of winning trades (its count)."),
    _s("maximal_consecutive_profit_count", "Maximal consecutive profit count", _MT, "count",
       "the number of trades of that run, in brackets beside it.", "maximal_consecutive_profit"),
    _s("maximal_consecutive_loss", "Maximal consecutive loss (count)", _MT, "money",
       "largest loss of one run of losing trades (its count)."),
    _s("maximal_consecutive_loss_count", "Maximal consecutive loss count", _MT, "count",
       "the number of trades of that run, in brackets beside it.", "maximal_consecutive_loss"),
    _s("average_consecutive_wins", "Average consecutive wins", _MT, "ratio",
       "mean length of the runs of winning trades."),
    _s("average_consecutive_losses", "Average consecutive losses", _MT, "ratio",
       "mean length of the runs of losing trades."),
    _s("commission", "Commission", _MT, "money",
       "sum of the closed trades' commissions, entry and exit deals, as they hit the balance (negative: "
       "paid); backtesting.py's Commissions [$] is the same money, positive."),
    _s("swap", "Swap", _MT, "money",
       "sum of the swaps the closed trades were charged (negative) or paid at the server's midnights."),
    _s("start", "Start", _PY, "time",
       "first row of the curve: the close of the last study bar, before any forward trade."),
    _s("end", "End", _PY, "time", "last forward bar."),
    _s("duration", "Duration", _PY, "duration", "End − Start."),
    _s("exposure_time_pct", "Exposure Time [%]", _PY, "pct",
       "share of curve rows from a trade's entry bar to its exit bar, both included."),
    _s("equity_final", "Equity Final [$]", _PY, "money", "equity at the last close."),
    _s("equity_peak", "Equity Peak [$]", _PY, "money", "highest equity at a close."),
    _s("return_pct", "Return [%]", _PY, "pct", "equity at the last close / deposit − 1."),
    _s("buy_and_hold_return_pct", "Buy & Hold Return [%]", _PY, "pct",
       "close of the last bar / close at Start − 1."),
    _s("return_ann_pct", "Return (Ann.) [%]", _PY, "pct",
       "(1 + geometric mean daily return)^252 − 1: returns of the last equity of each calendar day (UTC), "
       "252 periods a year (365 for data with weekend bars)."),
    _s("volatility_ann_pct", "Volatility (Ann.) [%]", _PY, "pct",
       "√((var + (1 + g)²)^252 − (1 + g)^504) of those daily returns, g their geometric mean."),
    _s("cagr_pct", "CAGR [%]", _PY, "pct",
       "(Equity Final / deposit)^(1 / years) − 1, years = Duration / 365.25 days."),
    _s("sharpe_ratio_ann", "Sharpe Ratio", _PY, "ratio",
       "Return (Ann.) / Volatility (Ann.), risk-free rate 0."),
    _s("sortino_ratio", "Sortino Ratio", _PY, "ratio",
       "annualised return / (√mean(min(daily return, 0)²) · √252)."),
    _s("calmar_ratio", "Calmar Ratio", _PY, "ratio", "annualised return / Max. Drawdown (equity at closes)."),
    _s("alpha_pct", "Alpha [%]", _PY, "pct", "Return − Beta · Buy & Hold Return."),
    _s("beta", "Beta", _PY, "ratio",
       "covariance of the bar log returns of equity and close / variance of the close's."),
    _s("max_drawdown_pct", "Max. Drawdown [%]", _PY, "pct",
       "largest fall of the equity at closes from its running peak (negative)."),
    _s("avg_drawdown_pct", "Avg. Drawdown [%]", _PY, "pct",
       "mean depth of the drawdowns, each ending at a new peak or the last bar."),
    _s("max_drawdown_duration", "Max. Drawdown Duration", _PY, "duration",
       "longest time from a peak to the next peak (or the end)."),
    _s("avg_drawdown_duration", "Avg. Drawdown Duration", _PY, "duration", "mean of those times."),
    _s("win_rate_pct", "Win Rate [%]", _PY, "pct", "share of trades with net profit > 0."),
    _s("best_trade_pct", "Best Trade [%]", _PY, "pct",
       "highest trade return: net profit / (lots · contract size · entry price)."),
    _s("worst_trade_pct", "Worst Trade [%]", _PY, "pct", "lowest trade return."),
    _s("avg_trade_pct", "Avg. Trade [%]", _PY, "pct", "geometric mean of the trade returns."),
    _s("max_trade_duration", "Max. Trade Duration", _PY, "duration", "longest exit − entry time."),
    _s("avg_trade_duration", "Avg. Trade Duration", _PY, "duration", "mean exit − entry time."),
    _s("profit_factor_returns", "Profit Factor (returns)", _PY, "ratio",
       "backtesting.py's Profit Factor: sum of positive trade returns / |sum of negative ones| (not "
       "MetaTrader's, which uses money)."),
    _s("expectancy_pct", "Expectancy [%]", _PY, "pct", "arithmetic mean of the trade returns."),
    _s("sqn", "SQN", _PY, "ratio", "√trades · mean net profit / its standard deviation."),
    _s("kelly_criterion", "Kelly Criterion", _PY, "ratio",
       "win rate − (1 − win rate) / (average win / average loss)."),
    _s("trading_days_per_year", "Trading days per year", _TD, "ratio",
       "days with bars per year, measured: weekend bars count to the next Monday, and the share of "
       "weekdays with bars times 260.9 (365.25 when the data trades at weekends)."),
    _s("td_return_ann_pct", "Return (Ann., trading days) [%]", _TD, "pct",
       "as Return (Ann.), on trading-day returns, measured days a year."),
    _s("td_volatility_ann_pct", "Volatility (Ann., trading days) [%]", _TD, "pct",
       "as Volatility (Ann.), on the same returns and days."),
    _s("td_sharpe_ratio", "Sharpe Ratio (trading days)", _TD, "ratio", "their ratio, risk-free rate 0."),
    _s("td_sortino_ratio", "Sortino Ratio (trading days)", _TD, "ratio",
       "as the Sortino Ratio, on the same returns and days."),
)  # fmt: skip

BY_KEY: dict[str, Statistic] = {s.key: s for s in TABLE}

# The figures the console summary and a result's repr show first, in this order.
HEADLINE = ("total_net_profit", "return_pct", "total_trades", "win_rate_pct", "profit_factor",
            "expected_payoff", "equity_drawdown_relative_pct", "balance_drawdown_maximal", "sharpe_ratio_ann",
            "sqn", "buy_and_hold_return_pct")  # fmt: skip


def fmt(value: object, kind: str) -> str:
    """One figure as the report prints it: money to cents with thousands, percentages and ratios to two
    decimals (four significant digits below 0.01), counts whole, times in MetaTrader's form."""
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if kind == "time":
        return f"{pd.Timestamp(value):%Y.%m.%d %H:%M}"
    if kind == "count" and isinstance(value, (int, float)) and float(value).is_integer():
        return f"{int(value):,}"
    if isinstance(value, float):
        if kind != "money" and value and abs(value) < 0.01:
            return f"{value:.4g}"
        return f"{value:,.2f}"
    return str(value)


def ordered(stats: dict) -> dict:
    """``stats`` in the table's order (keys the table lacks, if any, after them: the test names them)."""
    known = {s.key: stats[s.key] for s in TABLE if s.key in stats}
    return {**known, **{k: v for k, v in stats.items() if k not in known}}


def series(stats: dict, name: str | None = None) -> pd.Series:
    """The statistics as a pandas Series (object dtype: counts stay ints, missing figures None), keys as
    report.json's, in the table's order: what ``Result.stats`` is."""
    return pd.Series(ordered(dict(stats)), dtype=object, name=name)


def rows(stats, section: str) -> list[tuple[str, str]]:
    """(label, printed value) of each row of ``section``: a joined figure in brackets beside its row's."""
    extra: dict[str, list[Statistic]] = {}
    for s in TABLE:
        if s.joins:
            extra.setdefault(s.joins, []).append(s)
    out = []
    for s in TABLE:
        if s.section != section or s.joins:
            continue
        text = fmt(stats.get(s.key), s.fmt)
        for j in extra.get(s.key, []):
            text += " " + j.pattern.format(fmt(stats.get(j.key), j.fmt))
        out.append((s.label, text))
    return out


def glossary(section: str) -> list[tuple[str, str]]:
    """(label, definition) of each statistic of ``section``, joined ones under their own label."""
    return [(s.label, s.glossary) for s in TABLE if s.section == section]
