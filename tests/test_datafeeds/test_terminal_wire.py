"""Peers that are not RPyC servers must not hang the terminal source: real sockets on 127.0.0.1, servers
written here (random bytes, an HTTP reply, a one-byte drip, a huge frame length, a compressed bomb)."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
import zlib

import pytest

from datafeeds.terminal import TerminalSource
from datafeeds.terminal_errors import TerminalError


def _random(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(os.urandom(4096))
    stop.wait(30)


def _http(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n")
    stop.wait(30)


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(struct.pack("!LB", 1000, 0))  # a plausible frame header, then one byte at a time
    while not stop.wait(0.2):
        conn.sendall(b"x")


def _huge(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(struct.pack("!LB", 2**32 - 1, 0) + b"\0" * 65536)
    while not stop.wait(0.05):
        conn.sendall(b"\0" * 65536)


def _bomb(conn: socket.socket, stop: threading.Event) -> None:
    body = zlib.compress(b"\0" * (256 * 2**20), 9)  # 256 MiB in about 250 KB
    conn.sendall(struct.pack("!LB", len(body), 1) + body + b"\n")
    stop.wait(30)


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(30)


@pytest.fixture
def hostile():
    """``hostile(behaviour) -> port``: a loopback server that answers every connection with ``behaviour``."""
    stop = threading.Event()
    servers, threads = [], []

    def start(behaviour) -> int:
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn, contextlib.suppress(OSError):
                    behaviour(conn, stop)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return srv.getsockname()[1]

    yield start
    stop.set()
    for srv in servers:
        srv.close()
    for thread in threads:
        thread.join(5)


BEHAVIOURS = [_random, _http, _drip, _huge, _bomb, _silent]


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda f: f.__name__)
def test_a_peer_that_is_not_rpyc_fails_within_the_timeout(hostile, behaviour):
    port = hostile(behaviour)
    src = TerminalSource("127.0.0.1", port, timeout=1.0, connect_timeout=1.0, retries=0)
    t0 = time.monotonic()
    with pytest.raises(TerminalError) as info:
        src.load("EURUSD", "H1", start="2023-01-02", end="2023-01-03")
    assert time.monotonic() - t0 < 4.0
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "RPyC" in message
