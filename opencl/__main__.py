"""``python -m opencl``: list OpenCL devices and the one neuronet would choose (no neuronet CLI needed)."""

from opencl.choice import choose_device
from opencl.device import describe, list_devices

if __name__ == "__main__":
    print(describe(list_devices()))
    choice = choose_device()
    print(f"default: {choice.info.index} {choice.info.name} ({choice.reason})")
