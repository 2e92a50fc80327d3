"""Polite, resumable downloads of Dukascopy's archive files, with an on-disk cache of the raw files.

The cache mirrors the archive's paths under ``cache_dir`` (``EURUSD/2023/00/31/BID_candles_min_1.bi5``),
holding the files exactly as downloaded, so a re-run fetches only what is missing. A file is checked
(``check``) before it is cached and is written with ``datafeeds.files.atomic_write`` (temporary file,
fsync, rename): an interrupted or corrupt download never leaves a file that looks complete. The cached
file's path is checked to stay inside ``cache_dir`` before it is read or written. Files of
periods that are not over yet are used but not cached, since the archive still grows them.

Requests: one at a time, at most ``rate_limit`` per second, with a User-Agent naming neuronet. Each one
is bounded by ``timeout`` seconds in all, connection, headers and body together
(``datafeeds.http_deadline``: a socket time-out alone would let a server that sends a byte now and then
hold a download for ever), and a body may hold at most ``MAX_FILE_BYTES``. 5xx answers, 429,
time-outs, dropped connections, answers that are not HTTP and short bodies are retried with exponential
backoff; 404 and 403 are not (they will not change on a retry).
"""

from __future__ import annotations

import http.client
import logging
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from datafeeds import http_deadline
from datafeeds.errors import CandleDataError, DataError
from datafeeds.files import atomic_write, inside
from neuronet.errors import NeuronetError

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_FILE_BYTES = 64 * 2**20  # an archive file is at most a few MB (the busiest hour of ticks)
MAX_TIMEOUT_S = 3600.0  # a request bound that is no bound at all is a typo
MAX_RETRIES = 100
MAX_PAUSE_S = 600.0  # the longest wait between two attempts, however many retries
_CHUNK = 65536
USER_AGENT = "neuronet-datafeeds/0.1 (+https://pypi.org/project/neuronet/; history download)"


class DownloadError(NeuronetError, OSError):
    """A file could not be downloaded; the message names the URL. ``status`` is the HTTP status if any."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])


class NotFoundError(DownloadError, LookupError):
    """HTTP 404: the archive has no such file (usually an unknown symbol, or a date outside its history)."""


class Fetcher:
    """GET archive files below ``base_url`` through the cache in ``cache_dir``."""

    def __init__(
        self,
        base_url: str,
        cache_dir: str | Path,
        *,
        rate_limit: float = 5.0,
        retries: int = 4,
        backoff: float = 1.0,
        timeout: float = 30.0,
        user_agent: str = USER_AGENT,
    ) -> None:
        if not (math.isfinite(rate_limit) and rate_limit > 0):
            raise DataError(f"rate_limit is requests per second and must be > 0, not {rate_limit}")
        if not (0 <= retries <= MAX_RETRIES and math.isfinite(backoff) and 0 <= backoff <= MAX_PAUSE_S):
            raise DataError(f"retries must be 0..{MAX_RETRIES} and backoff 0..{MAX_PAUSE_S:g} seconds")
        if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S):
            raise DataError(f"timeout is seconds per request, more than 0 and at most {MAX_TIMEOUT_S:g}")
        self.base_url = base_url.rstrip("/")
        self.cache_dir = Path(cache_dir)
        self.interval = 1.0 / rate_limit
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.user_agent = user_agent
        self.requests = 0  # HTTP requests made (for logs and tests)
        self._lock = threading.Lock()
        self._next_at = 0.0

    def get(self, rel_path: str, *, cacheable: bool, read: Callable[[bytes, str], T]) -> T:
        """``read(data, origin)`` of the file, from the cache or the archive.

        ``read`` decodes the file and raises ``CandleDataError`` on a bad one: a bad download is not
        cached (and the error names the URL); a bad cached file is logged, dropped and downloaded again.
        """
        path = inside(self.cache_dir, *rel_path.split("/"))
        if path.is_file():
            try:
                return read(path.read_bytes(), str(path))
            except CandleDataError as exc:
                log.warning("%s; downloading it again", exc)
                path.unlink(missing_ok=True)
        url = f"{self.base_url}/{rel_path}"
        data = self._download(url)
        decoded = read(data, url)
        if cacheable:
            atomic_write(path, lambda f: f.write(data))
        return decoded

    def _wait_turn(self) -> None:
        with self._lock:
            now = time.monotonic()
            wait = self._next_at - now
            self._next_at = max(now, self._next_at) + self.interval
        if wait > 0:
            time.sleep(wait)

    def _body(self, response, url: str, deadline: http_deadline.Deadline) -> bytes:
        """The whole body by ``deadline``; a short one raises ``IncompleteRead``, an oversized one refuses."""
        announced = response.headers.get("Content-Length")
        expected = int(announced) if announced and announced.isdigit() else None
        if expected is not None and expected > MAX_FILE_BYTES:
            raise DownloadError(
                f"{url}: the server announces {expected} bytes; archive files are at most {MAX_FILE_BYTES}",
                url=url,
            )
        parts, size = [], 0
        while chunk := response.read1(_CHUNK):
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise DownloadError(f"{url}: more than {MAX_FILE_BYTES} bytes; not an archive file", url=url)
            parts.append(chunk)
        if deadline.expired:  # the connection was cut at the deadline: what came is not the whole file
            raise TimeoutError(f"the file did not arrive within {self.timeout:g} s ({size} bytes so far)")
        body = b"".join(parts)
        if expected is not None and size < expected:
            raise http.client.IncompleteRead(body, expected - size)
        return body

    def _download(self, url: str) -> bytes:
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                pause = min(self.backoff * 2 ** min(attempt - 1, 30), MAX_PAUSE_S)
                log.warning("%s: %s; retry %d of %d in %.1f s", url, problem, attempt, self.retries, pause)
                time.sleep(pause)
            self._wait_turn()
            self.requests += 1
            request = urllib.request.Request(url, headers={"User-Agent": self.user_agent})
            try:
                with http_deadline.get(request, self.timeout) as (response, deadline):
                    return self._body(response, url, deadline)
            except urllib.error.HTTPError as exc:
                exc.close()
                if exc.code == 404:
                    raise NotFoundError(
                        f"{url}: HTTP 404, the archive has no such file; check the symbol (Dukascopy "
                        "names such as EURUSD, USDJPY, XAUUSD) and that the dates lie within its history",
                        url=url,
                        status=404,
                    ) from None
                if exc.code in (401, 403):
                    raise DownloadError(
                        f"{url}: HTTP {exc.code}, the archive refused the request; lower rate_limit or try "
                        "again later",
                        url=url,
                        status=exc.code,
                    ) from None
                if exc.code != 429 and exc.code < 500:
                    message = f"{url}: HTTP {exc.code} {exc.reason}"
                    raise DownloadError(message, url=url, status=exc.code) from None
                problem = f"HTTP {exc.code} {exc.reason}"
            except http.client.IncompleteRead as exc:
                problem = f"the connection closed after {len(exc.partial)} bytes of the file"
            except http.client.HTTPException as exc:  # its message quotes the server's bytes: not shown
                problem = f"the server's answer is not HTTP ({type(exc).__name__})"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", None) or exc
                if isinstance(reason, socket.gaierror):  # no DNS answer: offline, or a typo in base_url
                    host = urllib.parse.urlsplit(url).hostname
                    raise DownloadError(
                        f"{url}: cannot resolve the host {host!r} ({reason.strerror}); check the network "
                        "connection and base_url",
                        url=url,
                    ) from None
                problem = f"network failure ({reason})"
        raise DownloadError(f"{url}: {problem}, after {self.retries + 1} attempts", url=url)
