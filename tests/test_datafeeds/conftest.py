"""Fixtures for the datafeeds tests. Blocks are self-contained; each names the tests it serves."""

from __future__ import annotations

import importlib.util
import os
import selectors
import subprocess
import sys
from pathlib import Path

import pytest

# ---- MetaTrader 5 terminal: a real RPyC classic server process serving the simulated terminal ---------
# Used by test_terminal_bridge.py and test_terminal_native.py.

MT5SIM_DIR = Path(__file__).resolve().parents[1] / "mt5sim"


def _load_sim_market():
    """The simulator's market module, loaded under a private name so ``MetaTrader5`` stays unimportable
    here (the terminal source must not mistake the test process for a Windows terminal)."""
    spec = importlib.util.spec_from_file_location("mt5sim_market", MT5SIM_DIR / "MetaTrader5" / "market.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def sim_market():
    """Known candles: ``sim_market.history(symbol, timeframe) -> (broker rates, utc seconds)``."""
    return _load_sim_market()


@pytest.fixture(scope="session")
def mt5_server():
    """``(host, port)`` of an RPyC classic server subprocess whose ``MetaTrader5`` is the simulator."""
    proc = subprocess.Popen(
        [sys.executable, str(MT5SIM_DIR / "serve.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=30):
            raise RuntimeError("the simulated terminal server did not start within 30 s")
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "LISTENING":
            raise RuntimeError(f"unexpected first line from the simulated terminal server: {line}")
        yield "127.0.0.1", int(line[1])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def mt5sim(mt5_server):
    """The server's simulator state (``SIM``) over a control connection, reset before and after the test,
    with ``maxbars=1000`` so that a year of H1 bars takes several pages."""
    import rpyc

    control = rpyc.classic.connect(*mt5_server)
    sim = control.modules.MetaTrader5.SIM
    sim.reset()
    sim.configure(maxbars=1000)
    try:
        yield sim
    finally:
        sim.reset()
        control.close()


@pytest.fixture
def native_mt5(monkeypatch):
    """The simulator imported in-process as ``MetaTrader5`` (the Windows code path); its ``SIM``."""
    monkeypatch.syspath_prepend(str(MT5SIM_DIR))
    for name in [m for m in sys.modules if m == "MetaTrader5" or m.startswith("MetaTrader5.")]:
        monkeypatch.delitem(sys.modules, name)
    import MetaTrader5

    MetaTrader5.SIM.reset()
    MetaTrader5.SIM.configure(maxbars=1000)
    yield MetaTrader5.SIM
    MetaTrader5.SIM.reset()
    for name in [m for m in sys.modules if m == "MetaTrader5" or m.startswith("MetaTrader5.")]:
        del sys.modules[name]


# ---- Hand-made candle frames ------------------------------------------------------------------------------
# Used by test_validate.py, test_resample.py, test_store.py and test_mt5_csv.py.


@pytest.fixture
def candles():
    """``candles(times, ohlc_rows, timeframe="H1", tick_volume=, spread=, real_volume=, clock=)``: a
    canonical frame from UTC time strings and (open, high, low, close) rows."""
    import numpy as np
    import pandas as pd

    from datafeeds import UTC, CandleMeta, Timeframe, make_frame

    def build(times, ohlc, *, timeframe="H1", tick_volume=None, spread=None, real_volume=None, clock=UTC):
        n = len(times)
        arr = np.array(ohlc, dtype=np.float64).reshape(n, 4)  # (N, 4)
        data = {
            "open": arr[:, 0],
            "high": arr[:, 1],
            "low": arr[:, 2],
            "close": arr[:, 3],
            "tick_volume": np.array(tick_volume if tick_volume is not None else [1] * n, dtype=np.uint64),
            "spread": np.array(spread if spread is not None else [0] * n, dtype=np.int32),
            "real_volume": np.array(real_volume if real_volume is not None else [0] * n, dtype=np.uint64),
        }
        meta = CandleMeta("EURUSD", Timeframe.parse(timeframe), 5, clock, "test")
        return make_frame(data, pd.DatetimeIndex(times), meta)

    return build


# ---- Dukascopy archive: a real HTTP server on loopback serving files the test puts there -------------
# Used by test_dukascopy*.py.


class FakeArchive:
    """What the loopback archive serves. ``files``: path below the base URL -> bytes (404 when absent).
    ``plan``: path -> list of one-shot actions for the next requests of that path: an HTTP status to
    answer with, ``("truncate", n)`` to announce the full length but close after ``n`` bytes,
    ``("drip", seconds)`` to send the body one byte every ``seconds``, ``("drip-headers", seconds)`` to
    send the status line and headers that way, ``("silent", seconds)`` to say nothing for that long, or
    ``("garbage", n)`` to answer with ``n`` random bytes that are not HTTP.
    ``requests``/``agents``: the paths asked for and the User-Agent of each request, in order."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.plan: dict[str, list] = {}
        self.requests: list[str] = []
        self.agents: list[str] = []
        self.base_url = ""


@pytest.fixture
def archive():
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = FakeArchive()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.removeprefix("/datafeed/")
            state.requests.append(path)
            state.agents.append(self.headers.get("User-Agent", ""))
            actions = state.plan.get(path)
            action = actions.pop(0) if actions else None
            if isinstance(action, int):
                self.send_error(action)
                return
            if action and action[0] in ("drip-headers", "silent", "garbage"):
                self._misbehave(*action, state.files.get(path, b""))
                return
            body = state.files.get(path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if action and action[0] == "drip":
                for i in range(len(body)):
                    time.sleep(action[1])
                    try:
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return
                return
            if action and action[0] == "truncate":
                self.wfile.write(body[: action[1]])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def _misbehave(self, kind: str, arg, body: bytes) -> None:
            self.close_connection = True
            try:
                if kind == "silent":
                    time.sleep(arg)
                elif kind == "garbage":
                    self.wfile.write(os.urandom(arg))
                else:
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                    for i in range(len(head)):
                        time.sleep(arg)
                        self.wfile.write(head[i : i + 1])
                        self.wfile.flush()
                    self.wfile.write(body)
            except OSError:  # the client gave up
                pass

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/datafeed"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
