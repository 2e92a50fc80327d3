"""Dukascopy's ``.bi5`` files: LZMA-compressed arrays of big-endian records.

Two record layouts (prices are integers counted in the instrument's point, 10**-digits):

- ticks, one file per hour (``HHh_ticks.bi5``), 20 bytes: uint32 milliseconds since the hour,
  uint32 ask, uint32 bid, float32 ask volume, float32 bid volume;
- candles (``BID_candles_min_1.bi5`` per day, ``BID_candles_hour_1.bi5`` per month), 24 bytes: uint32
  seconds since the start of the file's period, uint32 open, close, low, high (in that order), float32
  volume.

The compression is the legacy ``.lzma`` container (``lzma.FORMAT_ALONE``); ``FORMAT_AUTO`` also takes
``.xz``. A 0-byte file is valid and means "no data in this period" (weekends, holidays). A stream that
does not reach its end marker, or does not hold whole records, is a corrupt or truncated download and
raises ``CandleDataError`` naming where it came from, and so does one that inflates beyond ``MAX_PAYLOAD``
(the busiest hour of ticks is a few MB; a small file that inflates to gigabytes is not a download).
"""

from __future__ import annotations

import lzma

import numpy as np

from datafeeds.errors import CandleDataError

MAX_PAYLOAD = 256 * 2**20

TICK_RECORD = np.dtype(
    [("ms", ">u4"), ("ask", ">u4"), ("bid", ">u4"), ("ask_volume", ">f4"), ("bid_volume", ">f4")]
)
CANDLE_RECORD = np.dtype(
    [
        ("seconds", ">u4"),
        ("open", ">u4"),
        ("close", ">u4"),
        ("low", ">u4"),
        ("high", ">u4"),
        ("volume", ">f4"),
    ]
)


def decompress(raw: bytes, origin: str) -> bytes:
    """The decompressed payload of a ``.bi5`` file (``b""`` for an empty file)."""
    if not raw:
        return b""
    decoder = lzma.LZMADecompressor(format=lzma.FORMAT_AUTO)
    try:
        payload = decoder.decompress(raw, max_length=MAX_PAYLOAD)
    except lzma.LZMAError as exc:
        raise CandleDataError(origin, f"not a readable bi5 (LZMA) file: {exc}") from None
    if not decoder.eof and len(payload) >= MAX_PAYLOAD:
        raise CandleDataError(origin, f"bi5 file inflates beyond {MAX_PAYLOAD} bytes: not an archive file")
    if not decoder.eof:
        raise CandleDataError(origin, f"truncated bi5 file: the LZMA stream stops after {len(raw)} bytes")
    return payload


def _records(raw: bytes, dtype: np.dtype, origin: str, kind: str) -> np.ndarray:
    payload = decompress(raw, origin)
    if len(payload) % dtype.itemsize:
        size = dtype.itemsize
        raise CandleDataError(origin, f"{len(payload)} bytes of {kind} data is not whole {size}-byte records")
    return np.frombuffer(payload, dtype=dtype)


def read_ticks(raw: bytes, origin: str) -> np.ndarray:
    """Tick records (``TICK_RECORD``, big-endian as stored) of one hourly tick file."""
    ticks = _records(raw, TICK_RECORD, origin, "tick")
    if len(ticks) and int(ticks["ms"].max()) >= 3_600_000:
        raise CandleDataError(origin, "tick time offset beyond the file's hour")
    return ticks


def read_candles(raw: bytes, origin: str, period_seconds: int) -> np.ndarray:
    """Candle records (``CANDLE_RECORD``) of one candle file covering ``period_seconds``."""
    candles = _records(raw, CANDLE_RECORD, origin, "candle")
    if len(candles) and int(candles["seconds"].max()) >= period_seconds:
        raise CandleDataError(origin, "candle time offset beyond the file's period")
    return candles
