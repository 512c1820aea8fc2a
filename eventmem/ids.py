"""Globally unique, time-sortable identifiers and UTC timestamps.

Ids are ULIDs: 48 bits of milliseconds and 80 random bits in Crockford base32. Two clones, two
branches or two processes can hand them out at once without coordination; within one process they
are strictly increasing, so events written by one writer sort in the order they were written.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, date, datetime

__all__ = ["new_id", "now_iso", "parse_iso", "to_iso"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """A new ULID, strictly greater than any this process handed out before."""
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            rand = _last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last_ms, _last_rand = ms, rand
    return _encode(ms, 10) + _encode(rand & ((1 << 80) - 1), 16)


def to_iso(moment: datetime) -> str:
    """``2026-11-30T08:26:17.123456Z``: fixed width, so strings sort like times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_iso() -> str:
    return to_iso(datetime.now(UTC))


def parse_iso(text: str) -> datetime:
    """Parse an ISO-8601 time; a time without a zone is taken as UTC."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


_EPOCH_ORDINAL = datetime(1970, 1, 1).toordinal()


def iso_to_epoch(text: str) -> float:
    """Seconds since the epoch; fast for the journal's own fixed-width form."""
    if len(text) == 27 and text[10] == "T" and text[26] == "Z":
        try:
            days = date(int(text[0:4]), int(text[5:7]), int(text[8:10])).toordinal() - _EPOCH_ORDINAL
            seconds = int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])
            return days * 86400 + seconds + int(text[20:26]) / 1_000_000
        except ValueError:
            pass
    return parse_iso(text).timestamp()
