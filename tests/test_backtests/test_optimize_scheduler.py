"""``--scheduler`` against peers that are not Dask schedulers, on real loopback sockets: one that accepts
and says nothing, one that drips a byte a second, one that sends garbage, one that announces a huge frame,
an HTTP server. Each is one line within the connection deadline (Dask's own connect timeout does not
cover the handshake, so such peers held ``Client()`` for ever); a string that is not an address fails
before any data is read."""

from __future__ import annotations

import os
import socket
import threading
import time

import distributed.comm  # noqa: F401  (imported once here: the deadline, not an import on a busy machine, is timed)
import pytest

from backtests.optimize import engine
from backtests.optimize.engine import reach, scheduler_address
from backtests.optimize.errors import ClusterError, OptimizeError
from neuronet.cli import main

DEADLINE = 2.0


def _talk(conn: socket.socket, behaviour: str, stop: threading.Event) -> None:
    try:
        if behaviour == "drip":
            while not stop.wait(1.0):
                conn.sendall(b"\x01")
        elif behaviour == "garbage":
            conn.sendall(os.urandom(65536))
        elif behaviour == "huge":
            conn.sendall(b"\xff" * 64)
        elif behaviour == "http":
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        stop.wait(60)
    except OSError:
        pass
    finally:
        conn.close()


@pytest.fixture
def peer(request):
    """A loopback server with the given behaviour; yields its tcp:// address."""
    stop = threading.Event()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_talk, args=(conn, request.param, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    server.close()


BEHAVIOURS = ["silent", "drip", "garbage", "huge", "http"]


@pytest.mark.parametrize("peer", BEHAVIOURS, indirect=True)
def test_a_peer_that_is_not_a_scheduler_fails_within_the_deadline(peer):
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler|does not answer as a Dask"):
        reach(peer, DEADLINE)
    assert time.monotonic() - started < DEADLINE + 3


@pytest.mark.parametrize("peer", ["silent", "drip"], indirect=True)
def test_the_command_line_gives_one_line_and_status_2(peer, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", DEADLINE)
    started = time.monotonic()
    with pytest.raises(SystemExit) as code:
        main(["optimize", "sma", "-p", "fast=5,10", "--to", "2017-06-01", "--scheduler", peer,
              "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert code.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and peer in err and "within 2 s" in err
    assert time.monotonic() - started < 60  # data, then at most the deadline


@pytest.mark.parametrize("text", ["garbage", "tcp://", "tcp://host", "tcp://host:99999", "http://host:80",
                                  "inproc://x:1", "tcp://host:port"])  # fmt: skip
def test_a_string_that_is_not_an_address_is_refused_before_any_data(text, capsys, tmp_path):
    with pytest.raises(OptimizeError, match="not a Dask scheduler address"):
        scheduler_address(text)
    with pytest.raises(SystemExit) as code:
        main(["optimize", "sma", "-p", "fast=5,10", "--csv", str(tmp_path / "absent.csv"),
              "--scheduler", text, "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert code.value.code == 2 and "--scheduler" in err and "absent.csv" not in err
    assert len(err.strip().splitlines()) == 1


def test_host_and_port_alone_mean_tcp():
    assert scheduler_address("127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    assert scheduler_address(" tcp://[::1]:8786 ") == "tcp://[::1]:8786"


def test_a_real_scheduler_completes_the_handshake():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        reach(cluster.scheduler_address, 10)


def test_a_port_where_nothing_listens_fails_within_the_deadline():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"  # bound, never listening: refused
        started = time.monotonic()
        with pytest.raises(ClusterError, match="cannot reach the Dask scheduler"):
            reach(address, DEADLINE)
    assert time.monotonic() - started < DEADLINE + 3
