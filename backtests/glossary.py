"""One line per report figure: what the number is, which curve or drawdown it uses. The HTML report prints
these under its tables, so a reader never has to guess which of two tools' definitions a name follows."""

from __future__ import annotations

CURVES = (
    "Curves (report.json \"curves\", one row per forward bar after a start row: the deposit at the close of "
    "the last study bar): balance and equity at each bar's close; equity_worst with every open position at "
    "its worst price of the bar (longs at the low bid, shorts at the high ask); margin_level = equity_worst "
    "/ margin held then, in %. Trade figures use each closed trade's net profit (report.json \"trades\")."
)

MT5: dict[str, str] = {
    "Bars": "forward bars replayed (the tested period).",
    "Initial Deposit": "account money at the start of the forward period.",
    "Total Net Profit": "sum of every trade's net profit (profit + commission + swap).",
    "Gross Profit": "sum of the winning trades' net profits.",
    "Gross Loss": "sum of the losing trades' net profits (a trade of exactly 0 counts as a loss).",
    "Profit Factor": "Gross Profit / |Gross Loss|.",
    "Expected Payoff": "Total Net Profit / Total Trades.",
    "Recovery Factor": "Total Net Profit / Balance Drawdown Maximal (MQL5's STAT_PROFIT / STAT_BALANCE_DD).",
    "Sharpe Ratio": "per trade, not annualised: (AHPR − 1) / standard deviation of the trade HPRs.",
    "Z-Score": "runs test on the win/loss sequence; in brackets the two-sided normal confidence.",
    "AHPR": "arithmetic mean of the trade holding-period returns, balance after / balance before each trade.",
    "GHPR": "geometric mean of the same holding-period returns.",
    "LR Correlation": "correlation of the balance graph with its least-squares line; the graph is the "
    "deposit (x = 0) then the balance after each of the n trades (x = 1..n).",
    "LR Standard Error": "standard error of that balance graph about its line: √(Σ residual² / (n − 1)).",
    "Margin Level (min)": "lowest equity / margin in %, equity at each bar's worst prices (margin_level).",
    "Balance Drawdown Absolute": "deposit − lowest balance below it (balance at bar closes).",
    "Balance Drawdown Maximal": "largest fall of the balance from a running peak, money (% of that peak).",
    "Balance Drawdown Relative": "largest fall of the balance in % of its peak (money); may be another fall.",
    "Equity Drawdown Absolute": "deposit − lowest equity at a bar's worst prices (curve equity_worst).",
    "Equity Drawdown Maximal": "largest fall from an equity peak (at a close) to a later equity at worst "
    "prices, money (%).",
    "Equity Drawdown Relative": "the same in % of the peak (money); may be another fall.",
    "Total Trades": "closing deals (a partial close is a trade).",
    "Total Deals": "every deal: entries, additions, partial and full closes.",
    "Short Trades (won %)": "closed sell positions, share with net profit > 0.",
    "Long Trades (won %)": "closed buy positions, share with net profit > 0.",
    "Profit Trades (% of total)": "trades with net profit > 0.",
    "Loss Trades (% of total)": "trades with net profit ≤ 0.",
    "Largest profit trade": "largest net profit of one trade.",
    "Largest loss trade": "lowest net profit of one trade.",
    "Average profit trade": "Gross Profit / Profit Trades.",
    "Average loss trade": "Gross Loss / Loss Trades.",
    "Maximum consecutive wins ($)": "longest run of winning trades, its count (money).",
    "Maximum consecutive losses ($)": "longest run of losing trades, its count (money).",
    "Maximal consecutive profit (count)": "largest money of one run of winning trades (its count).",
    "Maximal consecutive loss (count)": "largest loss of one run of losing trades (its count).",
    "Average consecutive wins": "mean length of the runs of winning trades.",
    "Average consecutive losses": "mean length of the runs of losing trades.",
}

PEER: dict[str, str] = {
    "Start": "first row of the curve: the close of the last study bar, before any forward trade.",
    "End": "last forward bar.",
    "Duration": "End − Start.",
    "Exposure Time [%]": "share of curve rows from a trade's entry bar to its exit bar, both included.",
    "Equity Final [$]": "equity at the last close.",
    "Equity Peak [$]": "highest equity at a close.",
    "Return [%]": "equity at the last close / deposit − 1.",
    "Buy & Hold Return [%]": "close of the last bar / close at Start − 1.",
    "Return (Ann.) [%]": "(1 + geometric mean daily return)^252 − 1: returns of the last equity of each "
    "calendar day (UTC), 252 periods a year (365 for data with weekend bars).",
    "Volatility (Ann.) [%]": "√((var + (1 + g)²)^252 − (1 + g)^504) of those daily returns, g their "
    "geometric mean.",
    "CAGR [%]": "(Equity Final / deposit)^(1 / years) − 1, years = Duration / 365.25 days.",
    "Sharpe Ratio": "Return (Ann.) / Volatility (Ann.), risk-free rate 0.",
    "Sortino Ratio": "annualised return / (√mean(min(daily return, 0)²) · √252).",
    "Calmar Ratio": "annualised return / Max. Drawdown (equity at closes).",
    "Alpha [%]": "Return − Beta · Buy & Hold Return.",
    "Beta": "covariance of the bar log returns of equity and close / variance of the close's.",
    "Max. Drawdown [%]": "largest fall of the equity at closes from its running peak (negative).",
    "Avg. Drawdown [%]": "mean depth of the drawdowns, each ending at a new peak or the last bar.",
    "Max. Drawdown Duration": "longest time from a peak to the next peak (or the end).",
    "Avg. Drawdown Duration": "mean of those times.",
    "# Trades": "closed trades.",
    "Win Rate [%]": "share of trades with net profit > 0.",
    "Best Trade [%]": "highest trade return: net profit / (lots · contract size · entry price).",
    "Worst Trade [%]": "lowest trade return.",
    "Avg. Trade [%]": "geometric mean of the trade returns.",
    "Max. Trade Duration": "longest exit − entry time.",
    "Avg. Trade Duration": "mean exit − entry time.",
    "Profit Factor (returns)": "backtesting.py's Profit Factor: sum of positive trade returns / |sum of "
    "negative ones| (not MetaTrader's, which uses money).",
    "Expectancy [%]": "arithmetic mean of the trade returns.",
    "SQN": "√trades · mean net profit / its standard deviation.",
    "Kelly Criterion": "win rate − (1 − win rate) / (average win / average loss).",
}

TRADING_DAYS: dict[str, str] = {
    "Trading days per year": "days with bars per year, measured: weekend bars count to the next Monday, and "
    "the share of weekdays with bars times 260.9 (365.25 when the data trades at weekends).",
    "Return (Ann., trading days) [%]": "as Return (Ann.), on trading-day returns, measured days a year.",
    "Volatility (Ann., trading days) [%]": "as Volatility (Ann.), on the same returns and days.",
    "Sharpe Ratio (trading days)": "their ratio, risk-free rate 0.",
    "Sortino Ratio (trading days)": "as the Sortino Ratio, on the same returns and days.",
}
