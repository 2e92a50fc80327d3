"""neuronet's network library: layers, losses, optimizers and models on an OpenCL or NumPy backend."""
