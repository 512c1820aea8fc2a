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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (numpy is imported by isos_to_epochs: a server answers initialize before it)
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ULID_PREFIX_MIN",
    "canonical_id",
    "isos_to_epochs",
    "looks_like_prefix",
    "new_id",
    "now_iso",
    "parse_iso",
    "to_iso",
]

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


_ULID_CHARS = frozenset(_ALPHABET)
ULID_PREFIX_MIN = 6
"""The fewest leading characters of an id the command line and the web UI take for the whole id."""


def canonical_id(text: str) -> str:
    """An id as the journal writes it: a ULID in upper case (its spec makes it case-insensitive);
    any other id (``section:project``, an imported one) as given."""
    if len(text) == 26:
        upper = text.upper()
        if _ULID_CHARS.issuperset(upper):
            return upper
    return text


def too_short_for_a_prefix(text: str) -> bool:
    """Whether ``text`` could start a ULID but is too short to stand for one (1 to 5 characters)."""
    return 0 < len(text) < ULID_PREFIX_MIN and _ULID_CHARS.issuperset(text.upper())


def looks_like_prefix(text: str) -> bool:
    """Whether ``text`` could be the start of a ULID long enough to stand for it (6 to 25 characters)."""
    return ULID_PREFIX_MIN <= len(text) < 26 and _ULID_CHARS.issuperset(text.upper())


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


def isos_to_epochs(texts: list[str]) -> npt.NDArray[np.float64]:
    """:func:`iso_to_epoch` of many times at once, with the same results to the last bit.

    The journal's fixed-width form is read with numpy (digits, then days from the civil date);
    any other text goes through :func:`iso_to_epoch` on its own, and raises as it does."""
    import numpy as np

    digit_columns = np.array([i for i in range(26) if i not in (4, 7, 10, 13, 16, 19)])
    separators = np.array([ord(c) for c in "--T::."], np.uint32)
    month_lengths = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
    count = len(texts)
    form = [len(t) == 27 and t[26] == "Z" for t in texts]
    chars = np.array([t[:26] if ok else "0000-00-00T00:00:00.000000" for t, ok in zip(texts, form, strict=True)])
    codes = chars.astype("U26").view(np.uint32).reshape(count, 26).astype(np.int64)
    digits = codes[:, digit_columns] - ord("0")
    good = np.array(form, bool) & ((digits >= 0) & (digits <= 9)).all(axis=1)
    good &= (codes[:, [4, 7, 10, 13, 16, 19]] == separators).all(axis=1)
    digits = np.where(good[:, None], digits, 0)

    def number(first: int, width: int) -> npt.NDArray[np.int64]:
        value = np.zeros(count, np.int64)
        for column in range(first, first + width):
            value = value * 10 + digits[:, column]
        return value

    year, month, day = number(0, 4), number(4, 2), number(6, 2)
    hour, minute, second, micro = number(8, 2), number(10, 2), number(12, 2), number(14, 6)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    valid_month = (month >= 1) & (month <= 12)
    month_days = month_lengths[np.where(valid_month, month, 0)] + (leap & (month == 2))
    good &= (year >= 1) & valid_month & (day >= 1) & (day <= month_days)
    # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
    shifted = year - (month <= 2)
    era = shifted // 400
    of_era = shifted - era * 400
    of_year = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    days = era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468
    whole = days * 86400 + hour * 3600 + minute * 60 + second
    out: npt.NDArray[np.float64] = whole.astype(np.float64) + micro / 1_000_000
    for i in np.flatnonzero(~good).tolist():
        out[i] = iso_to_epoch(texts[i])
    return out
