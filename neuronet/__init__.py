"""neuronet: neural networks on OpenCL for MetaTrader-style trading research."""

__version__ = "0.1.0"
