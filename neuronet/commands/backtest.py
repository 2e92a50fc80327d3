"""``neuronet run`` and ``neuronet backtest``: replay history with an expert advisor."""


def run() -> None:
    """Run the Fractal EA on the embedded EURUSD H1 sample and write a report."""
    raise NotImplementedError("run")


def backtest() -> None:
    """Backtest an expert advisor."""
    raise NotImplementedError("backtest")
