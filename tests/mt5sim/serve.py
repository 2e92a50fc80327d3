"""Serve the simulated terminal over a real RPyC classic server, as a Wine-side bridge would.

    python tests/mt5sim/serve.py [--port 0]

Binds 127.0.0.1 only, puts this directory first on ``sys.path`` so that ``import MetaTrader5`` on the
server finds the simulator, and prints ``LISTENING <port>`` once the socket accepts connections (port 0
picks a free one), so a test can start it and wait for that line.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rpyc.core import SlaveService
from rpyc.utils.server import ThreadedServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # Same service and defaults as RPyC's own ``rpyc_classic`` script, bound to loopback.
    server = ThreadedServer(SlaveService, hostname="127.0.0.1", port=args.port, reuse_addr=True)
    server._listen()  # listen before announcing the port, so the first connect cannot be refused
    print(f"LISTENING {server.port}", flush=True)
    server.start()


if __name__ == "__main__":
    main()
