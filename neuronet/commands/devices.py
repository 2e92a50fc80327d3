"""``neuronet devices``: list OpenCL platforms and devices."""


def devices() -> None:
    """List OpenCL platforms and devices, and say which one neuronet uses."""
    raise NotImplementedError("devices")
