"""Broker server time vs UTC: the one conversion policy of neuronet.

MetaTrader stamps bars in the broker's server time and labels the seconds as if they were UTC. neuronet keeps
every frame in true UTC, so data from two brokers (or a broker and a public archive) line up. A
``BrokerClock`` declares the broker's clock: a standard offset from UTC in hours plus an optional DST rule
(``"us"`` follows New York's switch dates, the common "New York close" convention of FX brokers at UTC+2/+3;
``"eu"`` follows the European Union's). In the hour repeated when clocks go back, broker time is ambiguous;
the conversion picks the earlier, pre-switch reading. Both rules switch on a Sunday while the FX market is
closed, so FX bars never fall in that hour; a 24/7 symbol's two bars of that hour become one UTC time, which
validation reports as a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from datafeeds.errors import DataError


def read_timestamp(value: object) -> pd.Timestamp | None:
    """``pandas.Timestamp(value)``, or None where pandas cannot read ``value`` as a time (NaT included):
    the caller raises its own error, naming the parameter the value came from."""
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        return None
    return None if ts is pd.NaT else ts


def utc_bound(value: object, name: str = "time") -> pd.Timestamp | None:
    """A time given as text, datetime, Timestamp or datetime64, as a UTC Timestamp (naive times are UTC);
    None stays None. The one reading of a user's time bound that every source and the cache use."""
    if value is None:
        return None
    ts = read_timestamp(value)
    if ts is None:
        raise DataError(f"cannot read {name} {value!r} as a date (write 2017-06-01 or 2017-06-01 12:00)")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def utc_seconds(value: object, name: str = "time") -> int | None:
    """``utc_bound`` as whole seconds since 1970 (rounded down), what terminals and archives count in."""
    ts = utc_bound(value, name)
    return None if ts is None else int(ts.value // 10**9)


_DST_ZONES = {"us": "America/New_York", "eu": "Europe/London"}


@dataclass(frozen=True)
class BrokerClock:
    """A broker's server clock: ``utc_offset_hours`` in winter plus one hour while ``dst`` is in effect."""

    utc_offset_hours: float = 0.0
    dst: str = "none"

    def __post_init__(self) -> None:
        if self.dst not in ("none", *_DST_ZONES):
            raise DataError(f"BrokerClock dst must be 'none', 'us' or 'eu', not {self.dst!r}")
        if not -14 <= self.utc_offset_hours <= 14:
            raise DataError(f"BrokerClock utc_offset_hours must be within ±14, not {self.utc_offset_hours}")

    @classmethod
    def parse(cls, text: str) -> BrokerClock:
        """Parse ``"UTC"``, ``"+2"``, ``"UTC+2"``, ``"+2/us"`` or ``"UTC+2:eu"`` (CLI ``--broker-tz``)."""
        raw = text.strip().upper().removeprefix("UTC")
        offset, _, rule = raw.replace(":", "/").partition("/")
        try:
            hours = float(offset) if offset else 0.0
        except ValueError:
            raise DataError(f"cannot read broker time zone {text!r}: write UTC+2 or +2/us") from None
        return cls(hours, rule.lower() or "none")

    def _dst_seconds(self, utc_seconds: np.ndarray) -> np.ndarray:
        if self.dst == "none":
            return np.zeros_like(utc_seconds)
        zone = _DST_ZONES[self.dst]
        utc = pd.to_datetime(utc_seconds, unit="s", utc=True)
        local = utc.tz_convert(zone)
        offset = (local.tz_localize(None) - utc.tz_localize(None)).total_seconds().to_numpy()
        standard = offset.min() if len(offset) else 0.0
        # Standard offset of the zone is fixed (-5 h New York, 0 h London): DST adds one hour to it.
        standard = {"us": -5 * 3600, "eu": 0}[self.dst] if len(offset) else standard
        return (offset - standard).astype(np.int64)

    def to_broker_seconds(self, utc_seconds: np.ndarray) -> np.ndarray:
        utc_seconds = np.asarray(utc_seconds, dtype=np.int64)
        base = round(self.utc_offset_hours * 3600)
        return utc_seconds + base + self._dst_seconds(utc_seconds)

    def to_utc_seconds(self, broker_seconds: np.ndarray) -> np.ndarray:
        broker_seconds = np.asarray(broker_seconds, dtype=np.int64)
        base = round(self.utc_offset_hours * 3600)
        guess = broker_seconds - base
        return broker_seconds - base - self._dst_seconds(guess - 3600)

    def text(self) -> str:
        """The clock as ``parse`` (and the CLI's ``--broker-tz``) takes it: ``UTC``, ``+2``, ``+2/us``."""
        if self == UTC:
            return "UTC"
        return f"{self.utc_offset_hours:+g}" + (f"/{self.dst}" if self.dst != "none" else "")

    def to_dict(self) -> dict:
        return {"utc_offset_hours": self.utc_offset_hours, "dst": self.dst}

    @classmethod
    def from_dict(cls, d: dict) -> BrokerClock:
        return cls(float(d.get("utc_offset_hours", 0.0)), str(d.get("dst", "none")))


UTC = BrokerClock()
