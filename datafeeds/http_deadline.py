"""HTTP(S) GET with one deadline for the whole exchange: connection, TLS handshake, headers and body.

A socket time-out bounds each read, not the request: a server that sends a header byte a second never
trips it, and ``urllib``'s ``timeout`` is exactly such a per-read bound. Here a watchdog timer shuts the
request's sockets down when the deadline passes, which ends any read or write waiting on them at once
(on POSIX and on Windows); the caller then sees ``TimeoutError`` whatever error the cut connection
produced inside ``http.client``. Requests go through ``urllib``'s opener, so proxies from the
environment and redirects work as before.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any


class Deadline:
    """Shuts its watched sockets down ``seconds`` after ``__enter__``; ``expired`` tells whether it did."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._end = time.monotonic() + seconds
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._end = time.monotonic() + self.seconds
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._sockets.clear()

    def left(self) -> float:
        """Seconds until the deadline (a little more than zero once it has passed)."""
        return max(0.001, self._end - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """End both directions of a connection; a closed socket object (``fileno() == -1``) is left alone.
    The plain socket method is used on TLS sockets too: it acts on the connection, not the TLS state."""
    if sock.fileno() == -1:
        return
    with suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watched:
    """A connection whose sockets the deadline watches; its connect waits at most until the deadline."""

    deadline: Deadline

    def _watched_connection(self, address, timeout=None, source_address=None) -> socket.socket:
        sock = socket.create_connection(address, self.deadline.left(), source_address)
        self.deadline.watch(sock)
        return sock


class _HTTPConnection(_Watched, http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: Deadline, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.deadline = deadline
        self._create_connection = self._watched_connection


class _HTTPSConnection(_Watched, http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: Deadline, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.deadline = deadline
        self._create_connection = self._watched_connection

    def connect(self) -> None:
        """``HTTPSConnection.connect`` with the TLS socket watched before its handshake starts."""
        http.client.HTTPConnection.connect(self)  # TCP, and a proxy's CONNECT tunnel if any
        server_hostname = self._tunnel_host or self.host
        self.sock = self._context.wrap_socket(
            self.sock, server_hostname=server_hostname, do_handshake_on_connect=False
        )
        self.deadline.watch(self.sock)
        self.sock.do_handshake()


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(_connection(_HTTPConnection, self.deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req):
        return self.do_open(_connection(_HTTPSConnection, self.deadline), req)


def _connection(cls: type, deadline: Deadline):
    def make(*args: Any, **kw: Any):
        return cls(*args, deadline=deadline, **kw)

    return make


@contextmanager
def get(request: urllib.request.Request, seconds: float) -> Iterator[tuple[Any, Deadline]]:
    """Open ``request``; the response and the deadline, which ends the whole exchange ``seconds`` from
    now. Any failure after the deadline passed is raised as ``TimeoutError``."""
    with Deadline(seconds) as deadline:
        opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
        try:
            with opener.open(request, timeout=seconds) as response:
                yield response, deadline
        except (OSError, http.client.HTTPException, ValueError) as exc:
            # A socket time-out (each socket waits at most until the deadline) is the deadline too.
            late = isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)
            if deadline.expired or late:
                raise TimeoutError(f"the answer did not arrive within {seconds:g} s") from exc
            raise
