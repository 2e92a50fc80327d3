"""``neuronet forecast``: train ATFNet on a forecasting CSV."""


def forecast() -> None:
    """Train and evaluate a forecaster on a CSV."""
    raise NotImplementedError("forecast")
