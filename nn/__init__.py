"""neuronet's network library: layers, losses, optimizers and models on an OpenCL or NumPy backend."""

from __future__ import annotations

from nn import attention, complex, spectral  # noqa: F401  (register their layer types for load())
from nn.atfnet import ATFNet, PatchTST
from nn.backend_choice import BackendUnavailableError, check_backend_name, get_backend
from nn.callbacks import EarlyStopping, EpochRecord, History
from nn.errors import NNConfigError, NNDataError, NNTypeError
from nn.io import ModelFileError, load, save
from nn.layers import ActivationLayer, BatchNorm, Dense, Dropout, Softmax, from_config, register_layer
from nn.model import Sequential
from nn.optim import SGD, AdaDelta, AdaGrad, Adam, ExponentialDecay, Momentum, RMSProp, StepDecay

__all__ = [
    "SGD",
    "ATFNet",
    "ActivationLayer",
    "AdaDelta",
    "AdaGrad",
    "Adam",
    "BackendUnavailableError",
    "BatchNorm",
    "Dense",
    "Dropout",
    "EarlyStopping",
    "EpochRecord",
    "ExponentialDecay",
    "History",
    "ModelFileError",
    "Momentum",
    "NNConfigError",
    "NNDataError",
    "NNTypeError",
    "PatchTST",
    "RMSProp",
    "Sequential",
    "Softmax",
    "StepDecay",
    "check_backend_name",
    "from_config",
    "get_backend",
    "load",
    "register_layer",
    "save",
]
