"""The bridge's byte stream with bounds RPyC itself does not set: a deadline on every read and a cap on
the size of a frame.

RPyC's ``sync_request_timeout`` bounds only the wait for an answer to begin. Once a frame header has
arrived, its socket stream reads the announced number of bytes with no time limit (a socket time-out is
retried), so a peer that is not an RPyC server hangs the client for ever: an HTTP reply reads as a
1.2 GB frame, a one-byte-a-second drip never completes one, random bytes announce up to 4 GiB. Here every
read stops at the link's deadline (``TimeoutError``), a frame may announce at most ``MAX_FRAME`` bytes and
a compressed frame may inflate to at most that much (``FrameError``): the connection handshake and each
call are bounded by ``timeout`` whatever the peer sends.
"""

from __future__ import annotations

import socket
import time
import zlib

from rpyc.core.channel import Channel
from rpyc.core.stream import SocketStream

from neuronet.errors import NeuronetError

# The largest answer the terminal source asks for: 100,000 bars of 60 bytes, flattened; 64 MiB leaves room.
MAX_FRAME = 64 * 2**20


class FrameError(NeuronetError, EOFError):
    """The peer sent a frame no RPyC server of ours would send (too large, or not inflatable)."""


class BoundedSocketStream(SocketStream):
    """A socket stream whose reads and writes give up at ``deadline`` (``time.monotonic()`` seconds)."""

    deadline: float | None = None

    def _left(self) -> float | None:
        """Seconds left before the deadline (None: no deadline set, block); past it, close and raise."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.close()
            raise TimeoutError("the peer did not send a whole answer in time")
        return left

    def read(self, count: int) -> bytes:
        if count > MAX_FRAME + 16:
            self.close()
            raise FrameError(f"the peer announced a frame of {count} bytes (at most {MAX_FRAME} expected)")
        data, want = [], count
        while want > 0:
            self.sock.settimeout(self._left())
            try:
                buf = self.sock.recv(min(self.MAX_IO_CHUNK, want))
            except TimeoutError:  # socket.timeout: the loop's deadline check raises
                continue
            except OSError as exc:
                self.close()
                raise EOFError(exc) from None
            if not buf:
                self.close()
                raise EOFError("connection closed by peer")
            data.append(buf)
            want -= len(buf)
        return b"".join(data)

    def write(self, data: bytes) -> None:
        self.sock.settimeout(self._left())
        super().write(data)


class BoundedChannel(Channel):
    """RPyC's channel with the frame size checked before reading and inflating."""

    def recv(self) -> bytes:
        header = self.stream.read(self.FRAME_HEADER.size)
        length, compressed = self.FRAME_HEADER.unpack(header)
        data = self.stream.read(length + len(self.FLUSHER))[: -len(self.FLUSHER)]
        if not compressed:
            return data
        inflate = zlib.decompressobj()
        try:
            out = inflate.decompress(data, MAX_FRAME)
        except zlib.error as exc:
            raise FrameError(f"the peer sent a frame that does not inflate ({exc})") from None
        if inflate.unconsumed_tail:
            raise FrameError(f"the peer sent a frame that inflates beyond {MAX_FRAME} bytes")
        return out


def connect(host: str, port: int, connect_timeout: float) -> BoundedSocketStream:
    """A TCP connection to the bridge (one attempt, ``connect_timeout`` seconds)."""
    sock = socket.create_connection((host, port), timeout=connect_timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return BoundedSocketStream(sock)
