"""Live trading: an expert advisor on a MetaTrader 5 terminal, paper by default.

``engine`` drives the EA's lifecycle on bars as the terminal closes them, the same for one symbol
(``runner``) and several (``multi_runner``); ``paper`` fills its orders with
the backtest broker's rules; ``journal`` records every bar, decision, request and result, and is what a
restart resumes from and what ``neuronet live report`` turns into the backtest's report (``report``).
"""
